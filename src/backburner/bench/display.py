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

from .. import safepath, spawn
from ..errors import UnavailableError, UsageError

FAMILY_LOCAL, FAMILY_WILD = 256, 65535
COOKIE = "MIT-MAGIC-COOKIE-1"
CHROOT_COOKIE = ".backburner-x11-cookie"
START_TIMEOUT_S = 20.0


def parse_ready(text: str) -> re.Pattern[str] | None:
    """``window`` (any top-level window) or ``window:REGEX`` (one whose title matches)."""
    kind, _, pattern = text.partition(":")
    if kind != "window":
        raise UsageError(f"--ready {text!r}: unknown mode", "use window or window:TITLE-REGEX")
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


def write_cookie(path: str) -> None:
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
        write_cookie(self.cookie)
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
        from Xlib import X
        from Xlib import display as xdisplay

        with _environ("XAUTHORITY", self.cookie):
            self._conn = xdisplay.Display(f":{self.number}")
        root = self._conn.screen().root
        root.change_attributes(event_mask=X.SubstructureNotifyMask)
        self._conn.sync()

    def arm(self, title: re.Pattern[str] | None) -> None:
        """From now on, wait for a new top-level window (whose title matches ``title``)."""
        with self._lock:
            self._title, self._armed, self._shown_ns = title, True, None
            self._pending.clear()

    def shown(self) -> int | None:
        with self._lock:
            return self._shown_ns

    def _watch(self) -> None:
        conn = self._conn
        fd = conn.fileno()
        while not self._stop.is_set():
            if not conn.pending_events():
                ready, _, _ = select.select([fd], [], [], 0.2)
                if not ready:
                    continue
            try:
                event = conn.next_event()
            except Exception:  # noqa: BLE001 - the server went away: nothing more to see
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
            if title is None or self._title_matches(event.window, title):
                self._seen(now)
            else:  # the title may come later
                event.window.change_attributes(event_mask=X.PropertyChangeMask)
                self._pending.add(event.window.id)
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


@contextlib.contextmanager
def _environ(name: str, value: str) -> Iterator[None]:
    """python-xlib reads the cookie file's name from the environment only: set it for the
    connection and put it back, so that nothing else we start inherits it."""
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            del os.environ[name]
        else:
            os.environ[name] = old
