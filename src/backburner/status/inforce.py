"""What the kernel has in force for a process now, and where it differs from what was set.

Read where it takes effect, never from what a command asked for: the IO class of every
thread (ioprio_get), the CPU policy and nice (sched_getscheduler, getpriority), and the
process's cgroups (/proc/PID/cgroup). A thread born after a change copies it; a thread the
job itself changed later (a renice, an ionice inside it) shows here as a difference.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..kernel import cgroups, priorities, procfs
from ..policy import grammar, live

#: The v1 controllers whose groups act on bulk work (weights, pauses, network classes);
#: a v2 group ("v2") always shows. Others (memory, pids, a session manager's name=) do not.
ACTING = {"blkio", "io", "cpu", "freezer", "net_cls"}

#: CPU policies as `run --cpu` spells them (sched_getscheduler's numbers).
_CPU = {os.SCHED_IDLE: "idle", os.SCHED_BATCH: "batch", os.SCHED_OTHER: "normal"}


@dataclass(frozen=True)
class InForce:
    """One process as the kernel reports it: its main thread's values, the cgroups it is
    in (`controllers:path`, the root "/" left out), and how many of its other threads (of
    `threads` in all) are off what was set."""

    io: str                    # "idle", "be:4", "none" (no class set: from nice)
    cpu: str                   # "idle", "batch", "normal", or a realtime policy
    nice: int
    cgroups: list[str] = field(default_factory=list)
    threads: int = 1
    threads_off: int = 0

    def describe(self) -> str:
        cpu = self.cpu if self.cpu == "idle" else f"{self.cpu}, nice {self.nice}"
        return f"io {self.io}; cpu {cpu}; cgroup " + (", ".join(self.cgroups) or "/ (root)")


def _cpu_name(policy: int) -> str:
    return _CPU.get(policy) or priorities.SCHED_NAMES.get(policy, f"policy {policy}")


def read(pid: int, wanted: grammar.Policy | None = None) -> InForce | None:
    """What `pid` has now; None once it has exited. With `wanted`, the threads whose IO
    class or CPU policy differ from it are counted."""
    snap = priorities.snapshot_thread(pid)
    if snap is None:
        return None
    tids = procfs.threads_of(pid) or [pid]
    off = 0
    if wanted is not None:
        for tid in tids:
            if tid == pid:
                continue  # the main thread's own values are compared apart
            t = priorities.snapshot_thread(tid)
            if t is not None and not live.has_policy(t, wanted):
                off += 1
    groups = [f"{ctrl or 'v2'}:{path}" for _h, ctrl, path in procfs.cgroup_lines(pid)
              if path not in ("/", "") and (not ctrl or set(ctrl.split(",")) & ACTING)]
    return InForce(str(priorities.IOPrio.from_value(snap["io"])), _cpu_name(snap["policy"]),
                   snap["nice"], groups, len(tids), off)


def differences(pid: int, now: InForce, wanted: grammar.Policy | None,
                groups: Sequence[str] = ()) -> list[str]:
    """Where what is in force differs from what was set: the IO class, the CPU policy
    (and nice, when one was set), and each group the process was put in (a directory
    under cgroupfs, whose cgroup.procs must list it)."""
    out = []
    if wanted is not None:
        if wanted.io is not None and now.io != str(wanted.io):
            out.append(f"io: set {wanted.io}, in force {now.io}")
        cpu = wanted.cpu
        if cpu is not None:
            exact = cpu.kind != "idle" and cpu.nice is not None
            have = f"{now.cpu}:{now.nice}" if exact else now.cpu
            want = f"{cpu.kind}:{cpu.nice}" if exact else cpu.kind
            if have != want:
                out.append(f"cpu: set {cpu}, in force {now.cpu} (nice {now.nice})")
        if now.threads_off:
            out.append(f"{now.threads_off} of its {now.threads - 1} other threads are off "
                       "what was set (changed since, from inside?)")
    for group in groups:
        if not member_of(pid, group):
            out.append(f"cgroup: not in {group}"
                       + ("" if os.path.isdir(group) else " (the group is gone)"))
    return out


def member_of(pid: int, group: str) -> bool:
    """Whether `pid` is in the cgroup directory `group` (its cgroup.procs lists it)."""
    try:
        return pid in cgroups.pids(group)
    except OSError:
        return False
