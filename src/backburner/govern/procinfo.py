"""A process's facts as rules ask for them: read from /proc (through `procfs`), lazily.

The daemon sees every program started on the machine; most match no rule, and for those
only the name is read (see `rules.Ruleset.candidates`). Everything else (the path of the
program, its arguments, its ancestors, its systemd unit and cgroup, its user) is read the
first time a rule asks, and then kept for the rest of that one decision. Read-only.
"""

from __future__ import annotations

import functools
import pwd

from ..kernel import procfs
from .rules import StaticFacts

#: Systemd unit suffixes a process can run in (a slice groups units; it is not one).
_UNIT_SUFFIXES = (".service", ".scope")
_MAX_DEPTH = 64


def unit_from_cgroup(path: str) -> str:
    """The innermost systemd unit in a cgroup path:
    /user.slice/user-1000.slice/user@1000.service/app.slice/app-x.scope -> app-x.scope."""
    for part in reversed(path.strip("/").split("/")):
        if part.endswith(_UNIT_SUFFIXES):
            return part
    return ""


def cgroup_path(lines: list[tuple[str, str, str]]) -> str:
    """The path that names where a process lives: cgroup v2's ("0::"), unless that is the
    root and systemd's own v1 hierarchy (name=systemd, hybrid/legacy setups) says more."""
    v2 = next((p for h, c, p in lines if h == "0" and not c), "")
    named = next((p for _h, c, p in lines if c == "name=systemd"), "")
    if v2 and (v2 != "/" or not named):
        return v2
    return named or v2


@functools.lru_cache(maxsize=256)
def user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except (KeyError, OverflowError):
        return ""


class ProcInfo:
    """`rules.Facts` of a live process, each read on first use (None/''/[] once it is gone).

    `comm` may be given (the connector's comm event carries it)."""

    def __init__(self, pid: int, comm: str | None = None) -> None:
        self.pid = pid
        if comm is not None:
            self.__dict__["comm"] = comm

    @functools.cached_property
    def comm(self) -> str:
        return procfs.comm_of(self.pid) or ""

    @functools.cached_property
    def exe(self) -> str:
        return procfs.exe_of(self.pid)

    @functools.cached_property
    def cmdline(self) -> list[str]:
        return procfs.cmdline_of(self.pid)

    @functools.cached_property
    def ancestors(self) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        cur = procfs.parent_of(self.pid)
        while cur and len(out) < _MAX_DEPTH:
            out.append((procfs.comm_of(cur) or "", procfs.exe_of(cur)))
            if cur == 1:
                break
            cur = procfs.parent_of(cur)
        return out

    @functools.cached_property
    def cgroup(self) -> str:
        return cgroup_path(procfs.cgroup_lines(self.pid))

    @functools.cached_property
    def unit(self) -> str:
        return unit_from_cgroup(self.cgroup)

    @functools.cached_property
    def uid(self) -> int:
        return procfs.uid_of(self.pid)

    @functools.cached_property
    def user(self) -> str:
        return user_name(self.uid) if self.uid >= 0 else ""

    def freeze(self) -> StaticFacts:
        """All facts read now, as plain values (for `explain` and the tests)."""
        return StaticFacts(self.pid, self.comm, self.exe, list(self.cmdline),
                           list(self.ancestors), self.unit, self.cgroup, self.user, self.uid)


def is_kernel_thread(pid: int) -> bool:
    return procfs.is_kernel_thread(pid)  # by its flags: PID 2 of a container is no kthread
