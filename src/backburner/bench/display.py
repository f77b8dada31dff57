"""A headless X display for GUI probes, and the moment a probe's first window appears.

What a user feels of a desktop program's start is the moment its window shows, not the
moment it exits (`--terminate_after_init` and the like are proxies). `--ready window` times
a probe to its first top-level window mapped on a private X server (Xvfb, from Debian's
`xvfb`): the server is ours for the run, started through `spawn` (it dies with us), reached
only with a fresh MIT-MAGIC-COOKIE in a private file (no other user can connect, and no
`-ac`), and never on TCP. A watcher connected to it (python-xlib: the X protocol in pure
Python) listens for MapNotify on the root window: a child of the root that is not
override-redirect (not a tooltip, menu or splash without a window manager's say) is a
top-level window; with a title pattern, the first such window whose WM_NAME or
_NET_WM_NAME matches, even when the title is set after the window is mapped.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import shutil
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

from .. import spawn
from ..base.errors import UnavailableError, UsageError
from ..files import safepath

FAMILY_LOCAL, FAMILY_WILD = 256, 65535
COOKIE = "MIT-MAGIC-COOKIE-1"
CHROOT_COOKIE = ".backburner-x11-cookie"
START_TIMEOUT_S = 20.0


def parse_ready(text: str) -> re.Pattern[str] | None:
    """``window`` (any top-level window) or ``window:REGEX`` (one whose title matches)."""
    kind, colon, pattern = text.partition(":")
    if kind != "window":
        raise UsageError(f"--ready {text!r}: unknown mode", "use window or window:TITLE-REGEX")
    if colon and not pattern:
        raise UsageError(f"--ready {text!r}: the title pattern is empty",
                         "use window (any window) or window:TITLE-REGEX")
    if not pattern:
        return None
    try:
        return re.compile(pattern)
    except re.error as err:
        raise UsageError(f"--ready {text!r}: the title pattern is not a regex: {err}") from None


def require_tools() -> None:
    """Before anything is built: the server and the protocol library are here."""
    if shutil.which("Xvfb") is None:
        raise UnavailableError("--ready window needs Xvfb, which is not installed",
                               "apt-get install xvfb")
    try:
        import Xlib  # noqa: F401
    except ImportError:
        raise UnavailableError("--ready window needs python-xlib, which is not installed",
                               "apt-get install python3-xlib, or pip install "
                               "'backburner[gui]'") from None


def write_cookie(path: str) -> bytes:
    """An Xauthority file with one fresh cookie, for the server (-auth) and the clients:
    a FamilyLocal entry for this host (what libX11 and python-xlib look up on a local
    socket) and a FamilyWild one, both for any display number."""
    data = os.urandom(16)
    host = socket.gethostname().encode()

    def entry(family: int, address: bytes) -> bytes:
        fields = (address, b"", COOKIE.encode(), data)
        return struct.pack(">H", family) + b"".join(struct.pack(">H", len(f)) + f
                                                   for f in fields)

    with os.fdopen(safepath.create_new(path), "wb") as f:
        f.write(entry(FAMILY_LOCAL, host) + entry(FAMILY_WILD, b""))
    return data


class Display:
    """A private Xvfb and a watcher of its windows; ``env`` is what a probe needs to use it.

    ``with Display(workdir) as d:`` starts both; per trial, ``d.arm(title)`` forgets
    earlier windows and ``d.shown()`` is the monotonic time (ns) the wanted one appeared."""

    def __init__(self, workdir: str) -> None:
        self.cookie = os.path.join(workdir, "x11-cookie")
        self.server: spawn.Child | None = None
        self.number = -1
        self._conn: Any = None
        self._lock = threading.Lock()
        self._title: re.Pattern[str] | None = None
        self._armed = False
        self._shown_ns: int | None = None
        self._pending: set[int] = set()  # mapped, title not (yet) matching
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._copied: list[str] = []  # testbed roots given a copy of the cookie
        self._secret = b""
        self._failed = ""  # why the watcher stopped, if it did

    @property
    def env(self) -> dict[str, str]:
        return {"DISPLAY": f":{self.number}", "XAUTHORITY": self.cookie}

    def env_for(self, chroot: str | None) -> dict[str, str]:
        """What a probe needs to reach the display; inside a testbed the cookie is copied
        to its root (the server's socket is an abstract one: no path to bind in)."""
        if chroot is None:
            return self.env
        if chroot not in self._copied:
            target = os.path.join(chroot, CHROOT_COOKIE)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(target)  # whatever a probe left there: ours is written anew
            with open(self.cookie, "rb") as src, \
                    os.fdopen(safepath.create_new(target), "wb") as dst:
                dst.write(src.read())
            self._copied.append(chroot)
        return {**self.env, "XAUTHORITY": "/" + CHROOT_COOKIE}

    def __enter__(self) -> Display:
        try:
            self._start_server()
            self._connect()
        except BaseException:
            self.close()
            raise
        self._thread = threading.Thread(target=self._watch, name="x11-windows", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _start_server(self) -> None:
        require_tools()
        self._secret = write_cookie(self.cookie)
        rfd, wfd = os.pipe2(os.O_CLOEXEC)
        try:
            self.server = spawn.launch(
                ["Xvfb", "-displayfd", str(wfd), "-auth", self.cookie, "-nolisten", "tcp",
                 "-nolisten", "unix",
                 "-noreset", "-screen", "0", "1280x800x24"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                pass_fds=(wfd,), new_group=True, die_with_parent=True)
            os.close(wfd)
            wfd = -1
            self.number = int(_read_line(rfd, START_TIMEOUT_S, self.server))
        finally:
            os.close(rfd)
            if wfd >= 0:
                os.close(wfd)

    def _connect(self) -> None:
        """The watcher's connection: on the server's abstract socket only, with our cookie.
        python-xlib would prefer /tmp/.X11-unix/X<n> whenever that path exists, and any
        user can create it (Xvfb here makes none): connecting there would hand the cookie
        to whoever listens. So its socket and auth look-ups are ours for this call."""
        from Xlib import X
        from Xlib import display as xdisplay
        from Xlib import error as xerror
        from Xlib.support import connect

        def socket_(*_args: object) -> socket.socket:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
            sock.connect(f"\0/tmp/.X11-unix/X{self.number}")
            return sock

        def auth(*_args: object) -> tuple[bytes, bytes]:
            return COOKIE.encode(), self._secret

        with _CONNECT, _swapped(connect, get_socket=socket_, get_auth=auth):
            try:
                self._conn = xdisplay.Display(f":{self.number}")
            except (OSError, xerror.DisplayError, xerror.ConnectionClosedError) as err:
                raise UnavailableError(f"could not reach the private X server :"
                                       f"{self.number}: {err}") from None
        root = self._conn.screen().root
        root.change_attributes(event_mask=X.SubstructureNotifyMask)
        self._conn.sync()

    def arm(self, title: re.Pattern[str] | None) -> None:
        """From now on, wait for a new top-level window (whose title matches ``title``)."""
        with self._lock:
            self._title, self._armed, self._shown_ns = title, True, None
            self._pending.clear()

    def shown(self) -> int | None:
        """When the wanted window appeared (monotonic ns), None while not yet; an error if
        the server or the watcher's connection died (every later trial would time out)."""
        with self._lock:
            if self._shown_ns is None and self._failed:
                raise UnavailableError(f"the private X server :{self.number} went away: "
                                       f"{self._failed}")
            return self._shown_ns

    def _watch(self) -> None:
        conn = self._conn
        fd = conn.fileno()
        while not self._stop.is_set():
            try:
                if not conn.pending_events():
                    ready, _, _ = select.select([fd], [], [], 0.2)
                    if not ready:
                        continue
                event = conn.next_event()
            except Exception as err:  # noqa: BLE001 - the server went away: said by shown()
                with self._lock:
                    self._failed = str(err) or type(err).__name__
                return
            self._on_event(event, time.monotonic_ns())

    def _on_event(self, event: Any, now: int) -> None:
        from Xlib import X

        root = self._conn.screen().root
        with self._lock:
            if not self._armed or self._shown_ns is not None:
                return
            title = self._title
        if event.type == X.MapNotify and event.event == root and not event.override:
            if title is None:
                self._seen(now)
                return
            # listen for a title set later before reading it now: one set in between
            # would otherwise be seen by neither
            with contextlib.suppress(Exception):  # the window may already be gone
                event.window.change_attributes(event_mask=X.PropertyChangeMask)
            self._pending.add(event.window.id)
            if self._title_matches(event.window, title):
                self._seen(now)
        elif event.type == X.PropertyNotify and event.window.id in self._pending \
                and title is not None and self._title_matches(event.window, title):
            self._seen(now)
        elif event.type in (X.UnmapNotify, X.DestroyNotify):
            self._pending.discard(event.window.id)

    def _seen(self, now: int) -> None:
        with self._lock:
            if self._shown_ns is None:
                self._shown_ns = now

    def _title_matches(self, window: Any, title: re.Pattern[str]) -> bool:
        names = []
        with contextlib.suppress(Exception):  # the window may already be gone
            net = window.get_full_text_property(self._conn.intern_atom("_NET_WM_NAME"))
            names.append(net or "")
            names.append(window.get_wm_name() or "")
        return any(title.search(n) for n in names if isinstance(n, str))

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
            self._thread = None
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None
        if self.server is not None:
            self.server.stop(2.0)
            self.server = None
        for path in [self.cookie, *(os.path.join(c, CHROOT_COOKIE) for c in self._copied)]:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)


def _read_line(fd: int, timeout: float, server: spawn.Child) -> str:
    """The display number Xvfb writes to -displayfd once it accepts connections."""
    deadline = time.monotonic() + timeout
    buf = b""
    while b"\n" not in buf:
        left = deadline - time.monotonic()
        if left <= 0:
            raise UnavailableError(f"Xvfb did not start within {timeout:.0f} s")
        ready, _, _ = select.select([fd], [], [], min(left, 0.2))
        if ready:
            chunk = os.read(fd, 64)
            if not chunk:
                break
            buf += chunk
        elif server.poll() is not None:
            break
    if not buf.strip().isdigit():
        raise UnavailableError("Xvfb did not start (it named no display)",
                               "run `Xvfb -displayfd 1` to see why")
    return buf.decode().strip()


_CONNECT = threading.Lock()  # one swapped connection at a time


@contextlib.contextmanager
def _swapped(module: Any, **functions: Any) -> Iterator[None]:
    """``module``'s functions replaced for the duration, and put back."""
    old = {name: getattr(module, name) for name in functions}
    for name, fn in functions.items():
        setattr(module, name, fn)
    try:
        yield
    finally:
        for name, fn in old.items():
            setattr(module, name, fn)
