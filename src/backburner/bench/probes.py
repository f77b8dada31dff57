"""Probes: the foreground program whose start-up is timed.

A probe is timed from spawn to exit, or to "ready" (a regex on its stdout, a file
appearing, or its first window shown on a private X display: `display`) for programs that
do not exit by themselves; it is then terminated. On a testbed
the probe's own files must be read from the device under test, so `discover_files` records
what the probe touches with strace (the field's real tool) and `install` copies exactly
those files into the testbed, where the probe then runs chrooted. A probe run on the host
(discovery, or trials on a `path` device) writes into a `Scratch` of ours instead of the
host's home and /tmp.
"""

from __future__ import annotations

import codecs
import os
import re
import shlex
import shutil
import signal
import stat
import subprocess
from dataclasses import dataclass, field, replace
from pathlib import Path

from .. import spawn
from ..base.errors import CommandNotFound, UnavailableError, UsageError
from ..base.quantities import slug
from ..files import logtail
from . import display
from .packages import private_env

VIRTUAL_ROOTS = ("/proc", "/sys", "/dev", "/run", "/tmp")


@dataclass(frozen=True)
class Probe:
    argv: tuple[str, ...]
    ready_line: str | None = None
    ready_file: str | None = None
    label: str = ""  # how cells name it: the command as typed, or the NAME= given
    ready_window: str | None = None  # "window" or "window:TITLE-REGEX" (display.parse_ready)

    @property
    def label_slug(self) -> str:
        return slug(self.label or self.argv[0], 40)

    @classmethod
    def parse(cls, text: str, ready_line: str | None = None,
              ready_file: str | None = None, label: str | None = None,
              ready_window: str | None = None) -> Probe:
        try:
            argv = tuple(shlex.split(text))
        except ValueError as err:
            raise UsageError(f"probe {text!r} does not parse: {err}") from None
        if not argv:
            raise UsageError("the probe command is empty")
        if ready_line is not None:
            try:
                re.compile(ready_line)
            except re.error as err:
                raise UsageError(f"--ready-line {ready_line!r} is not a regex: {err}") from None
        if ready_window is not None:
            display.parse_ready(ready_window)
        return cls(argv, ready_line, ready_file, label if label is not None else text,
                   ready_window)

    @property
    def text(self) -> str:
        return shlex.join(self.argv)

    def resolve(self) -> Probe:
        """The probe with its program as an absolute path; a clear error if it does not exist."""
        exe = shutil.which(self.argv[0])
        if exe is None:
            raise CommandNotFound(f"probe {self.argv[0]!r}: command not found",
                                  "give the probe as a command on PATH or an absolute path")
        return replace(self, argv=(os.path.realpath(exe), *self.argv[1:]))


class ProbeOutput:
    """Where the probe's output goes: shown on the terminal (--show-output), or its stderr
    kept in a private file whose last lines are stored with a failed trial."""

    TAIL_LINES = 5
    TAIL_CHARS = 600

    def __init__(self, workdir: str, show: bool = False) -> None:
        self.show = show
        self.path = os.path.join(workdir, "probe.stderr")
        self._fd: int | None = None

    def streams(self) -> dict[str, int | None]:
        """Streams for one probe start; `release()` after it, so that no descriptor of ours
        keeps the device under test busy (a path device must unmount when we are done)."""
        if self.show:
            return {"stdout": None, "stderr": None}
        self.release()
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
                           | os.O_CLOEXEC, 0o600)
        return {"stdout": subprocess.DEVNULL, "stderr": self._fd}

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def tail(self) -> list[str]:
        if self.show:
            return []
        return logtail.last_lines(self.path, self.TAIL_LINES, self.TAIL_CHARS)


def _under_tmp(path: str) -> str | None:
    """`path` relative to the shared /tmp, if it lies inside it."""
    prefix = spawn.SHARED_TMP + os.sep
    return path[len(prefix):] if path.startswith(prefix) else None


@dataclass(frozen=True)
class Scratch:
    """Where a probe run on the host writes: HOME and the XDG directories, TMPDIR, and /tmp
    itself (an overlay of the host's: LibreOffice's IPC socket ignores TMPDIR). A start is
    then the same in every bench (no profile left by an earlier one, as in a fresh testbed)
    and nothing of it is left on the host; it goes with the bench's private workdir. The
    probe reads the host's /tmp through the overlay, but cannot connect to a socket there
    (overlayfs's rule; X11 clients reach a display by its abstract socket). A scratch that
    lies in /tmp itself (a state directory there) cannot be a layer over it (overlayfs
    refuses overlapping layers): the probe then gets only the private HOME and TMPDIR."""

    root: str
    overlay: bool

    @classmethod
    def make(cls, workdir: str, name: str) -> Scratch:
        root = os.path.join(workdir, name)
        os.mkdir(root, 0o700)
        os.mkdir(os.path.join(root, "home"), 0o700)
        overlay = _under_tmp(os.path.realpath(root)) is None
        if overlay:
            spawn.prepare_private_tmp(os.path.join(root, "tmp"))
        else:
            os.mkdir(os.path.join(root, "tmp"), 0o700)
        return cls(root, overlay)

    @property
    def private_tmp(self) -> str | None:
        """The directory `spawn.launch` lays over /tmp, if any."""
        return os.path.join(self.root, "tmp") if self.overlay else None

    def env(self) -> dict[str, str]:
        tmpdir = spawn.SHARED_TMP if self.overlay else os.path.join(self.root, "tmp")
        return private_env(os.path.join(self.root, "home"), tmpdir)

    def seen(self, path: str) -> str:
        """Where we find a file the probe writes at `path`: under an overlaid /tmp, in the
        overlay's upper layer."""
        rel = _under_tmp(path) if self.overlay else None
        return os.path.join(self.root, "tmp", spawn.TMP_UPPER, rel) if rel else path

    def holds(self, path: str) -> bool:
        return path == self.root or path.startswith(self.root + "/")


@dataclass
class ProbeResult:
    status: str  # ok | failed | timeout
    outcome: spawn.Outcome | None
    wall_s: float
    detail: dict[str, object] = field(default_factory=dict)


_PATH_CALL = re.compile(
    r'^(?:\d+\s+)?(execve|open|openat|stat|lstat|newfstatat|statx|access|faccessat2?|readlink'
    r'|readlinkat)\((?:AT_FDCWD, |\d+, )?"((?:[^"\\]|\\.)*)".*\)\s+=\s+(-?\d+)')


#: A PID namespace whose first process is SIGKILLed when unshare dies (unshare itself gets
#: the parent-death signal): when the first process of a PID namespace dies, the kernel
#: kills every other process in it.
DIES_WITH_ITS_FIRST = ["unshare", "--pid", "--fork", "--kill-child=SIGKILL"]


def discover_files(probe: Probe, workdir: str, timeout: float = 120,
                   screen: display.Display | None = None) -> list[str]:
    """Every path the probe successfully opened, executed, stat'ed or read a link of,
    other than what it made for itself in its scratch (a new profile, a socket in /tmp).

    strace writes its trace into `workdir` (a private directory of ours), and it is
    stopped with the probe if we are interrupted: no trace file is ever left elsewhere.
    It runs as the first process of a PID namespace of its own that dies with us: killed,
    we take down strace, and the kernel the rest of the namespace with it. strace alone,
    ended by the parent-death signal, would leave its tracees running (detached), or the
    child it forked for the probe paused forever if it had not yet exec'd it (found by the
    fault injection: SIGKILL at the start of discovery). The probe sees other PIDs for itself
    (getpid), but /proc/self is still its own."""
    if shutil.which("strace") is None:
        raise UnavailableError("strace is not installed", "apt-get install strace")
    if shutil.which("unshare") is None:
        raise UnavailableError("unshare is not installed", "apt-get install util-linux")
    # -ff: one file per thread, so no call is split into <unfinished ...>/<... resumed>
    # halves (a multi-threaded probe's opens would be lost)
    trace = os.path.join(workdir, f"discover-{probe.label_slug}.strace")
    argv = [*DIES_WITH_ITS_FIRST, "strace", "-ff", "-qq", "-o", trace, "-e",
            "trace=execve,open,openat,stat,lstat,newfstatat,statx,access,faccessat,"
            "faccessat2,readlink,readlinkat", *probe.argv]
    traced = replace(probe, argv=tuple(argv))
    ready_existed = probe.ready_file is not None and os.path.lexists(probe.ready_file)
    scratch = Scratch.make(workdir, f"discover-{probe.label_slug}.scratch")
    try:
        result = time_probe(traced, timeout, cwd="/", always_die_with_us=True,
                            death_signal=signal.SIGKILL,  # unshare holds SIGTERM back
                            screen=screen, scratch=scratch)
        if result.status == "timeout":
            raise UsageError(f"probe {probe.text!r} did not finish within {timeout:.0f}s")
        if not _per_thread(trace):  # the namespace or strace never started the probe
            how = result.outcome.describe() if result.outcome else result.status
            raise UnavailableError(f"the probe's files could not be traced: "
                                   f"{' '.join(DIES_WITH_ITS_FIRST)} strace {how}",
                                   "a new PID namespace needs CAP_SYS_ADMIN")
        paths = [path for name in _per_thread(trace) for path in _paths_in(name)
                 if not scratch.holds(path) and not _made_in(scratch, path)]
    finally:
        for name in _per_thread(trace):
            os.unlink(name)
        shutil.rmtree(scratch.root)
        if probe.ready_file is not None and not ready_existed:
            _clear_ready(probe.ready_file, None)  # the host as we found it
    return sorted(set(paths))


def _made_in(scratch: Scratch, path: str) -> bool:
    """A path under /tmp that the probe itself wrote (it is in the overlay's upper layer)."""
    return scratch.seen(path) != path and os.path.lexists(scratch.seen(path))


def _per_thread(trace: str) -> list[str]:
    prefix = os.path.basename(trace) + "."
    directory = os.path.dirname(trace)
    return [os.path.join(directory, n) for n in os.listdir(directory)
            if n.startswith(prefix) and n[len(prefix):].isdigit()]


def _paths_in(trace: str) -> list[str]:
    paths = []
    text = Path(trace).read_text(encoding="utf-8", errors="surrogateescape")
    for line in text.splitlines():
        m = _PATH_CALL.match(line)
        if m and int(m.group(3)) >= 0:
            # strace escapes non-ASCII bytes as octal (\303\274): back to the raw bytes,
            # then to a str the way os does it (UTF-8, surrogateescape for the rest)
            raw = codecs.escape_decode(m.group(2).encode(errors="surrogateescape"))[0]
            path = os.fsdecode(raw)
            paths.append(os.path.normpath(os.path.join("/", path)))
    return paths


def _clear_ready(path: str, chroot: str | None) -> None:
    """Remove a ready file left by an earlier start, so that this one is timed to its own.
    Inside a testbed, only through directories that stay inside it (the probe may have
    planted a symlink there)."""
    if chroot is not None:
        parent = os.path.realpath(os.path.dirname(path))
        if parent != chroot and not parent.startswith(chroot.rstrip("/") + "/"):
            raise UsageError(f"--ready-file {path!r} leads outside the testbed")
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except IsADirectoryError:
        raise UsageError(f"--ready-file {path!r} is a directory") from None


def exec_interpreters(path: str) -> list[str]:
    """Files the kernel opens itself at execve (never seen by strace's open calls): the ELF
    program interpreter (PT_INTERP) or a script's #! interpreter."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if head.startswith(b"#!"):
                f.seek(0)
                line = f.readline(256)[2:].decode(errors="replace").split()
                return line[:1]
            if head[:4] != b"\x7fELF" or head[4] != 2:  # 64-bit ELF only
                return []
            phoff = int.from_bytes(head[0x20:0x28], "little")
            phentsize = int.from_bytes(head[0x36:0x38], "little")
            phnum = int.from_bytes(head[0x38:0x3A], "little")
            for i in range(phnum):
                f.seek(phoff + i * phentsize)
                ph = f.read(phentsize)
                if int.from_bytes(ph[0:4], "little") == 3:  # PT_INTERP
                    off = int.from_bytes(ph[8:16], "little")
                    size = int.from_bytes(ph[32:40], "little")
                    f.seek(off)
                    return [f.read(size).rstrip(b"\0").decode()]
    except OSError:
        pass
    return []


def is_virtual(path: str) -> bool:
    return any(path == r or path.startswith(r + "/") for r in VIRTUAL_ROOTS)


def mirror(path: str, root: str, depth: int = 0) -> bool:
    """Recreate path under root component by component: a symlink in the path (merged /usr:
    /lib -> usr/lib) is recreated as a symlink and followed. True if a file was copied."""
    if depth > 40:
        return False
    parts = [p for p in path.split("/") if p]
    cur = "/"
    for i, part in enumerate(parts):
        host = os.path.join(cur, part)
        if is_virtual(host):
            return False
        try:
            st = os.lstat(host)
        except OSError:
            return False
        dest = os.path.join(root, host.lstrip("/"))
        if stat.S_ISLNK(st.st_mode):
            target = os.readlink(host)
            if not os.path.lexists(dest):
                os.symlink(target, dest)
            resolved = os.path.normpath(os.path.join(cur, target))
            return mirror(os.path.join(resolved, *parts[i + 1:]), root, depth + 1)
        if stat.S_ISDIR(st.st_mode):
            os.makedirs(dest, exist_ok=True)
            cur = host
        elif stat.S_ISREG(st.st_mode) and i == len(parts) - 1:
            if os.path.lexists(dest):
                return False
            shutil.copy2(host, dest)
            return True
        else:
            return False
    return False


def install(paths: list[str], root: str) -> int:
    """Copy the probe's files, their exec interpreters and the symlinks leading to them."""
    todo = list(paths)
    for path in paths:
        todo += exec_interpreters(path)
    copied = sum(mirror(p, root) for p in sorted(set(todo)))
    for virtual in VIRTUAL_ROOTS:
        os.makedirs(os.path.join(root, virtual.lstrip("/")), exist_ok=True)
    os.chmod(os.path.join(root, "tmp"), 0o1777)
    return copied


def devices_of(paths: list[str]) -> dict[int, list[str]]:
    """Group the probe's regular files by the device (st_dev) they live on."""
    out: dict[int, list[str]] = {}
    for p in paths:
        try:
            st = os.stat(p)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and not is_virtual(p):
            out.setdefault(st.st_dev, []).append(p)
    return out


def time_probe(probe: Probe, timeout: float, chroot: str | None = None,
               cwd: str | None = None, always_die_with_us: bool = False,
               death_signal: int = signal.SIGTERM,
               stdout: int | None = subprocess.DEVNULL,
               stderr: int | None = subprocess.DEVNULL,
               screen: display.Display | None = None,
               scratch: Scratch | None = None) -> ProbeResult:
    """Run the probe once; wall time to exit or to ready. Never leaves it running: it is
    stopped with its tree on timeout, once ready, and if we are interrupted meanwhile.

    stdout/stderr: where its output goes (an open fd, DEVNULL, or None to show it); a
    --ready-line probe's stdout is always read by us. A probe that exits by itself and needs
    no chroot is started with vfork (no pre-exec hook: ~1.5 ms less harness overhead per
    trial); any other one also dies with us. ``scratch``: a probe run on the host writes
    there (HOME, TMPDIR, /tmp), never in the host's own."""
    waits_for_ready = (probe.ready_line is not None or probe.ready_file is not None
                       or probe.ready_window is not None)
    env: dict[str, str] | None = None
    shown = None
    if scratch is not None:
        env = {**os.environ, **scratch.env()}
    if probe.ready_window is not None:
        assert screen is not None, "a --ready window probe needs the bench's display"
        screen.arm(display.parse_ready(probe.ready_window))
        env, shown = {**(env or os.environ), **screen.env_for(chroot)}, screen.shown
    ready_file = probe.ready_file
    if ready_file and chroot:
        ready_file = os.path.join(chroot, ready_file.lstrip("/"))
    elif ready_file and scratch is not None:
        ready_file = scratch.seen(ready_file)
    if ready_file:
        _clear_ready(ready_file, os.path.realpath(chroot) if chroot else None)
    child = spawn.launch(probe.argv, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE if probe.ready_line else stdout,
                         stderr=stderr, cwd=cwd, chroot=chroot, new_group=True, env=env,
                         private_tmp=scratch.private_tmp if scratch is not None else None,
                         die_with_parent=(always_die_with_us or waits_for_ready
                                          or chroot is not None),
                         death_signal=death_signal)
    try:
        if not waits_for_ready:
            outcome = child.wait(timeout)
            if outcome is None:
                return ProbeResult("timeout", child.stop_tree(1.0), timeout)
            return ProbeResult("ok" if outcome.ok else "failed", outcome, outcome.wall_s)
        pattern = re.compile(probe.ready_line) if probe.ready_line else None
        ready_at = child.wait_ready(timeout, pattern, ready_file, shown)
        outcome = child.stop_tree(5.0)
    except BaseException:
        child.stop_tree(1.0)
        raise
    if ready_at is None:
        if outcome.wall_s >= timeout:
            return ProbeResult("timeout", outcome, timeout)
        return ProbeResult("failed", outcome, outcome.wall_s, {"reason": "exited before ready"})
    return ProbeResult("ok", outcome, (ready_at - child.started_ns) / 1e9)
