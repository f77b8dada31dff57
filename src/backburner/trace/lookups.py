"""What a start asks of the filesystem besides the bytes it reads: the names it looks up
(found or not), the inodes it stats, the directories it lists; from strace.

fanotify reports opens and reads, not a stat, a failed lookup or a listing; yet each of
those reads the filesystem's metadata (an inode-table block, a directory's blocks), and
on a seeking medium each is a trip of the head when it lies away from the rest. So
`readahead record --lookups` runs the start under ``strace -f`` (with ``--seccomp-bpf``:
only the path syscalls stop the tracee) and keeps, in order, each path a process of the
start named and what came of it.

`command` makes the traced command line; `parse` (pure) reads strace's output back.
strace prints every string and every descriptor's path in hex (``-xx``), so any byte
of a name survives. Paths are made absolute as the host sees them: a descriptor's path
comes with it (``-y``), a relative name is taken from the directory it is relative to
(the working directory's path comes with ``AT_FDCWD``), and an absolute one from the
process's root, followed through ``chroot`` (a start in a chroot names its files from its
own root) and inherited across ``fork``/``clone``.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..base.errors import UnavailableError

OPEN, STAT, MISS, LIST = "open", "stat", "miss", "list"
#: The calls that name a path (or list a directory), and those that move a process's root
#: or working directory, or make a process that inherits them.
_OPENS = frozenset({"open", "openat", "openat2", "creat", "execve", "execveat"})
_STATS = frozenset({"stat", "lstat", "newfstatat", "fstatat64", "statx", "access",
                    "faccessat", "faccessat2", "readlink", "readlinkat"})
_MOVES = frozenset({"chroot", "chdir", "fchdir"})
_FORKS = frozenset({"clone", "clone3", "fork", "vfork"})
SYSCALLS = tuple(sorted(_OPENS | _STATS | _MOVES | _FORKS | {"getdents64", "getdents"}))
#: Errors that say a name is not there: the directory searched was read for nothing.
_MISSING = ("ENOENT", "ENOTDIR")

_LINE = re.compile(r"^(\d+) +(\d+\.\d+) +(.*)$")
_CALL = re.compile(r"^(\w+)\((.*)$")
_RESUMED = re.compile(r"^<\.\.\. (\w+) resumed>(.*)$")
_HEX = re.compile(r'"((?:\\x[0-9a-f]{2})*)"')
_FD = re.compile(r"(AT_FDCWD|\d+)<((?:\\x[0-9a-f]{2})*)>")
_RESULT = re.compile(r"\) += (-?\d+)(?:<((?:\\x[0-9a-f]{2})*)>)?(?: ([A-Z][A-Z0-9_]+))?")


def missing() -> str | None:
    """Why lookups cannot be recorded here, or None."""
    return None if shutil.which("strace") else "strace is not installed"


def command(argv: list[str], output: str) -> list[str]:
    """`argv` under strace, writing what it saw to `output`."""
    why = missing()
    if why:
        raise UnavailableError(f"recording lookups needs strace: {why}",
                               "apt-get install strace, or record without --lookups")
    return ["strace", "-f", "-qq", "--seccomp-bpf", "-ttt", "-y", "-xx",
            "-e", "trace=" + ",".join(SYSCALLS), "-e", "signal=none", "-o", output,
            "--", *argv]


@dataclass(frozen=True)
class Call:
    """One thing a process of the start asked: `kind` OPEN (a file it opened: fanotify
    has its bytes), STAT (an inode it looked at without opening it, or could not open),
    MISS (a name that is not there) or LIST (a directory it read the entries of)."""

    t: float  # seconds since the epoch, at the call
    pid: int
    kind: str
    path: bytes  # absolute, as the host sees it


@dataclass
class _Proc:
    root: bytes = b"/"
    cwd: bytes = b"/"
    pending: str = ""  # an unfinished call's head


@dataclass
class Parsed:
    calls: list[Call] = field(default_factory=list)
    first_pid: int | None = None  # the traced command's own process


def _hex(text: str) -> bytes:
    return bytes.fromhex(text.replace("\\x", ""))


def _inside(root: bytes, path: bytes) -> bytes:
    """An absolute path of a process whose root is `root`, as the host sees it."""
    return os.path.normpath(os.path.join(root, path.lstrip(b"/")) if root != b"/" else path)


def _resolve(p: _Proc, base: bytes | None, name: bytes) -> bytes:
    if name.startswith(b"/"):
        return _inside(p.root, name)
    return os.path.normpath(os.path.join(base if base is not None else p.cwd, name))


def _errno(rest: str) -> str | None:
    m = _RESULT.search(rest)
    return m.group(3) if m and m.group(1).startswith("-") else None


def _step(procs: dict[int, _Proc], out: Parsed, pid: int, t: float, name: str, args: str
          ) -> None:
    p = procs.setdefault(pid, _Proc())
    fds = _FD.findall(args.split(") = ")[0] if ") = " in args else args)
    base = None
    for which, path in fds:
        if which == "AT_FDCWD":
            p.cwd = _hex(path)
    res = _RESULT.search(args)
    ok = res is not None and not res.group(1).startswith("-")
    if name in _FORKS:
        if ok and res is not None:
            child = procs.setdefault(int(res.group(1)), _Proc())
            child.root, child.cwd = p.root, p.cwd
        return
    strings = _HEX.findall(args)
    if name == "fchdir":
        if ok and fds:
            p.cwd = _hex(fds[0][1])
        return
    if name in ("getdents64", "getdents"):
        if fds:
            out.calls.append(Call(t, pid, LIST, _hex(fds[0][1])))
        return
    if not strings:
        return
    if fds and fds[0][0] != "AT_FDCWD":
        base = _hex(fds[0][1])
    path = _resolve(p, base, _hex(strings[0]))
    if name == "chroot":
        if ok:
            p.root = path
        return
    if name == "chdir":
        if ok:
            p.cwd = path
        return
    if not _hex(strings[0]):
        return  # AT_EMPTY_PATH: the descriptor's own inode, no lookup
    err = _errno(args)
    if name in _OPENS:
        if ok and res is not None and res.group(2) is not None:
            path = _hex(res.group(2))  # what the descriptor names: links followed
        kind = OPEN if ok else MISS if err in _MISSING else STAT
    else:
        kind = STAT if ok else MISS if err in _MISSING else STAT
    out.calls.append(Call(t, pid, kind, path))


def parse(lines: Iterable[str], cwd: bytes = b"/") -> Parsed:
    """strace's output (`command`'s) -> the calls, in the order they were made; `cwd` is
    where the command started (until a call shows its working directory)."""
    procs: dict[int, _Proc] = {}
    out = Parsed()
    for raw in lines:
        m = _LINE.match(raw.rstrip("\n"))
        if not m:
            continue
        pid, t, rest = int(m.group(1)), float(m.group(2)), m.group(3)
        if out.first_pid is None:
            out.first_pid = pid
            procs[pid] = _Proc(cwd=cwd)
        p = procs.setdefault(pid, _Proc(cwd=cwd))
        if rest.endswith("<unfinished ...>"):
            p.pending = rest[: -len("<unfinished ...>")]
            continue
        resumed = _RESUMED.match(rest)
        if resumed:
            head, p.pending = p.pending, ""
            call = _CALL.match(head)
            if not call or call.group(1) != resumed.group(1):
                continue
            name, args = call.group(1), call.group(2) + resumed.group(2)
        else:
            call = _CALL.match(rest)
            if not call:
                continue
            name, args = call.group(1), call.group(2)
        _step(procs, out, pid, t, name, args)
    return out


__all__ = ["LIST", "MISS", "OPEN", "STAT", "SYSCALLS", "Call", "Parsed", "command", "missing",
           "parse"]
