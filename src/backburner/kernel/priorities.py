"""The kernel's IO and CPU priorities of a thread: the IO class and level (ioprio_set(2),
ioprio_get(2)), the CPU scheduling policy and nice value, as values (`IOPrio`,
`CPUPolicy`), set, read back, and saved and put back whole (`snapshot_thread`,
`restore_thread`).

Both are per thread on Linux: a process's threads each carry their own, and a thread
copies its creator's when it is born. ioprio has no glibc wrapper: it is called by number
(`kernel.syscalls`).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from ..base.errors import UsageError
from . import procfs, syscalls

IOPRIO_WHO_PROCESS = 1
IOPRIO_CLASS_SHIFT = 13
IO_CLASSES = {"none": 0, "rt": 1, "be": 2, "idle": 3}
IO_CLASS_NAMES = {v: k for k, v in IO_CLASSES.items()}
#: What works where the ioprio calls' numbers are not known.
_NO_IOPRIO = "--io is not available here; --cpu and the cgroup weights are"


@dataclass(frozen=True)
class IOPrio:
    """An IO scheduling class and level, as ioprio_set(2) takes them."""

    klass: str  # none | rt | be | idle
    level: int = 0

    @classmethod
    def parse(cls, text: str) -> IOPrio:
        m = re.fullmatch(r"(none|idle|be|rt|best-effort|realtime)(?::([0-7]))?", text.strip())
        if not m:
            raise UsageError(
                f"unknown IO class {text!r}",
                "use idle, be:0-7, rt:0-7 or none (levels 0 = highest, 7 = lowest)",
            )
        klass = {"best-effort": "be", "realtime": "rt"}.get(m.group(1), m.group(1))
        if klass in ("idle", "none") and m.group(2) is not None:
            raise UsageError(f"IO class {klass} takes no level: {text!r}", f"use plain {klass!r}")
        level = int(m.group(2)) if m.group(2) is not None else (4 if klass in ("be", "rt") else 0)
        return cls(klass, level)

    @property
    def value(self) -> int:
        return (IO_CLASSES[self.klass] << IOPRIO_CLASS_SHIFT) | self.level

    @classmethod
    def from_value(cls, value: int) -> IOPrio:
        return cls(IO_CLASS_NAMES.get(value >> IOPRIO_CLASS_SHIFT, "?"), value & 0x1FFF)

    def __str__(self) -> str:
        return self.klass if self.klass in ("idle", "none") else f"{self.klass}:{self.level}"


@dataclass(frozen=True)
class CPUPolicy:
    """A CPU scheduling policy: SCHED_IDLE, SCHED_BATCH (with nice), or SCHED_OTHER with nice."""

    kind: str  # idle | batch | normal
    nice: int | None = None

    @classmethod
    def parse(cls, text: str) -> CPUPolicy:
        text = text.strip()
        if text == "idle":
            return cls("idle")
        m = re.fullmatch(r"(batch|nice|normal)(?::(-?\d+))?", text)
        if not m or (m.group(1) == "nice" and m.group(2) is None):
            raise UsageError(
                f"unknown CPU policy {text!r}", "use idle, batch, batch:N, nice:N or normal"
            )
        nice = int(m.group(2)) if m.group(2) is not None else None
        if nice is not None and not -20 <= nice <= 19:
            raise UsageError(f"nice value {nice} out of range", "nice is -20..19")
        return cls("normal" if m.group(1) == "nice" else m.group(1), nice)

    def __str__(self) -> str:
        if self.kind == "idle":
            return "idle"
        if self.kind == "normal":
            return f"nice:{self.nice}" if self.nice is not None else "normal"
        return f"batch:{self.nice}" if self.nice is not None else "batch"


def ioprio_set(tid: int, prio: IOPrio) -> None:
    _ioprio_set_value(tid, prio.value)


def ioprio_get(tid: int) -> IOPrio:
    try:
        value = syscalls.syscall("ioprio_get", IOPRIO_WHO_PROCESS, tid, hint=_NO_IOPRIO)
    except OSError as err:
        raise OSError(err.errno, f"ioprio_get({tid}): {os.strerror(err.errno)}") from None
    return IOPrio.from_value(value)


def set_cpu(tid: int, cpu: CPUPolicy) -> None:
    """Applies to one thread: on Linux both sched_setscheduler and setpriority are per-thread."""
    if cpu.kind == "idle":
        os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))
        return
    policy = os.SCHED_BATCH if cpu.kind == "batch" else os.SCHED_OTHER
    os.sched_setscheduler(tid, policy, os.sched_param(0))
    if cpu.nice is not None:
        os.setpriority(os.PRIO_PROCESS, tid, cpu.nice)


SCHED_NAMES = {0: "normal", 3: "batch", 5: "idle", 1: "fifo", 2: "rr", 6: "deadline"}


def read_cpu(tid: int) -> tuple[str, int]:
    """(policy name, nice) as the kernel reports them, for verification."""
    return SCHED_NAMES.get(os.sched_getscheduler(tid), "?"), os.getpriority(os.PRIO_PROCESS, tid)


def snapshot_thread(tid: int) -> dict[str, int] | None:
    """What a thread has now: IO priority, CPU policy, nice, and its start time."""
    start = procfs.start_time(tid)
    if start is None:
        return None
    try:
        io = ioprio_get(tid).value
        policy = os.sched_getscheduler(tid)
        nice = os.getpriority(os.PRIO_PROCESS, tid)
    except (ProcessLookupError, OSError):
        return None
    return {"start": start, "io": io, "policy": policy, "nice": nice}


def restore_thread(tid: int, snap: dict[str, int]) -> bool:
    """Put one thread back as `snap` says; False if it has ended."""
    try:
        _ioprio_set_value(tid, snap["io"])
        os.sched_setscheduler(tid, snap["policy"], os.sched_param(0))
        os.setpriority(os.PRIO_PROCESS, tid, snap["nice"])
    except (ProcessLookupError, OSError):
        return False  # ended meanwhile
    return True


def _ioprio_set_value(tid: int, value: int) -> None:
    try:
        syscalls.syscall("ioprio_set", IOPRIO_WHO_PROCESS, tid, value, hint=_NO_IOPRIO)
    except OSError as err:
        raise OSError(err.errno, f"ioprio_set({tid}, {IOPrio.from_value(value)}): "
                      f"{os.strerror(err.errno)}") from None
