"""What /proc says about processes and threads: read-only facts, shared by every module that
needs to tell a process apart from a recycled PID, walk a process tree or find a group.

A PID alone names nothing for long: the kernel reuses it. (pid, start time) does, so every
record of a process we keep (journals, governed processes, tracked load children) carries
its start time and is checked against it before anything is done to the PID.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass


def read_small(path: str, size: int = 65536) -> bytes | None:
    """One read of a small /proc file (os-level: a third of the cost of Path.read_text,
    which matters to `govern`, which looks at every program started); None when gone."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return os.read(fd, size)
    except OSError:
        return None
    finally:
        os.close(fd)


def _stat_fields(pid: int) -> list[str] | None:
    """Fields of /proc/PID/stat after the command name (which may hold spaces and ')')."""
    data = read_small(f"/proc/{pid}/stat", 4096)
    if not data:
        return None
    try:
        return data.rsplit(b")", 1)[1].decode().split()
    except IndexError:
        return None


def state_of(pid: int) -> str | None:
    """The one-letter state of /proc/PID/stat ("D": in uninterruptible sleep, usually IO;
    a SIGKILL takes effect only when it returns), or None when the process is gone."""
    fields = _stat_fields(pid)
    return fields[0] if fields else None


#: /proc/PID/stat's flags (field 9): the task is exiting.
PF_EXITING = 0x4


def pending_signals(pid: int) -> int | None:
    """The signals pending for the process (its shared set) or for its main thread, as a
    mask (bit n-1 for signal n) from /proc/PID/status; None when it is gone."""
    data = read_small(f"/proc/{pid}/status")
    if data is None:
        return None
    mask = 0
    for line in data.decode(errors="replace").splitlines():
        key, _, value = line.partition(":")
        if key in ("SigPnd", "ShdPnd"):
            mask |= int(value.strip() or "0", 16)
    return mask


def on_its_way_out(pid: int) -> bool:
    """Whether a process that was sent SIGKILL is dying, only not yet dead: in
    uninterruptible sleep (D: usually IO; the kill takes effect when it returns), already
    exiting (PF_EXITING: freeing its memory, closing its files), or still running in the
    kernel with the kill pending (it dies on its way back to user space). Gone counts too."""
    fields = _stat_fields(pid)
    if fields is None or fields[0] in ("D", "Z", "X"):
        return True
    try:
        if int(fields[6]) & PF_EXITING:
            return True
    except (IndexError, ValueError):
        pass
    pending = pending_signals(pid)
    return pending is None or bool(pending & (1 << (9 - 1)))  # SIGKILL


def start_time(pid: int) -> int | None:
    """Start time (clock ticks since boot, field 22) of a live process or thread; None when it
    is gone or a zombie (it has released everything; its parent may reap it late)."""
    fields = _stat_fields(pid)
    if fields is None or fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def owner_tag(pid: int) -> str:
    """'PID-START': a name part that says which process owns something (a cgroup) in a way
    a later process with the same PID cannot claim. The PID comes first, as in the names
    of older versions, whose clean-up reads only that and so keeps the group while its
    owner runs."""
    return f"{pid}-{start_time(pid) or 0}"


def owner_alive(tag: str) -> bool:
    """Whether the process an `owner_tag` names still lives (a bare PID, as older names
    carry, counts while any process has that PID)."""
    pid, _, start = tag.partition("-")
    if not pid.isdigit():
        return False
    now = start_time(int(pid))
    return now is not None and (not start or start == str(now))


def start_and_kthread(pid: int) -> tuple[int | None, bool]:
    """start_time() and is_kernel_thread() from one read of /proc/PID/stat."""
    fields = _stat_fields(pid)
    if fields is None or fields[0] in ("Z", "X"):
        return None, False
    return int(fields[19]), bool(int(fields[6]) & 0x00200000)


def parent_of(pid: int) -> int | None:
    fields = _stat_fields(pid)
    return int(fields[1]) if fields else None


def pgid_of(pid: int) -> int | None:
    fields = _stat_fields(pid)
    return int(fields[2]) if fields else None


def is_kernel_thread(pid: int) -> bool:
    """Kernel threads (kthreadd and its children) have the PF_KTHREAD flag (0x00200000)."""
    fields = _stat_fields(pid)
    return bool(fields) and bool(int(fields[6]) & 0x00200000)


def comm_of(pid: int) -> str | None:
    data = read_small(f"/proc/{pid}/comm", 64)
    return None if data is None else data.decode(errors="replace").rstrip("\n")


def exe_of(pid: int) -> str:
    """The program's path ('' for kernel threads, processes gone, or no permission). A
    binary replaced by an upgrade while it runs reads "PATH (deleted)": the PATH is kept."""
    try:
        return os.readlink(f"/proc/{pid}/exe").removesuffix(" (deleted)")
    except OSError:
        return ""


def cmdline_of(pid: int) -> list[str]:
    data = read_small(f"/proc/{pid}/cmdline", 1 << 20)
    if not data:
        return []
    return data.rstrip(b"\0").decode(errors="replace").split("\0")


def uid_of(pid: int) -> int:
    """The effective uid (the user the process acts as), -1 when gone."""
    data = read_small(f"/proc/{pid}/status")
    for line in (data or b"").splitlines():
        if line.startswith(b"Uid:"):
            return int(line.split()[2])
    return -1


def cgroup_lines(pid: int) -> list[tuple[str, str, str]]:
    """(hierarchy id, controllers, path) of each line of /proc/PID/cgroup."""
    data = read_small(f"/proc/{pid}/cgroup")
    out = []
    for line in (data or b"").decode(errors="replace").splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            out.append((parts[0], parts[1], parts[2]))
    return out


def threads_of(pid: int) -> list[int]:
    try:
        return sorted(int(t) for t in os.listdir(f"/proc/{pid}/task"))
    except (FileNotFoundError, ProcessLookupError, NotADirectoryError):
        return []


#: /proc/self/uid_map of the machine's own user namespace: every ID mapped to itself.
_IDENTITY_MAP = [b"0", b"0", b"4294967295"]


def in_initial_user_namespace() -> bool:
    """False inside a user namespace (a rootless container, `unshare -U`): root there has
    no power over what the machine's root owns, e.g. mounting tracefs."""
    text = read_small("/proc/self/uid_map")
    return text is not None and text.split() == _IDENTITY_MAP


def children_of(pid: int) -> list[int]:
    """Direct children, from every thread's `children` list (no scan of /proc)."""
    kids: list[int] = []
    for tid in threads_of(pid):
        text = read_small(f"/proc/{pid}/task/{tid}/children")
        if text:
            kids += [int(k) for k in text.split() if int(k) not in kids]
    return kids


def descendants_of(pid: int) -> list[int]:
    """All processes below pid, breadth first."""
    found: list[int] = []
    queue = [pid]
    while queue:
        for kid in children_of(queue.pop(0)):
            if kid not in found:
                found.append(kid)
                queue.append(kid)
    return found


def io_bytes(pid: int) -> int | None:
    """The bytes a process made the storage layer move (/proc/PID/io: read_bytes, plus
    write_bytes less cancelled_write_bytes: pages it dirtied, less those truncated before
    writeback), its threads' and its reaped children's included (the kernel adds a
    child's counts to its parent's when the parent reaps it); None when it is gone."""
    data = read_small(f"/proc/{pid}/io")
    if not data:
        return None
    fields = dict(line.split(b":", 1) for line in data.splitlines() if b":" in line)
    try:
        return (int(fields[b"read_bytes"]) + int(fields[b"write_bytes"])
                - int(fields[b"cancelled_write_bytes"]))
    except (KeyError, ValueError):
        return None


def ancestors_of(pid: int) -> list[int]:
    """pid's parent, its parent, ... up to PID 1 (or 0 for kernel threads)."""
    out = []
    cur = parent_of(pid)
    while cur and cur not in out:
        out.append(cur)
        cur = parent_of(cur)
    return out


def pids() -> list[int]:
    return [int(e.name) for e in os.scandir("/proc") if e.name.isdigit()]


def group_members(pgid: int) -> list[int]:
    """Live processes (not zombies) whose process group is pgid."""
    found = []
    for pid in pids():
        fields = _stat_fields(pid)
        if fields and fields[0] not in ("Z", "X") and int(fields[2]) == pgid:
            found.append(pid)
    return found


# --- the mount table ---------------------------------------------------------------------------


@dataclass(frozen=True)
class MountInfo:
    """One line of /proc/self/mountinfo."""

    devno: int  # major:minor as mountinfo shows it (st_dev of its files, except btrfs)
    root: str  # the directory of the filesystem mounted here (a bind mount's source)
    mountpoint: str
    options: frozenset[str]  # per-mount: ro/rw, nosuid, nodev, ...
    fstype: str
    source: str
    super_options: frozenset[str]  # the filesystem's: a v1 cgroup's controllers, ...

    @property
    def all_options(self) -> frozenset[str]:
        return self.options | self.super_options


_OCTAL = re.compile(r"\\([0-7]{3})")


def unescape_mount_field(text: str) -> str:
    """The kernel escapes space, tab, newline and backslash in mount fields as octal."""
    return _OCTAL.sub(lambda m: chr(int(m.group(1), 8)), text)


def parse_mountinfo(text: str) -> list[MountInfo]:
    out = []
    for line in text.splitlines():
        left, _, right = line.partition(" - ")
        f, r = left.split(), right.split()
        if len(f) < 6 or len(r) < 2:
            continue
        try:
            major, minor = (int(x) for x in f[2].split(":"))
        except ValueError:
            continue
        out.append(MountInfo(os.makedev(major, minor), unescape_mount_field(f[3]),
                             unescape_mount_field(f[4]), frozenset(f[5].split(",")), r[0],
                             unescape_mount_field(r[1]),
                             frozenset(r[2].split(",")) if len(r) > 2 else frozenset()))
    return out


#: The mount table of this process's mount namespace.
MOUNTINFO = "/proc/self/mountinfo"


def mounts(path: str = MOUNTINFO) -> list[MountInfo]:
    """The mount table now, in mount order (a later mount on the same point is on top)."""
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as f:
            return parse_mountinfo(f.read())
    except OSError:
        return []


# --- who keeps a block device busy -------------------------------------------------------------


def users_of_device(node: str) -> list[str]:
    """Who keeps a block device open, in words, for an error that must say more than
    "busy": processes holding it open, processes using a file or directory of a filesystem
    on it (which keeps a lazily unmounted one, and so the device, alive), mount namespaces
    other than ours in which a filesystem on it is still mounted (a process that unshared
    its mounts keeps a copy), a mount here, and kernel holders (/sys/block/X/holders).
    Processes in uninterruptible sleep (D) are marked: they cannot die before their IO
    completes."""
    try:
        rdev = os.stat(node).st_rdev
    except OSError:
        return []
    ours = _ns(os.getpid())
    found: list[str] = []
    seen_ns: set[str] = set()
    for pid in pids():
        if node in _fd_targets(pid):
            found.append(f"PID {pid} ({_comm_state(pid)}) has it open")
        elif (use := _use_of_filesystem(pid, rdev)) is not None:
            found.append(f"PID {pid} ({_comm_state(pid)}) {use}")
        ns = _ns(pid)
        if ns is None or ns == ours or ns in seen_ns:
            continue
        seen_ns.add(ns)
        where = [m.mountpoint for m in mounts(f"/proc/{pid}/mountinfo") if m.devno == rdev]
        if where:
            found.append(f"PID {pid} ({_comm_state(pid)}) has it mounted in its own "
                         f"namespace at {where[0]}")
    found += [f"mounted at {m.mountpoint}" for m in mounts() if m.devno == rdev]
    try:
        found += [f"held by {h}" for h in os.listdir(
            f"/sys/block/{os.path.basename(node)}/holders")]
    except OSError:
        pass
    return found


def _use_of_filesystem(pid: int, rdev: int) -> str | None:
    """How a process uses a filesystem on device ``rdev``, if it does: its root, working
    directory or an open file there."""
    for link, what in (("root", "has its root"), ("cwd", "has its working directory")):
        if _st_dev(f"/proc/{pid}/{link}") == rdev:
            return f"{what} on a filesystem on it"
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return None
    for fd in fds:
        path = f"/proc/{pid}/fd/{fd}"
        if _st_dev(path) == rdev:
            try:
                target = os.readlink(path)
            except OSError:
                target = "?"
            return f"has {target} open on a filesystem on it"
    return None


def _st_dev(path: str) -> int | None:
    try:
        return os.stat(path).st_dev
    except OSError:
        return None


def _fd_targets(pid: int) -> set[str]:
    """What a process's file descriptors point at (each read on its own: one closing
    meanwhile, like the one listing the directory, must not hide the others)."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return set()
    found = set()
    for fd in fds:
        try:
            found.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            continue
    return found


def _ns(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/mnt")
    except OSError:
        return None


def _comm_state(pid: int) -> str:
    fields = _stat_fields(pid)
    state = f", state {fields[0]}" if fields else ""
    return f"{comm_of(pid) or '?'}{state}"
