"""Priorities of a job: IO class (ioprio_set), CPU policy (sched/nice) and cgroup weights.

A `Policy` is a value: what to set. Applying it happens in two places:
- in the child before exec (`apply_to_self`, called by `spawn`), so the job never runs a
  single instruction at the old priority;
- on every thread of a running process tree (`apply_to_tree`, for `run --pid`).
Cgroups are created by `system` (they are system state with an undo); this module only
decides which hierarchy and which weight files, and reads values back for verification.
"""

from __future__ import annotations

import ctypes
import os
import platform
import re
import struct
from dataclasses import dataclass, field, replace
from pathlib import Path

from .base.errors import NotFoundError, NotRootError, SystemStateError, UnavailableError, UsageError
from .kernel import procfs

# ioprio_set(2) / ioprio_get(2): there is no glibc wrapper, so call the syscall directly.
# (ioprio_set, ioprio_get) by the userland ABI, keyed by platform.machine() names, for every
# architecture Debian ships. Checked against the kernel's tables: arch/x86/entry/syscalls/
# syscall_{64,32}.tbl, arch/arm/tools/syscall.tbl, arch/powerpc/kernel/syscalls/syscall.tbl,
# arch/s390/kernel/syscalls/syscall.tbl, arch/mips/kernel/syscalls/syscall_{n64,o32}.tbl
# (plus __NR_Linux 5000 / 4000), and include/uapi/asm-generic/unistd.h for arm64, riscv64
# and loong64, which use the generic table.
_GENERIC = (30, 31)
_I386 = (289, 290)
_ARM = (314, 315)  # EABI (armel, armhf)
_POWERPC = (273, 274)  # ppc64el, and 32-bit powerpc
_S390 = (282, 283)
_MIPS_O32 = (4314, 4315)
_SYSCALLS: dict[str, tuple[int, int]] = {
    "x86_64": (251, 252),  # amd64
    "i386": _I386, "i486": _I386, "i586": _I386, "i686": _I386,  # i386
    "aarch64": _GENERIC, "arm64": _GENERIC,  # arm64
    "armv5tel": _ARM, "armv5tejl": _ARM, "armv6l": _ARM, "armv7l": _ARM, "armv8l": _ARM,
    "mips64": (5273, 5274),  # mips64el: the n64 ABI
    "mips": _MIPS_O32,
    "ppc64le": _POWERPC, "ppc64": _POWERPC, "ppc": _POWERPC,  # ppc64el
    "riscv64": _GENERIC,
    "s390x": _S390, "s390": _S390,
    "loongarch64": _GENERIC,  # loong64
}
# A 32-bit userland on a 64-bit kernel (armhf on an arm64 board, i386 on amd64) reports the
# kernel's machine but makes the 32-bit ABI's system calls.
_COMPAT_32 = {"x86_64": "i686", "aarch64": "armv7l", "arm64": "armv7l", "mips64": "mips",
              "ppc64le": "ppc", "ppc64": "ppc", "s390x": "s390"}
IOPRIO_WHO_PROCESS = 1
IOPRIO_CLASS_SHIFT = 13
IO_CLASSES = {"none": 0, "rt": 1, "be": 2, "idle": 3}
IO_CLASS_NAMES = {v: k for k, v in IO_CLASSES.items()}

_libc = ctypes.CDLL(None, use_errno=True)


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


@dataclass(frozen=True)
class Policy:
    """Everything `run` may change about a job. ``None`` means "leave as inherited"."""

    name: str = "custom"
    io: IOPrio | None = None
    cpu: CPUPolicy | None = None
    io_weight: int | None = None  # 1..1000, cgroup IO weight (BFQ honours it)
    cpu_weight: int | None = None  # 1..10000, cgroup v2 scale (100 = default)
    # cgroup v2's own IO controls, set on groups rather than on processes:
    group_io: str | None = None  # io.prio.class of the job's group: also its writeback
    io_latency_us: int | None = None  # io.latency target of the protected (interactive) group
    io_cost: bool = False  # io.cost's QoS on the device under test; weights through io.weight
    description: str = field(default="", compare=False)

    @property
    def needs_cgroup(self) -> bool:
        return (self.io_weight is not None or self.cpu_weight is not None
                or self.group_io is not None or self.io_latency_us is not None
                or self.io_cost)

    @property
    def group_controls(self) -> list[str]:
        """The spec keys of the knobs only cgroup v2's io controller has (empty: none)."""
        return [key for key, on in (("group-io", self.group_io is not None),
                                    ("io-latency", self.io_latency_us is not None),
                                    ("io-cost", self.io_cost)) if on]

    def with_overrides(self, **kw: object) -> Policy:
        """Explicit options override the named policy's parts; the result is 'custom'."""
        changes = {k: v for k, v in kw.items() if v is not None}
        if not changes:
            return self
        name = self.name if self.name == "custom" else f"{self.name}+custom"
        return replace(self, name=name, **changes)

    def settings(self) -> dict[str, str]:
        return {
            "io": str(self.io) if self.io else "inherit",
            "cpu": str(self.cpu) if self.cpu else "inherit",
            "io-weight": str(self.io_weight) if self.io_weight else "-",
            "cpu-weight": str(self.cpu_weight) if self.cpu_weight else "-",
            **self._group_settings(),
        }

    def _group_settings(self) -> dict[str, str]:
        """cgroup v2's group-level knobs, named only when set (older runs have none)."""
        out = {}
        if self.group_io is not None:
            out["group-io"] = self.group_io
        if self.io_latency_us is not None:
            out["io-latency"] = format_latency(self.io_latency_us)
        if self.io_cost:
            out["io-cost"] = "on"
        return out

    def spec(self) -> str:
        """A string that `parse_policy` turns back into this policy."""
        if self.name in BUILTIN:
            return self.name
        parts = []
        if self.io:
            parts.append(f"io={self.io}")
        if self.cpu:
            parts.append(f"cpu={self.cpu}")
        if self.io_weight:
            parts.append(f"io-weight={self.io_weight}")
        if self.cpu_weight:
            parts.append(f"cpu-weight={self.cpu_weight}")
        parts += [f"{k}={v}" for k, v in self._group_settings().items()]
        return ",".join(parts) or "default"


BUILTIN: dict[str, Policy] = {
    p.name: p
    for p in (
        Policy("default", description="change nothing: the job runs as the shell started it"),
        Policy(
            "background",
            IOPrio("idle"),
            CPUPolicy("idle"),
            io_weight=10,
            cpu_weight=10,
            description="idle IO class, SCHED_IDLE, cgroup IO and CPU weight 10 "
            "(1/10 of a default group): runs only when nothing else wants the disk/CPU",
        ),
        Policy(
            "gentle",
            IOPrio("be", 7),
            CPUPolicy("normal", 19),
            description="best-effort IO at the lowest level 7, nice 19: still makes progress "
            "under sustained load, yields most of the time",
        ),
        Policy(
            "group-idle",
            group_io="idle",
            description="cgroup v2 io.prio.class idle on the job's group: its IO and the "
            "writeback of the pages it dirtied in the idle class (a process's class misses "
            "the writeback)",
        ),
        Policy(
            "low-weight",
            io_weight=10,
            description="cgroup IO weight 10 alone (io.weight and io.bfq.weight): no IO class, "
            "no CPU policy",
        ),
        Policy(
            "latency-target",
            io_latency_us=10_000,
            description="bench: cgroup v2 io.latency target of 10 ms on the probe's group on "
            "the device under test; the kernel throttles the load's group when it is missed",
        ),
        Policy(
            "iocost",
            io_weight=10,
            io_cost=True,
            description="bench: cgroup v2 io.cost enabled on the device under test (the "
            "kernel's device model, its QoS on) with the job's group at io.weight 10",
        ),
    )
}


def parse_weight(text: str | int, what: str, top: int) -> int:
    try:
        value = int(text)
    except (TypeError, ValueError):
        raise UsageError(f"{what} must be a whole number, not {text!r}") from None
    if not 1 <= value <= top:
        raise UsageError(f"{what} {value} out of range", f"use 1..{top} (100 is the default)")
    return value


#: io.prio.class values a job's group may take: a bulk job is only ever lowered.
GROUP_IO_CLASSES = ("idle", "restrict-to-be", "no-change")
_FIELDS = "io, cpu, io-weight, cpu-weight, group-io, io-latency, io-cost"


def parse_group_io(text: str) -> str:
    value = {"be": "restrict-to-be"}.get(text.strip(), text.strip())
    if value not in GROUP_IO_CLASSES:
        raise UsageError(f"unknown group IO class {text!r}",
                         f"use one of {', '.join(GROUP_IO_CLASSES)} (cgroup v2 io.prio.class)")
    return value


def parse_latency(text: str | int) -> int:
    """An io.latency target: ``10ms``, ``500us``, or a bare number of milliseconds; in µs."""
    m = re.fullmatch(r"(\d+)(ms|us)?", str(text).strip())
    value = int(m.group(1)) * (1 if m.group(2) == "us" else 1000) if m else 0
    if not m or not 1 <= value <= 10_000_000:
        raise UsageError(f"io.latency target {text!r} is not a latency",
                         "give e.g. 10ms or 500us (1 us .. 10 s)")
    return value


def format_latency(us: int) -> str:
    return f"{us // 1000}ms" if us % 1000 == 0 else f"{us}us"


def parse_switch(text: str, what: str) -> bool:
    if text.strip() in ("on", "yes", "1", "true"):
        return True
    if text.strip() in ("off", "no", "0", "false"):
        return False
    raise UsageError(f"{what} takes on or off, not {text!r}")


def parse_policy(spec: str) -> Policy:
    """A built-in name, or ``io=idle,cpu=nice:10,io-weight=50,cpu-weight=20`` (and cgroup
    v2's ``group-io=idle``, ``io-latency=10ms``, ``io-cost=on``)."""
    spec = spec.strip()
    if spec in BUILTIN:
        return BUILTIN[spec]
    if "=" not in spec:
        raise UsageError(
            f"unknown policy {spec!r}",
            f"use one of {', '.join(BUILTIN)} or {_FIELDS.replace(',', '=…,')}=…",
        )
    base = spec.split(",")[0]
    policy = BUILTIN[base] if base in BUILTIN else Policy("custom")
    kw: dict[str, object] = {}
    for item in spec.split(",")[1 if base in BUILTIN else 0 :]:
        key, _, val = item.partition("=")
        key = key.strip()
        if key == "io":
            kw["io"] = IOPrio.parse(val)
        elif key == "cpu":
            kw["cpu"] = CPUPolicy.parse(val)
        elif key == "io-weight":
            kw["io_weight"] = parse_weight(val, "IO weight", 1000)
        elif key == "cpu-weight":
            kw["cpu_weight"] = parse_weight(val, "CPU weight", 10000)
        elif key == "group-io":
            kw["group_io"] = parse_group_io(val)
        elif key == "io-latency":
            kw["io_latency_us"] = parse_latency(val)
        elif key == "io-cost":
            kw["io_cost"] = parse_switch(val, "io-cost")
        else:
            raise UsageError(f"unknown policy field {key!r} in {spec!r}",
                             f"fields are {_FIELDS}")
    return policy.with_overrides(**kw)


# --- kernel calls -------------------------------------------------------------------------


def syscall_numbers(machine: str, pointer_bits: int) -> tuple[int, int]:
    """(ioprio_set, ioprio_get) for a `platform.machine()` name and the size of a pointer
    in this process (32 for a 32-bit userland on a 64-bit kernel)."""
    if pointer_bits == 32:
        machine = _COMPAT_32.get(machine, machine)
    try:
        return _SYSCALLS[machine]
    except KeyError:
        raise UnavailableError(
            f"the ioprio system call numbers of {machine} ({pointer_bits}-bit) are unknown",
            "--io is not available here; --cpu and the cgroup weights are") from None


def _syscall_numbers() -> tuple[int, int]:
    return syscall_numbers(platform.machine(), struct.calcsize("P") * 8)


def ioprio_set(tid: int, prio: IOPrio) -> None:
    _ioprio_set_value(tid, prio.value)


def ioprio_get(tid: int) -> IOPrio:
    _, nr_get = _syscall_numbers()
    value = _libc.syscall(nr_get, IOPRIO_WHO_PROCESS, tid)
    if value < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"ioprio_get({tid}): {os.strerror(err)}")
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


def apply_to_self(policy: Policy) -> None:
    """Called in the child between fork and exec (async-signal-safe enough: no locks held)."""
    if policy.io is not None:
        ioprio_set(0, policy.io)
    if policy.cpu is not None:
        set_cpu(0, policy.cpu)


# --- running processes (run --pid) ----------------------------------------------------------


def tree_threads(pid: int) -> list[tuple[int, int]]:
    """(process, thread) pairs of pid and all its descendants."""
    return [(proc, tid) for proc in [pid, *procfs.descendants_of(pid)]
            for tid in procfs.threads_of(proc)]


def apply_to_tree(pid: int, policy: Policy) -> list[int]:
    """Re-prioritise every thread of pid and of its descendants; returns the thread ids done.

    Only `system.Priorities` calls this (with the old values journaled first)."""
    if not Path(f"/proc/{pid}").exists():
        raise NotFoundError(f"no process with PID {pid}", "check the PID with `ps -p PID`")
    done: list[int] = []
    for _proc, tid in tree_threads(pid):
        try:
            if policy.io is not None:
                ioprio_set(tid, policy.io)
            if policy.cpu is not None:
                set_cpu(tid, policy.cpu)
        except ProcessLookupError:
            continue  # the thread ended while we walked: nothing left to change
        except PermissionError as err:
            if os.geteuid() != 0:
                raise NotRootError(
                    f"changing the priorities of PID {pid} (another user's process, "
                    "or a higher priority)") from None
            raise SystemStateError(
                f"not allowed to change priorities of thread {tid}: {err.strerror}"
            ) from None
        except OSError as err:
            if err.errno == 3:  # ESRCH from the raw syscall
                continue
            raise SystemStateError(f"changing thread {tid}: {err}") from None
        done.append(tid)
    return done


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


def has_policy(snap: dict[str, int], policy: Policy) -> bool:
    """Whether a thread's snapshot already shows what `policy` sets (a thread born after
    its creator was changed copies the new values)."""
    if policy.io is not None and snap["io"] != policy.io.value:
        return False
    cpu = policy.cpu
    if cpu is None:
        return True
    kind = {os.SCHED_IDLE: "idle", os.SCHED_BATCH: "batch",
            os.SCHED_OTHER: "normal"}.get(snap["policy"])  # realtime: never ours
    return kind == cpu.kind and (cpu.kind == "idle" or cpu.nice is None
                                 or snap["nice"] == cpu.nice)


def snapshot_tree(pid: int) -> dict[int, dict[str, int]]:
    """Every thread's snapshot, keyed by thread id (a process's own id = its main thread)."""
    out = {}
    for _proc, tid in tree_threads(pid):
        snap = snapshot_thread(tid)
        if snap is not None:
            out[tid] = snap
    return out


def restore_tree(pid: int, saved: dict[int, dict[str, int]]) -> int:
    """Put back saved snapshots on the threads of pid's tree that still live. A thread born
    after the snapshot gets what its process's main thread had (else what pid had). Returns
    the number of threads restored.

    Only what is provably the journaled process is touched: when pid now has another start
    time (it exited, and a new process got its PID) nobody's tree is walked; only journaled
    threads that still live with their journaled start time (children that outlived it)
    are put back."""
    fallback = saved.get(pid)
    if not is_same_process(pid, saved):
        return sum(1 for tid, snap in saved.items()
                   if procfs.start_time(tid) == snap["start"] and restore_thread(tid, snap))
    restored = 0
    for proc, tid in tree_threads(pid):
        snap = saved.get(tid)
        if snap is None or procfs.start_time(tid) != snap["start"]:
            snap = saved.get(proc) or fallback
        if snap is not None and restore_thread(tid, snap):
            restored += 1
    return restored


def is_same_process(pid: int, saved: dict[int, dict[str, int]]) -> bool:
    """Whether pid is still the process whose snapshot `saved` holds (same start time)."""
    snap = saved.get(pid)
    return snap is not None and procfs.start_time(pid) == snap["start"]


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
    nr_set, _ = _syscall_numbers()
    if _libc.syscall(nr_set, IOPRIO_WHO_PROCESS, tid, value) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"ioprio_set({tid}, {IOPrio.from_value(value)}): {os.strerror(err)}")


# --- cgroups: which hierarchy, which files ----------------------------------------------------


@dataclass(frozen=True)
class CgroupPlan:
    """Directories to create and the weight files to write in each (all under cgroupfs)."""

    version: int
    dirs: dict[str, dict[str, str]]  # path -> {file or "a|b" alternatives: value}
    # cgroup v2 only: controllers that must be on in the root's and in our parent group's
    # cgroup.subtree_control for the job's group to have weight files at all.
    enable: tuple[str, ...] = ()
    root: str = ""

    @property
    def procs_files(self) -> list[str]:
        return [os.path.join(d, "cgroup.procs") for d in self.dirs]


def _mounts(mountinfo: str = "/proc/self/mountinfo") -> list[tuple[str, str, set[str]]]:
    return [(m.mountpoint, m.fstype, set(m.all_options)) for m in procfs.mounts(mountinfo)
            if m.fstype in ("cgroup", "cgroup2")]


def _v2_root(mounts: list[tuple[str, str, set[str]]]) -> Path | None:
    for mnt, fstype, _ in mounts:
        if fstype == "cgroup2":
            return Path(mnt)
    return None


def _v1_mount(mounts: list[tuple[str, str, set[str]]], controller: str) -> Path | None:
    for mnt, fstype, opts in mounts:
        if fstype == "cgroup" and controller in opts:
            return Path(mnt)
    return None


def plan_cgroup(policy: Policy, name: str, mountinfo: str = "/proc/self/mountinfo"
                ) -> CgroupPlan:
    """Choose cgroup v2 where its io/cpu controllers are available, else v1 blkio/cpu.

    v1 needs a child group for BFQ weights (the root has no blkio.bfq.weight), so the job
    always gets its own group ``backburner/<name>`` in each hierarchy used.
    """
    mounts = _mounts(mountinfo)
    v2 = _v2_root(mounts)
    v2_controllers = set()
    if v2 is not None and (v2 / "cgroup.controllers").exists():
        v2_controllers = set((v2 / "cgroup.controllers").read_text().split())
    need = {"io"} if policy.io_weight or policy.group_io else set()
    need |= {"cpu"} if policy.cpu_weight else set()
    if v2 is not None and need and need <= v2_controllers:
        if "io" in need and "memory" in v2_controllers:  # writeback charged to the job's
            need.add("memory")  # group only with both on (cgroup-v2.rst, "Writeback")
        files: dict[str, str] = {}
        if policy.io_weight:
            files["io.bfq.weight|io.weight"] = str(policy.io_weight)
        if policy.cpu_weight:
            files["cpu.weight"] = str(policy.cpu_weight)
        if policy.group_io:  # blk-ioprio: the group's bios, its writeback included
            files["io.prio.class"] = policy.group_io
        return CgroupPlan(2, {str(v2 / "backburner" / name): files},
                          enable=tuple(sorted(need)), root=str(v2))
    if policy.group_io:
        where = f"{v2 / 'cgroup.controllers'} does not list io" if v2 else "no cgroup2 mount"
        raise UnavailableError(f"group-io needs cgroup v2's io.prio.class: {where}",
                               "use io=idle for the job's own IO")
    dirs: dict[str, dict[str, str]] = {}
    if policy.io_weight:
        blkio = _v1_mount(mounts, "blkio")
        if blkio is None:
            raise UnavailableError(
                "an IO weight needs the cgroup blkio (v1) or io (v2) controller, and neither "
                "is mounted",
                "drop --io-weight (or use --no-cgroup), or mount the blkio controller",
            )
        dirs[str(blkio / "backburner" / name)] = {"blkio.bfq.weight": str(policy.io_weight)}
    if policy.cpu_weight:
        cpu = _v1_mount(mounts, "cpu")
        if cpu is None:
            raise UnavailableError(
                "a CPU weight needs the cgroup cpu controller (v1 or v2), and it is not mounted",
                "drop --cpu-weight (or use --no-cgroup), or mount the cpu controller",
            )
        shares = max(2, round(policy.cpu_weight * 1024 / 100))
        dirs[str(cpu / "backburner" / name)] = {"cpu.shares": str(shares)}
    return CgroupPlan(1, dirs)
