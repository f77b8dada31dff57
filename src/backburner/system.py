"""Transactions over system state: the only module that changes it.

Every change is a small `Change` class with `read()` (the old state), `apply()` and
`undo()`. A `Transaction` writes each change's intent and old state to an on-disk journal
*before* applying it (fsync'd), and undoes everything in reverse order when it ends:
normally, on an exception, on SIGINT or SIGTERM (turned into exceptions by
`interrupts.install`). After a SIGKILL or a power loss the journal is still on
disk, and `restore_stale()` (``backburner restore``, and the start of every command that
changes state) replays it. Every `undo` is idempotent and checks the current state first,
because after a crash it may run for a change that was only half applied.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from . import procfs, safepath
from .errors import (
    BackburnerError,
    IOFailure,
    NotFoundError,
    NotRootError,
    SystemStateError,
    UnavailableError,
    UnsafePathError,
)

log = logging.getLogger(__name__)

DEFAULT_STATE_DIR = "/var/lib/backburner"
_SIGNALS_HELD = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


def state_dir() -> Path:
    """Root's is /var/lib/backburner; another user's (who can only re-prioritise their own
    processes) is under their XDG state directory. BACKBURNER_STATE_DIR overrides both."""
    if "BACKBURNER_STATE_DIR" in os.environ:
        return Path(os.environ["BACKBURNER_STATE_DIR"])
    if os.geteuid() == 0:
        return Path(DEFAULT_STATE_DIR)
    xdg = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"),
                                                            ".local", "state")
    return Path(xdg, "backburner")


def journal_dir() -> Path:
    return state_dir() / "journal"


def work_root() -> Path:
    """Where testbeds and slowdisk daemons keep their files: inside the state directory,
    which only root can write (never a fixed name in a world-writable /var/tmp)."""
    return state_dir() / "work"


def trusted_dir(path: Path, what: str) -> Path:
    """`path`, created 0700 if missing, refused if anyone but us could have planted or can
    change any component of it (a journal entry may name any path to write as root)."""
    return safepath.private_dir(path, what)


def is_root() -> bool:
    return os.geteuid() == 0


def require_root(operation: str) -> None:
    if not is_root():
        raise NotRootError(operation)


# --- changes ------------------------------------------------------------------------------


class Change(ABC):
    """One kind of system change. Subclasses are dataclasses registered by `kind`."""

    kind: ClassVar[str]
    registry: ClassVar[dict[str, type[Change]]] = {}

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        if "kind" in cls.__dict__:
            Change.registry[cls.kind] = cls

    @abstractmethod
    def describe(self) -> str: ...

    def read(self) -> Any:
        """The state before the change, as JSON-able data (None if there is nothing to keep)."""
        return None

    @abstractmethod
    def apply(self) -> Any:
        """Make the change; return JSON-able facts the undo needs (e.g. the device created)."""

    @abstractmethod
    def undo(self, old: Any, result: Any) -> str | None:
        """Put back `old`. Must be idempotent and must cope with `result` being None.

        Returns None when the change is undone (or there was nothing left to undo), or a
        note saying what was deliberately left in place and why (a shared group still in use).
        """

    def apply_with(self, record: Callable[[Any], None]) -> Any:
        """`apply`, for changes that learn facts the undo needs before they finish (a
        daemon's PID before its readiness wait): they call `record(partial)` on the way."""
        return self.apply()

    def spec(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_spec(cls, spec: dict[str, Any]) -> Change:
        return cls(**spec)


def _write(path: str, value: str) -> None:
    try:
        with open(path, "w") as f:
            f.write(value)
    except OSError as err:
        raise SystemStateError(f"could not write {value!r} to {path}: {err.strerror}") from None


def selected(text: str) -> str:
    """'none [mq-deadline] bfq' -> 'mq-deadline'; a plain value is returned stripped."""
    text = text.strip()
    if "[" in text:
        return text.split("[", 1)[1].split("]", 1)[0]
    return text


@dataclass
class SysfsValue(Change):
    """A value in sysfs/procfs, e.g. queue/scheduler, queue/rotational, a sysctl."""

    kind: ClassVar[str] = "sysfs"
    path: str
    value: str

    def describe(self) -> str:
        return f"{self.path} = {self.value}"

    def read(self) -> str:
        try:
            return selected(Path(self.path).read_text())
        except FileNotFoundError:
            raise SystemStateError(f"{self.path} does not exist") from None

    def apply(self) -> None:
        _write(self.path, self.value)
        now = selected(Path(self.path).read_text())
        if now != self.value:
            raise SystemStateError(f"{self.path} reads {now!r} after writing {self.value!r}")

    def undo(self, old: Any, result: Any) -> None:
        if old is None or not os.path.exists(self.path):
            return  # the device is gone: nothing left to restore
        if selected(Path(self.path).read_text()) != old:
            _write(self.path, old)


def _cgroup_procs(path: str) -> list[int]:
    try:
        return [int(p) for p in Path(path, "cgroup.procs").read_text().split()]
    except FileNotFoundError:
        return []


def cgroup_mount_of(path: str) -> tuple[str, int, set[str]] | None:
    """(mount point, cgroup version, controllers) of the cgroup hierarchy holding path."""
    best: tuple[str, int, set[str]] | None = None
    for m in procfs.mounts():
        if m.fstype not in ("cgroup", "cgroup2"):
            continue
        mnt = m.mountpoint
        if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and (
                best is None or len(mnt) > len(best[0])):
            best = (mnt, 2 if m.fstype == "cgroup2" else 1, set(m.all_options))
    return best


def cgroup_dir_of(pid: int, path_in_hierarchy: str) -> str | None:
    """The cgroup directory of pid in the hierarchy that holds path_in_hierarchy."""
    found = cgroup_mount_of(path_in_hierarchy)
    if found is None:
        return None
    mnt, version, opts = found
    for num, ctrls, rel in procfs.cgroup_lines(pid):
        mine = (num == "0" and not ctrls) if version == 2 else bool(set(ctrls.split(",")) & opts)
        if mine:
            return os.path.join(mnt, rel.lstrip("/")).rstrip("/") or mnt
    return None


@dataclass
class CgroupDir(Change):
    """A cgroup we create, with settings written into it. Undo moves what is left in it to
    where we were when we made it (the job's children that outlived it go back beside the
    job's starter, never into a shared group) and removes it."""

    kind: ClassVar[str] = "cgroup"
    path: str
    settings: dict[str, str] = field(default_factory=dict)
    shared: bool = False  # a parent other runs may use too: removed only when empty

    def describe(self) -> str:
        return f"cgroup {self.path} {self.settings}"

    def read(self) -> bool:
        return os.path.isdir(self.path)

    def apply(self) -> dict[str, str | None]:
        parent = os.path.dirname(self.path)
        if not os.path.isdir(parent):
            raise SystemStateError(f"cgroup parent {parent} does not exist")
        evict_to = cgroup_dir_of(os.getpid(), self.path)
        try:
            os.mkdir(self.path)
        except FileExistsError:
            pass
        except OSError as err:
            raise SystemStateError(f"could not create cgroup {self.path}: {err.strerror}") from None
        for names, value in self.settings.items():
            # "a|b": the first file that exists (io.bfq.weight where BFQ is loaded, else
            # io.weight); which ones exist is only known inside the new group.
            found = [n for n in names.split("|") if os.path.exists(os.path.join(self.path, n))]
            if not found:
                raise SystemStateError(
                    f"cgroup file {names} does not exist in {self.path}",
                    "the controller or IO scheduler providing it is not available",
                )
            _write(os.path.join(self.path, found[0]), value)
        return {"evict_to": evict_to}

    def undo(self, old: Any, result: Any) -> str | None:
        if self.shared:  # ours by name: removed by whichever run leaves it empty
            try:
                os.rmdir(self.path)
            except FileNotFoundError:
                return None
            except OSError:
                return f"kept {self.path}: another run still uses it"
            return None
        if old or not os.path.isdir(self.path):
            return None  # it existed before us, or it is already gone
        target = (result or {}).get("evict_to")
        if not target or not os.path.isdir(target) or target.startswith(self.path + "/"):
            target = os.path.dirname(self.path)
        for _ in range(50):
            for pid in _cgroup_procs(self.path):
                try:
                    _write(os.path.join(target, "cgroup.procs"), str(pid))
                except SystemStateError:
                    pass  # exited meanwhile
            try:
                os.rmdir(self.path)
                return None
            except FileNotFoundError:
                return None
            except OSError:
                time.sleep(0.02)  # a just-exited task is still being released
        raise SystemStateError(f"could not remove cgroup {self.path}: it stays busy")


@dataclass
class CgroupMove(Change):
    """A running process (all its threads) moved into one of our cgroups. Undo puts it back
    where it was, if it still lives and is still in ours (`run --pid`, `govern`)."""

    kind: ClassVar[str] = "cgmove"
    pid: int
    path: str

    def describe(self) -> str:
        return f"process {self.pid} in cgroup {self.path}"

    def read(self) -> dict[str, Any]:
        start = procfs.start_time(self.pid)
        if start is None:
            raise SystemStateError(f"process {self.pid} is gone")
        return {"start": start, "from": cgroup_dir_of(self.pid, self.path)}

    def apply(self) -> None:
        _write(os.path.join(self.path, "cgroup.procs"), str(self.pid))

    def undo(self, old: Any, result: Any) -> str | None:
        if not old or procfs.start_time(self.pid) != old.get("start"):
            return None  # gone, or the PID is someone else's now
        if cgroup_dir_of(self.pid, self.path) != self.path or not old.get("from"):
            return None  # moved elsewhere since: not ours to move back
        if not os.path.isdir(old["from"]):
            return f"process {self.pid} stays in {self.path}: {old['from']} is gone"
        try:
            _write(os.path.join(old["from"], "cgroup.procs"), str(self.pid))
        except SystemStateError:
            if procfs.start_time(self.pid) == old.get("start"):
                raise
        return None


@dataclass
class ControllersEnabled(Change):
    """cgroup v2: controllers switched on in a group's cgroup.subtree_control, so that its
    children get io.weight/cpu.weight files. Undo switches off those that were off."""

    kind: ClassVar[str] = "controllers"
    path: str  # .../cgroup.subtree_control
    controllers: list[str]

    def describe(self) -> str:
        return f"{self.path} +{' +'.join(self.controllers)}"

    def read(self) -> list[str]:
        try:
            return Path(self.path).read_text().split()
        except FileNotFoundError:
            raise SystemStateError(f"{self.path} does not exist") from None

    def apply(self) -> None:
        _write(self.path, " ".join(f"+{c}" for c in self.controllers))

    def undo(self, old: Any, result: Any) -> None:
        if old is None or not os.path.exists(self.path):
            return
        for ctrl in self.controllers:
            if ctrl not in old:
                try:
                    _write(self.path, f"-{ctrl}")
                except SystemStateError:
                    log.warning("%s stays enabled in %s: other groups use it", ctrl, self.path)


@dataclass
class MadeDir(Change):
    """A directory we create (a mount point, a testbed folder). Undo removes it if empty."""

    kind: ClassVar[str] = "mkdir"
    path: str

    def describe(self) -> str:
        return f"directory {self.path}"

    def read(self) -> bool:
        return os.path.exists(self.path)

    def apply(self) -> None:
        os.makedirs(self.path, exist_ok=True)

    def undo(self, old: Any, result: Any) -> None:
        if old:
            return
        try:
            os.rmdir(self.path)
        except FileNotFoundError:
            pass
        except OSError as err:
            raise SystemStateError(f"could not remove {self.path}: {err.strerror}") from None


@dataclass
class MadeFile(Change):
    """A file we create (a testbed image), sparse at `size`. Undo deletes that file — the one
    we made (same inode), never one somebody else put at that path."""

    kind: ClassVar[str] = "mkfile"
    path: str
    size: int = 0

    def describe(self) -> str:
        return f"file {self.path} ({self.size} bytes)"

    def read(self) -> bool:
        if os.path.lexists(self.path):
            raise SystemStateError(f"{self.path} already exists", "remove it or choose another")
        return False

    def apply(self) -> dict[str, int]:
        try:
            fd = safepath.create_new(self.path)
        except OSError as err:
            raise IOFailure(f"{self.path}: {err.strerror}") from None
        try:
            st = os.fstat(fd)
            os.ftruncate(fd, self.size)
        except OSError as err:
            os.close(fd)
            os.unlink(self.path)
            raise IOFailure(f"{self.path}: {err.strerror} ({self.size} bytes)") from None
        os.close(fd)
        return {"dev": st.st_dev, "ino": st.st_ino}

    def undo(self, old: Any, result: Any) -> None:
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            return
        if result and (st.st_dev, st.st_ino) != (result.get("dev"), result.get("ino")):
            return  # not the file we made
        os.unlink(self.path)


@dataclass
class PrivateDir(Change):
    """A fresh directory with a random name, mode 0700, under a parent nobody else controls
    (`work_root()`, or the directory of a --device path): what testbeds and slowdisks work
    in. Nothing in it can have been planted. Undo removes it with whatever is left inside,
    but never across a mount that is still there."""

    kind: ClassVar[str] = "privdir"
    parent: str
    prefix: str

    def describe(self) -> str:
        return f"private directory {os.path.join(self.parent, self.prefix)}*"

    def apply(self) -> str:
        parent = Path(self.parent)
        if parent.exists():
            safepath.check_chain(parent, "work directory", sticky_ok=True)
        else:
            trusted_dir(parent, "work directory")
        return tempfile.mkdtemp(prefix=self.prefix, dir=parent)

    def undo(self, old: Any, result: Any) -> None:
        if not result:
            return
        try:
            st = os.lstat(result)
        except FileNotFoundError:
            return
        if not stat.S_ISDIR(st.st_mode):
            raise SystemStateError(f"{result} is no longer our directory")
        busy = mounts_under(result) + [dev for f in _files_under(result)
                                       for dev in loops_backed_by(f)]
        if busy:
            raise SystemStateError(f"{result} is still in use ({', '.join(busy)})",
                                   "its mounts and loop devices must go first")
        shutil.rmtree(result)


def mounts_under(path: str) -> list[str]:
    real = os.path.realpath(path)
    return [t for t in _mount_targets() if t == real or t.startswith(real + "/")]


def _mount_targets() -> list[str]:
    return [m.mountpoint for m in procfs.mounts()]


def _files_under(path: str) -> list[str]:
    return [os.path.join(d, f) for d, _, files in os.walk(path) for f in files]


@dataclass
class Filesystem(Change):
    """A new filesystem on a loop device over an image of ours (a testbed). The device must
    be backed by `image`, so a real disk is never formatted. Undo has nothing to put back:
    the filesystem lives and dies with the image, which has its own entry."""

    kind: ClassVar[str] = "mkfs"
    device: str
    image: str
    fstype: str = "ext4"
    options: list[str] = field(default_factory=list)
    timeout_s: float = 300.0

    def describe(self) -> str:
        return f"{self.fstype} on {self.device}"

    def read(self) -> None:
        if self.device not in loops_backed_by(self.image):
            raise SystemStateError(f"{self.device} is not a loop device over {self.image}",
                                   "only our own images are formatted")

    def apply(self) -> None:
        tool = f"mkfs.{self.fstype}"
        try:
            res = _run([tool, *self.options, self.device], timeout=self.timeout_s)
        except FileNotFoundError:
            raise UnavailableError(f"{tool} is not installed",
                                   "apt-get install e2fsprogs (or the filesystem's tools)"
                                   ) from None
        if res.status != 0:
            lines = [ln.strip() for ln in res.stderr.splitlines() if ln.strip()]
            if lines:
                why = f": {lines[-1]}"
            elif res.status is None:
                why = f" (timed out after {self.timeout_s:.0f} s, or killed by a signal)"
            else:
                why = f" (exit status {res.status})"
            raise SystemStateError(f"{tool} on {self.device} failed{why}")

    def undo(self, old: Any, result: Any) -> None:
        return None


@dataclass
class Priorities(Change):
    """New IO class / CPU policy for every thread of a running process tree we did not start
    (`run --pid`, `govern`). The old values of each thread are journaled, so undo (and
    `restore` after a crash) puts back those of threads that still live; threads born since
    get what their process had before."""

    kind: ClassVar[str] = "priorities"
    pid: int
    io: str | None = None
    cpu: str | None = None

    def describe(self) -> str:
        sets = ", ".join(f"{k} {v}" for k, v in (("io", self.io), ("cpu", self.cpu)) if v)
        return f"priorities of PID {self.pid} and its tree ({sets or 'nothing'})"

    def _policy(self) -> Any:
        from . import priority

        return priority.Policy("journaled",
                               io=priority.IOPrio.parse(self.io) if self.io else None,
                               cpu=priority.CPUPolicy.parse(self.cpu) if self.cpu else None)

    def read(self) -> dict[str, Any]:
        from . import priority

        return {str(tid): snap for tid, snap in priority.snapshot_tree(self.pid).items()}

    def apply(self) -> list[int]:
        from . import priority

        return priority.apply_to_tree(self.pid, self._policy())

    def saved(self, old: Any, result: Any) -> dict[str, Any]:
        """Every thread's journaled snapshot, by thread id (text, as in the journal)."""
        return dict(old or {})

    def undo(self, old: Any, result: Any) -> None:
        from . import priority

        saved = {int(t): snap for t, snap in (old or {}).items()}
        if not saved:
            return
        priority.restore_tree(self.pid, saved)


def loops_backed_by(path: str) -> list[str]:
    """Loop devices whose backing file is `path` (read from sysfs, no losetup needed)."""
    real = os.path.realpath(path)
    found = []
    for dev in sorted(Path("/sys/block").glob("loop*")):
        try:
            backing = (dev / "loop" / "backing_file").read_text().strip()
        except OSError:
            continue
        if backing.removesuffix(" (deleted)") == real:
            found.append(f"/dev/{dev.name}")
    return found


#: How long a loop device's detach may take to complete (it waits for the last user and
#: for in-flight IO; a loaded machine took over 2 s)
LOOP_DETACH_WAIT_S = 15.0
#: ... and how long at most while its write counters still move (a lazily unmounted
#: filesystem writing back its dirty pages through it; a reader does not extend the wait)
LOOP_DETACH_MAX_S = 300.0


@dataclass
class LoopDevice(Change):
    """A loop device over a file. Direct IO on, so reads reach the backing file's device."""

    kind: ClassVar[str] = "loop"
    backing: str
    direct_io: bool = True
    read_only: bool = False

    def describe(self) -> str:
        return f"loop device on {self.backing}"

    def apply(self) -> str:
        cmd = ["losetup", "--find", "--show", f"--direct-io={'on' if self.direct_io else 'off'}"]
        if self.read_only:
            cmd.append("--read-only")
        out = _tool(cmd + [self.backing], "attaching a loop device")
        return out.strip()

    def undo(self, old: Any, result: Any) -> None:
        for dev in loops_backed_by(self.backing):
            _tool(["losetup", "-d", dev], f"detaching {dev}")
        start = time.monotonic()
        deadline, last = start + LOOP_DETACH_WAIT_S, b""
        while time.monotonic() < deadline:  # detach is asynchronous while it is still open
            left = loops_backed_by(self.backing)
            if not left:
                return
            io = b" ".join(b" ".join((procfs.read_small(
                f"/sys/block/{os.path.basename(d)}/stat") or b"").split()[4:7]) for d in left)
            if io != last and last:  # writes still completing (writeback): wait on
                deadline = min(time.monotonic() + LOOP_DETACH_WAIT_S,
                               start + LOOP_DETACH_MAX_S)
            last = io
            time.sleep(0.05)
        waited = time.monotonic() - start
        users = [u for d in left for u in procfs.users_of_device(d)]
        # not claimed as undone: the journal stays, and `restore` (or the next run) retries
        raise SystemStateError(
            f"{', '.join(left)} still attached to {self.backing} after "
            f"{waited:.0f} s ("
            + ("; ".join(users) if users else "something still has it open") + ")")


def mount_options(path: str) -> set[str]:
    """The per-mount options (ro/rw, nosuid, nodev, ...) of the mount at path."""
    real = os.path.realpath(path)
    found: set[str] = set()
    for m in procfs.mounts():
        if m.mountpoint == real:
            found = set(m.options)  # the last one mounted there is on top
    return found


def is_mountpoint(path: str) -> bool:
    real = os.path.realpath(path)
    return any(m.mountpoint == real for m in procfs.mounts())


@dataclass
class Mount(Change):
    """A filesystem mounted by us (mount(8), not in a hot path). Undo unmounts it.

    The target must be a real directory (not a symlink) in a chain of directories nobody
    else controls: mount(2) follows symlinks, so a planted one would mount elsewhere. With
    "ro" in the options (bind mounts included), the mount is checked to be read-only."""

    kind: ClassVar[str] = "mount"
    source: str
    target: str
    fstype: str = ""
    options: str = ""

    def describe(self) -> str:
        return f"mount {self.source} on {self.target}"

    def read(self) -> bool:
        st = os.lstat(self.target)
        if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
            raise UnsafePathError(f"mount point {self.target} is not a plain directory")
        safepath.check_chain(self.target, "mount point")
        if is_mountpoint(self.target):
            raise SystemStateError(f"{self.target} is already a mount point")
        return False

    def apply(self) -> None:
        cmd = ["mount", "--no-canonicalize"]
        if self.fstype:
            cmd += ["-t", self.fstype]
        if self.options:
            cmd += ["-o", self.options]
        _tool(cmd + [self.source, self.target], f"mounting {self.source}")
        wanted = set(self.options.split(","))
        if "ro" in wanted and "ro" not in mount_options(self.target):
            raise SystemStateError(f"{self.target} was mounted writable despite 'ro'")

    def undo(self, old: Any, result: Any) -> None:
        for _ in range(25):
            if not is_mountpoint(self.target):
                return
            if _run(["umount", self.target]).status == 0:
                return
            time.sleep(0.1)
        _tool(["umount", "-l", self.target], f"unmounting {self.target}")


@dataclass
class Daemon(Change):
    """A background process we start and own (e.g. a FUSE server). Undo stops it."""

    kind: ClassVar[str] = "daemon"
    argv: list[str]
    ready_path: str = ""  # wait for this path to exist (e.g. the served file), if given
    ready_timeout: float = 10.0

    def describe(self) -> str:
        return f"daemon {' '.join(self.argv)}"

    def apply(self) -> dict[str, int]:
        return self.apply_with(lambda _partial: None)

    def apply_with(self, record: Callable[[Any], None]) -> dict[str, int]:
        from . import spawn  # only spawn creates processes

        child = spawn.launch(self.argv, new_group=True, stdin=subprocess.DEVNULL, detached=True)
        start = procfs.start_time(child.pid)
        result = {"pid": child.pid, "start": start or 0}
        _DAEMONS[child.pid] = child
        record(result)  # journaled before the wait: a SIGKILL now still finds the daemon
        deadline = time.monotonic() + self.ready_timeout
        while self.ready_path and not os.path.exists(self.ready_path):
            if child.poll() is not None or time.monotonic() > deadline:
                out = child.poll() or child.stop(1.0)
                raise SystemStateError(
                    f"{self.argv[0]} did not become ready ({out.describe()})")
            time.sleep(0.01)
        return result

    def undo(self, old: Any, result: Any) -> None:
        if not result:
            return
        pid = result["pid"]
        child = _DAEMONS.pop(pid, None)
        if child is not None:
            child.stop(5.0, group=True)
            return
        from . import spawn  # only spawn signals processes

        spawn.terminate(pid, result["start"])


_DAEMONS: dict[int, Any] = {}


@dataclass
class FuseMount(Change):
    """A FUSE mount that a daemon we start makes on `target` (journaled before the daemon).

    apply() does nothing: the daemon mounts. undo() lazily unmounts whatever is still mounted
    there, which is what is left when the daemon was SIGKILLed (the mount then answers
    ENOTCONN and nobody else would ever unmount it); a daemon still serving then leaves its
    loop. Lazy, so a mount still held open (e.g. by a loop device) cannot make undo fail.
    """

    kind: ClassVar[str] = "fusemount"
    target: str

    def describe(self) -> str:
        return f"FUSE mount on {self.target}"

    def read(self) -> bool:
        if is_mountpoint(self.target):
            raise SystemStateError(f"{self.target} is already a mount point")
        return False

    def apply(self) -> None:
        pass

    def undo(self, old: Any, result: Any) -> None:
        if old:
            return
        for cmd in (["umount", "-l", self.target], ["fusermount3", "-u", "-z", self.target]):
            if not is_mountpoint(self.target):
                return
            try:
                _run(cmd, timeout=30)
            except FileNotFoundError:
                continue
        if is_mountpoint(self.target):
            raise SystemStateError(f"could not unmount the FUSE mount on {self.target}")


def _run(cmd: list[str], timeout: float = 120.0) -> Any:
    from . import spawn  # only spawn creates processes

    return spawn.run_tool(cmd, timeout)


def _tool(cmd: list[str], what: str) -> str:
    try:
        proc = _run(cmd)
    except FileNotFoundError:
        raise SystemStateError(f"{what}: {cmd[0]} is not installed") from None
    if proc.status != 0:
        msg = (proc.stderr or proc.stdout).strip().splitlines()
        raise SystemStateError(f"{what} failed: {msg[-1] if msg else 'timed out'}")
    return proc.stdout


# --- journal and transactions -------------------------------------------------------------


class Journal:
    """An append-only JSON-lines file, fsync'd per line: the undo log of one session."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def append(self, event: dict[str, Any]) -> None:
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW
                     | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, (json.dumps(event) + "\n").encode())
            os.fsync(fd)
        finally:
            os.close(fd)

    def events(self) -> list[dict[str, Any]]:
        out = []
        for line in self.path.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                break  # a torn last line from a crash: everything before it is intact
        return out


@dataclass
class _Entry:
    seq: int
    change: Change
    old: Any
    result: Any = None


class Transaction:
    """``with Transaction("bench") as tx: tx.apply(SysfsValue(...))`` — undone at exit."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.entries: list[_Entry] = []
        self.journal: Journal | None = None
        self._seq = 0
        self._launched_before = 0
        self.handed_over = False

    def __enter__(self) -> Transaction:
        from . import spawn

        self._launched_before = spawn.launched()
        jdir = trusted_dir(journal_dir(), "state directory")
        pid = os.getpid()
        path = jdir / f"{self.label}-{pid}-{time.time_ns()}.jsonl"
        self.journal = Journal(path)
        self.journal.append({"event": "begin", "label": self.label, "pid": pid,
                             "start": procfs.start_time(pid), "time": time.time()})
        return self

    def apply(self, change: Change) -> Any:
        assert self.journal is not None, "use Transaction as a context manager"
        old = change.read()
        self._seq += 1
        entry = _Entry(self._seq, change, old)
        self.journal.append({"event": "intent", "seq": entry.seq, "kind": change.kind,
                             "spec": change.spec(), "old": old})
        self.entries.append(entry)  # undone even if apply fails half-way
        log.debug("apply %s", change.describe())
        journal = self.journal

        def record(partial: Any) -> None:
            entry.result = partial
            journal.append({"event": "applied", "seq": entry.seq, "result": partial})

        record(change.apply_with(record))
        return entry.result

    def undo_all(self) -> None:
        """Undo in reverse order with termination signals held, so a second ^C cannot cut it."""
        assert self.journal is not None
        old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS_HELD)
        try:
            errors = _errors(_undo_entries(self.entries, self.journal))
            self.entries.clear()
            if not errors:
                self.journal.path.unlink(missing_ok=True)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        if errors:
            raise SystemStateError(
                "could not undo: " + "; ".join(errors), "run `backburner restore` to retry"
            )

    def hand_over(self, pid: int, note: str = "") -> None:
        """Keep the changes after we exit, owned by `pid` (e.g. the daemon that serves them).

        While that process lives the journal is left alone; once it dies the journal is stale
        and `restore_stale` undoes it; `undo_journal` undoes it on request (e.g. `remove`).
        """
        assert self.journal is not None
        self.journal.append({"event": "owner", "pid": pid, "start": procfs.start_time(pid),
                             "note": note, "time": time.time()})
        self.entries.clear()
        self.handed_over = True

    def __exit__(self, *exc: object) -> None:
        if self.handed_over and exc[0] is None:
            return
        from . import spawn  # only spawn stops processes

        # a second ^C while helpers are being stopped (that can take their grace period)
        # must not skip the undo: signals are held from here on, as in undo_all
        old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS_HELD)
        try:
            # no helper of ours may keep using what is about to be undone
            spawn.stop_all(since=self._launched_before)
            if self.handed_over:  # failed after handing over: take the changes back
                assert self.journal is not None
                _, self.entries = _journal_entries(self.journal)
            self.undo_all()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)


@dataclass(frozen=True)
class _Undone:
    entry: _Entry
    note: str | None = None   # deliberately left in place, and why
    error: str | None = None  # could not be undone

    @property
    def message(self) -> str:
        what = self.entry.change.describe()
        if self.error:
            return f"could not undo {what}: {self.error}"
        return self.note or f"undid {what}"


def _undo_entries(entries: list[_Entry], journal: Journal) -> list[_Undone]:
    done = []
    for entry in reversed(entries):
        try:
            note = entry.change.undo(entry.old, entry.result)
            journal.append({"event": "undone", "seq": entry.seq})
            done.append(_Undone(entry, note=note))
        except Exception as err:  # noqa: BLE001 - keep undoing the rest, report all
            done.append(_Undone(entry, error=str(err)))
    return done


def _errors(done: list[_Undone]) -> list[str]:
    return [f"{d.entry.change.describe()}: {d.error}" for d in done if d.error]


#: Change kinds older versions journaled and this one no longer has: never undone from an old
#: journal ("tree" removed a whole folder tree, whatever path its journal line named).
_RETIRED_KINDS = {"tree": "removing a folder tree"}
_BY_HAND = "read it (JSON lines: each change and the old value), put back by hand what it " \
    "changed, then delete it"


def _journal_entries(journal: Journal) -> tuple[dict[str, Any], list[_Entry]]:
    """The header and the entries still to undo. A journal this version cannot read (a
    field or kind of a newer version, a retired kind, damage) is a SystemStateError naming
    it, never another exception: recovery must warn about it and go on, not crash."""
    try:
        return _parse_journal(journal)
    except (OSError, TypeError, KeyError, ValueError, AttributeError) as err:
        why = " ".join(f"{type(err).__name__}: {err}".split())[:200]
        raise SystemStateError(f"{journal.path} cannot be read by this backburner ({why})",
                               _BY_HAND) from None


def _parse_journal(journal: Journal) -> tuple[dict[str, Any], list[_Entry]]:
    events = journal.events()
    if not events and journal.path.stat().st_size:
        raise ValueError("no journal line in it")
    header = dict(events[0]) if events and events[0].get("event") == "begin" else {}
    if events and not header:
        raise ValueError("its first line is not the begin of a transaction")
    entries: dict[int, _Entry] = {}
    for ev in events:
        if ev["event"] == "owner":  # handed over: liveness is now the new owner's
            header.update(pid=ev["pid"], start=ev["start"], note=ev.get("note", ""))
        elif ev["event"] == "intent":
            entries[ev["seq"]] = _Entry(ev["seq"], _change_of(journal, ev), ev["old"])
        elif ev["event"] == "applied" and ev["seq"] in entries:
            entries[ev["seq"]].result = ev["result"]
        elif ev["event"] == "undone":
            entries.pop(ev["seq"], None)
    return header, sorted(entries.values(), key=lambda e: e.seq)


def _change_of(journal: Journal, ev: dict[str, Any]) -> Change:
    kind = ev["kind"]
    cls = Change.registry.get(kind)
    if kind in _RETIRED_KINDS:
        raise SystemStateError(
            f"{journal.path}: change kind {kind!r} ({_RETIRED_KINDS[kind]}) of an older "
            "backburner is no longer undone", _BY_HAND)
    if cls is None:
        raise SystemStateError(
            f"{journal.path}: unknown change kind {kind!r}",
            f"it was written by a newer backburner: restore with that version, or {_BY_HAND}")
    return cls.from_spec(ev["spec"])


def stale_journals() -> Iterator[Journal]:
    """Journals whose owning process is gone (crashed, killed, or the machine rebooted),
    and those that cannot be trusted or read: their replay refuses them and says why."""
    jdir = journal_dir()
    safepath.check_chain(jdir, "state directory")
    if not jdir.is_dir():
        return
    for path in sorted(jdir.glob("*.jsonl")):
        journal = Journal(path)
        try:
            safepath.check_file(path, "journal")
            header, _ = _journal_entries(journal)
        except (SystemStateError, UnsafePathError):
            yield journal
            continue
        pid, start = header.get("pid"), header.get("start")
        if pid and start is not None and procfs.start_time(pid) == start:
            continue  # its owner is alive (possibly us) and will undo itself
        yield journal


@dataclass(frozen=True)
class JournalInfo:
    """A journal as `slowdisk remove` and friends look for it: who owns it, what it did."""

    journal: Journal
    label: str
    owner_pid: int | None
    alive: bool
    note: str
    results: list[Any]


def journals() -> list[JournalInfo]:
    """The journals this version can read and trust (`recover` reports the others)."""
    jdir = journal_dir()
    safepath.check_chain(jdir, "state directory")
    if not jdir.is_dir():
        return []
    out = []
    for path in sorted(jdir.glob("*.jsonl")):
        journal = Journal(path)
        try:
            safepath.check_file(path, "journal")
            header, entries = _journal_entries(journal)
        except (SystemStateError, UnsafePathError) as err:
            log.debug("skipping %s: %s", path, err)
            continue
        pid, start = header.get("pid"), header.get("start")
        alive = bool(pid) and start is not None and procfs.start_time(pid) == start
        out.append(JournalInfo(journal, header.get("label", "?"), pid, alive,
                               header.get("note", ""), [e.result for e in entries]))
    return out


def undo_journal(journal: Journal, report: Callable[[str], None] = lambda _m: None
                 ) -> list[str]:
    """Undo one journal now, whoever owns it (its owner is expected to be told or gone)."""
    return _replay(journal, report)


def restore_stale(report: Callable[[str], None] = lambda _m: None) -> list[str]:
    """Replay every stale journal, newest first (each in reverse order of its changes).

    A journal that cannot be undone does not stop the others; the failures are raised at
    the end (one as it is, several together), and the failed journals stay on disk.
    """
    undone, failed = _restore_stale(report)
    if len(failed) == 1:
        raise failed[0]
    if failed:
        raise SystemStateError("; ".join(str(err) for err in failed),
                               "fix the cause, then `backburner restore`")
    return undone


def _restore_stale(report: Callable[[str], None]) -> tuple[list[str], list[BackburnerError]]:
    undone: list[str] = []
    failed: list[BackburnerError] = []
    stale = list(stale_journals())
    stale.sort(key=lambda j: _journal_time(j), reverse=True)
    for journal in stale:
        try:
            undone += _replay(journal, report)
        except BackburnerError as err:
            failed.append(err)
    return undone, failed


def recover(report: Callable[[str], None]) -> None:
    """What a state-changing command does first: restore what crashed runs left, but only
    warn when that fails, one line per journal kept, so one stuck, unreadable or untrusted
    journal does not block every later command. (A state directory that cannot be trusted
    still stops the command: its journals, and the next one, would be in it.)"""
    _, failed = _restore_stale(lambda m: report(f"recovering: {m}"))
    for err in failed:
        report("could not recover an earlier run's changes: " + " ".join(str(err).split()))


def _journal_time(journal: Journal) -> float:
    try:
        first = journal.path.open().readline()
        return float(json.loads(first).get("time", 0))
    except (OSError, ValueError):
        return 0.0


def _replay(journal: Journal, report: Callable[[str], None]) -> list[str]:
    try:  # what it says is about to be done as root
        safepath.check_file(journal.path, "journal")
    except UnsafePathError as err:
        raise UnsafePathError(f"{err.message}: nothing in it was undone",
                              f"if nobody else changed it, {err.hint or 'make it safe'}; "
                              f"else {_BY_HAND}") from None
    header, entries = _journal_entries(journal)
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS_HELD)
    try:
        done = _undo_entries(entries, journal)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
    undone: list[str] = []
    for d in done:
        if d.error:
            continue  # raised below, together
        msg = f"{d.message} (left by {header.get('label')} pid {header.get('pid')})"
        undone.append(msg)
        report(msg)
    errors = _errors(done)
    if errors:
        raise SystemStateError(f"could not restore from {journal.path}: " + "; ".join(errors),
                               "fix the cause, then `backburner restore`")
    journal.path.unlink(missing_ok=True)
    return undone


def remove_tree(path: str) -> None:
    """Remove a folder tree of our own (a testbed's files); not journaled: data, not state."""
    shutil.rmtree(path, ignore_errors=True)


def prune_empty_cgroups(report: Callable[[str], None] = lambda _m: None) -> list[str]:
    """Remove our empty groups (`backburner/*` in every hierarchy, then `backburner` itself)
    whose owner is gone: what is left when a job outlived every record of it.

    A group's name carries the PID of what owns it (run-PID, pid-PID, bench-PID-POLICY,
    govern-PID-RULE): while that process lives the group is left alone, even when it is
    empty for a moment (a bench's group before its load starts) and even when its journal is
    in another state directory."""
    owned = {r.get("path") for info in journals() if info.alive for r in _cgroup_specs(info)}
    removed = []
    for top in _our_cgroup_tops():
        for child in sorted(p for p in top.iterdir() if p.is_dir()):
            if str(child) in owned or _cgroup_procs(str(child)) or _owner_alive(child.name):
                continue
            try:
                child.rmdir()
            except OSError:
                continue
            removed.append(str(child))
            report(f"removed empty cgroup {child}")
        try:
            top.rmdir()
            removed.append(str(top))
        except OSError:
            pass
    return removed


def _owner_alive(name: str) -> bool:
    parts = name.split("-")
    pid = next((int(p) for p in parts[1:2] if p.isdigit()), None)
    return pid is not None and procfs.start_time(pid) is not None


def _our_cgroup_tops() -> list[Path]:
    root = Path("/sys/fs/cgroup")
    candidates = [root / "backburner", *(p / "backburner" for p in root.glob("*"))]
    return [p for p in candidates if p.is_dir() and not p.is_symlink()]


def _cgroup_specs(info: JournalInfo) -> list[dict[str, Any]]:
    _, entries = _journal_entries(info.journal)
    return [e.change.spec() for e in entries if isinstance(e.change, CgroupDir)]


def drop_caches() -> None:
    """sync, then drop page cache, dentries and inodes, so the next start is really cold."""
    require_root("dropping the page cache (/proc/sys/vm/drop_caches)")
    os.sync()
    _write("/proc/sys/vm/drop_caches", "3")


# --- apply: configuration files we install (udev rules, systemd drop-ins) -------------------

_CONFIG_MAX = 1 << 20  # a udev rule or a unit drop-in; anything bigger is not what we think


def _read_config(path: str) -> bytes | None:
    """The bytes of a regular file, None if there is none; never through a symlink."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as err:
        raise UnsafePathError(f"{path}: {err.strerror}", "it must be a regular file") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafePathError(f"{path} is not a regular file")
        if st.st_size > _CONFIG_MAX:
            raise SystemStateError(f"{path} is {st.st_size} bytes: not a file of ours")
        return os.read(fd, _CONFIG_MAX + 1)
    finally:
        os.close(fd)


def _write_config(path: str, data: bytes, mode: int) -> None:
    """Replace `path` whole (a temporary file beside it, fsync'd, renamed over it), so a
    reader — udev, systemd, a crash — sees the old file or the new one, never half."""
    directory, name = os.path.split(path)
    tmp = os.path.join(directory, f".{name}.backburner-{os.urandom(4).hex()}")
    fd = safepath.create_new(tmp, mode)
    try:
        os.fchmod(fd, mode)  # not narrowed by the umask
        os.write(fd, data)
        os.fsync(fd)
    except OSError as err:
        os.close(fd)
        os.unlink(tmp)
        raise IOFailure(f"{path}: {err.strerror}") from None
    os.close(fd)
    os.rename(tmp, path)
    dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


@dataclass
class InstalledFile(Change):
    """A configuration file we install (``content``) or take out again (``content`` None):
    a udev rule, a systemd drop-in. Its old content, or its absence, is journaled, so an
    interrupted `apply` is undone whole and `restore` after a crash puts back what was. Undo
    puts the old file back only while the file is still what we left there; one changed
    since is left alone, with a note."""

    kind: ClassVar[str] = "configfile"
    path: str
    content: str | None
    mode: int = 0o644
    prune_parent: bool = False  # removing: take out the parent directory if left empty

    def describe(self) -> str:
        return f"{'install' if self.content is not None else 'remove'} {self.path}"

    def read(self) -> dict[str, Any]:
        safepath.check_chain(os.path.dirname(self.path), "configuration directory")
        data = _read_config(self.path)
        if data is None:
            return {"content": None}
        st = os.lstat(self.path)
        return {"content": base64.b64encode(data).decode(), "mode": stat.S_IMODE(st.st_mode),
                "uid": st.st_uid, "gid": st.st_gid}

    def apply(self) -> dict[str, Any]:
        if self.content is not None:
            _write_config(self.path, self.content.encode(), self.mode)
            return {"pruned": False}
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        pruned = False
        if self.prune_parent:
            try:
                os.rmdir(os.path.dirname(self.path))
                pruned = True
            except OSError:
                pass  # something else lives there too
        return {"pruned": pruned}

    def undo(self, old: Any, result: Any) -> str | None:
        directory, name = os.path.split(self.path)
        for left in Path(directory).glob(f".{name}.backburner-*"):  # a crash mid-write
            left.unlink(missing_ok=True)
        if old is None:
            return None  # failed before anything was read: nothing was changed
        target = base64.b64decode(old["content"]) if old.get("content") is not None else None
        ours = self.content.encode() if self.content is not None else None
        if not os.path.isdir(directory):
            if ours is not None or target is None:
                return None  # gone with its directory: nothing of ours is left
            os.mkdir(directory, 0o755)
        now = _read_config(self.path)
        if now == target:
            return None
        if now != ours:
            return f"left {self.path} as it is: it was changed after backburner wrote it"
        if target is None:
            os.unlink(self.path)
            return None
        _write_config(self.path, target, old.get("mode", 0o644))
        if is_root():
            os.chown(self.path, old.get("uid", 0), old.get("gid", 0))
        return None


def commit(tx: Transaction) -> None:
    """Keep what `tx` applied (an `apply` that finished): its journal goes in one unlink,
    so neither the end of the ``with`` block nor a later `restore` undoes it. Before this,
    every change is undone on an error, ^C, SIGTERM, or by `restore` after a crash."""
    assert tx.journal is not None, "commit inside the transaction"
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS_HELD)
    try:
        tx.entries.clear()
        tx.journal.path.unlink(missing_ok=True)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)


# --- govern (issue 10): a daemon's long-lived transaction, inherited priorities, freezer ----


@dataclass
class CgroupFreezer(Change):
    """The freezer of one of our cgroups (v1 `freezer.state`, v2 `cgroup.freeze`), which
    `govern` toggles in short, bounded slices while interactive work is stalled on IO.
    apply() changes nothing; freeze()/thaw() do, and undo() thaws whatever state is left,
    so a daemon stopped, crashed or killed mid-pause never leaves the bulk work frozen
    (after a SIGKILL, `backburner restore` replays this undo)."""

    kind: ClassVar[str] = "freezer"
    path: str
    version: int = 1

    def describe(self) -> str:
        return f"freezer of {self.path}"

    @property
    def _file(self) -> str:
        return os.path.join(self.path, "freezer.state" if self.version == 1
                            else "cgroup.freeze")

    def read(self) -> bool:
        try:
            return self.frozen()
        except FileNotFoundError:
            raise SystemStateError(f"{self._file} does not exist",
                                   "no cgroup freezer for this group") from None

    def frozen(self) -> bool:
        text = Path(self._file).read_text().strip()
        return text in ("FROZEN", "FREEZING") if self.version == 1 else text == "1"

    def apply(self) -> None:
        pass

    def freeze(self) -> None:
        _write(self._file, "FROZEN" if self.version == 1 else "1")

    def thaw(self) -> None:
        _write(self._file, "THAWED" if self.version == 1 else "0")

    def undo(self, old: Any, result: Any) -> None:
        if os.path.exists(self._file):
            self.thaw()


@dataclass
class Inherited(Change):
    """A process born of a governed one (fork): it inherited the new priorities and cgroups
    from its parent, so its "old" values are not what it has but what the governed ancestor
    had before (`old`: io, policy, nice; `moves`: our cgroup -> the group it came from).
    apply() only closes the race of a fork during the ancestor's change; undo() puts the
    ancestor's old values on it if it still lives, even after its parent has exited."""

    kind: ClassVar[str] = "inherited"
    pid: int
    io: str | None = None
    cpu: str | None = None
    old: dict[str, int] = field(default_factory=dict)
    moves: dict[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        return f"priorities and cgroups PID {self.pid} inherited from a governed parent"

    def read(self) -> dict[str, Any]:
        start = procfs.start_time(self.pid)
        if start is None:
            raise SystemStateError(f"process {self.pid} is gone")
        return {"start": start}

    def apply(self) -> None:
        if self.io or self.cpu:
            Priorities(self.pid, self.io, self.cpu).apply()

    def undo(self, old: Any, result: Any) -> str | None:
        from . import priority

        start = (old or {}).get("start")
        if start is None or procfs.start_time(self.pid) != start:
            return None  # gone, or the PID is someone else's now
        if self.old:
            priority.restore_tree(self.pid, {self.pid: {**self.old, "start": start}})
        notes = [CgroupMove(self.pid, path).undo({"start": start, "from": origin}, None)
                 for path, origin in self.moves.items()]
        return "; ".join(n for n in notes if n) or None


@dataclass
class PrioritiesFirst(Priorities):
    """`Priorities` for `govern`'s reaction to a program that has just started (exec). At
    exec a process has one thread: its old values are all that is read and journaled before
    it is changed, at once. Then the CPU is yielded to the program (the exec that woke us
    may have run on this CPU, and the program is still loading), and only then is the rest
    of its tree (threads and children born since) read, journaled as a partial result and
    changed. One of those that already shows the new values was born after the change and
    copied them: the undo gives it what the process had before, as for any thread born
    later. Measured: the tree walk before the first change put the change at ~0.3 ms after
    the exec event on a cold daemon (bench/govern_timeline.py)."""

    kind: ClassVar[str] = "priorities-first"
    _POLICIES: ClassVar[dict[tuple[str | None, str | None], Any]] = {}

    def spec(self) -> dict[str, Any]:
        return {"pid": self.pid, "io": self.io, "cpu": self.cpu}

    def _policy(self) -> Any:
        key = (self.io, self.cpu)
        found = self._POLICIES.get(key)
        if found is None:
            found = self._POLICIES[key] = super()._policy()
        return found

    def read(self) -> dict[str, Any]:
        from . import priority

        snap = priority.snapshot_thread(self.pid)
        if snap is None:
            raise NotFoundError(f"no process with PID {self.pid}",
                                "check the PID with `ps -p PID`")
        self.__dict__["_leader_old"] = snap
        return {str(self.pid): snap}

    def apply_with(self, record: Callable[[Any], None]) -> Any:
        from . import priority

        policy = self._policy()
        try:
            if policy.io is not None:
                priority.ioprio_set(self.pid, policy.io)
            if policy.cpu is not None:
                priority.set_cpu(self.pid, policy.cpu)
        except OSError:
            pass  # ended meanwhile; anything else is raised by the walk below
        os.sched_yield()
        old = self.__dict__.pop("_leader_old", None)
        new = priority.snapshot_thread(self.pid)
        rest = {str(tid): snap for tid, snap in priority.snapshot_tree(self.pid).items()
                if tid != self.pid and not _copied(snap, old, new)}
        record({"old": rest, "done": []})  # before any of them changes
        return {"old": rest, "done": priority.apply_to_tree(self.pid, policy)}

    def saved(self, old: Any, result: Any) -> dict[str, Any]:
        merged = dict(old or {})
        if isinstance(result, dict):
            merged.update(result.get("old") or {})
        return merged

    def undo(self, old: Any, result: Any) -> None:
        if isinstance(result, dict):
            super().undo(self.saved(old, result), result)
            return
        # stopped before the rest of the tree was journaled (a crash, or a failure): only
        # the process's own thread and what shows our change are ours to put back
        from . import priority

        leader = (old or {}).get(str(self.pid))
        if not leader:
            return
        policy = self._policy()
        for _proc, tid in priority.tree_threads(self.pid):
            snap = priority.snapshot_thread(tid)
            if tid == self.pid or (snap is not None and priority.has_policy(snap, policy)):
                priority.restore_thread(tid, leader)


def _copied(snap: dict[str, int], old: dict[str, int] | None,
            new: dict[str, int] | None) -> bool:
    """A thread whose every value is the process's own thread's, before or after the
    change: born of it around the change (one born half-way copies some of each). Any
    other value (a child that was nice before the exec, a realtime thread) is its own."""
    if old is None or new is None:
        return False
    return all(snap[k] in (old[k], new[k]) for k in ("io", "policy", "nice"))


class _VolatileJournal(Journal):
    """A journal whose lines are written but not fsync'd, for changes that cannot outlive a
    reboot anyway (priorities of running processes, cgroups, freezer states): what must
    survive is the daemon's own death, even by SIGKILL, and the page cache does. An fsync
    per governed process would cost milliseconds exactly when the disk is busy."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.fd: int | None = None  # kept open: a governed process costs one write

    def append(self, event: dict[str, Any]) -> None:
        if self.fd is None:
            self.fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW
                              | os.O_CLOEXEC, 0o600)
        os.write(self.fd, (json.dumps(event) + "\n").encode())

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class LiveTransaction(Transaction):
    """A transaction as long-lived as a daemon (`govern`): changes come and go (a governed
    process exits: its entries are retired, since there is nothing left to undo), and the
    journal is compacted when retired lines outweigh live ones, so neither memory nor the
    journal grows with the number of processes ever governed."""

    COMPACT_AFTER = 2000  # retired entries before the journal is rewritten

    def __init__(self, label: str) -> None:
        super().__init__(label)
        self._retired = 0
        self._header: dict[str, Any] = {}

    def __enter__(self) -> LiveTransaction:
        super().__enter__()
        assert self.journal is not None
        self._header = self.journal.events()[0]
        self.journal = _VolatileJournal(self.journal.path)
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            super().__exit__(*exc)
        finally:
            if isinstance(self.journal, _VolatileJournal):
                self.journal.close()

    def record(self, change: Change) -> _Entry:
        """apply() a change and return its entry (old state, result) for a later `retire`.
        If apply fails, what it did is undone at once and the error is raised."""
        self.apply_or_undo(change)
        return self.entries[-1]

    def apply_or_undo(self, change: Change) -> Any:
        try:
            return self.apply(change)
        except Exception:
            entry = next((e for e in reversed(self.entries) if e.change is change), None)
            if entry is not None:
                try:
                    entry.change.undo(entry.old, entry.result)
                finally:
                    self.retire(entry)
            raise

    def retire(self, entry: _Entry) -> None:
        """Forget an entry whose change needs no undo any more (its process has exited)."""
        assert self.journal is not None
        try:
            self.entries.remove(entry)
        except ValueError:
            return
        self.journal.append({"event": "undone", "seq": entry.seq})
        self._retired += 1
        if self._retired >= max(self.COMPACT_AFTER, 2 * len(self.entries)):
            self.compact()

    def compact(self) -> None:
        """Rewrite the journal with only the live entries (atomically: a crash leaves the
        old or the new one, both complete)."""
        assert self.journal is not None
        lines = [self._header]
        for e in self.entries:
            lines.append({"event": "intent", "seq": e.seq, "kind": e.change.kind,
                          "spec": e.change.spec(), "old": e.old})
            lines.append({"event": "applied", "seq": e.seq, "result": e.result})
        tmp = self.journal.path.with_name(f".{self.journal.path.name}.{os.getpid()}.tmp")
        fd = safepath.create_new(tmp)
        try:
            os.write(fd, "".join(json.dumps(ln) + "\n" for ln in lines).encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.journal.path)
        if isinstance(self.journal, _VolatileJournal):
            self.journal.close()  # the next line goes to the new file
        self._retired = 0


def psi_trigger(path: str, trigger: str) -> int:
    """A PSI trigger ("some 100000 1000000" on /proc/pressure/io or a cgroup's io.pressure):
    an fd that poll() reports POLLPRI on when the stall threshold is crossed. Not journaled:
    the kernel removes the trigger when the fd is closed (or its owner dies). Raises OSError
    (EINVAL for a window this caller may not use, EOPNOTSUPP without PSI)."""
    fd = os.open(path, os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        os.write(fd, trigger.encode() + b"\0")  # the kernel overwrites the last byte with NUL
    except OSError:
        os.close(fd)
        raise
    return fd
