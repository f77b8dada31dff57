"""The kernel's own counters for a window: interrupts per CPU, /proc/stat, PSI, schedstat.

Reading these files changes nothing, so it may happen anywhere. The parsers and `delta` are
pure (text in, numbers out) and tested exactly; `snapshot` reads the files; `Window` is the
cheap start/stop pair `bench` keeps per trial; `ThreadSampler` follows the run-queue wait of
every thread of a process tree while it runs.

Everything here except the sampler is system-wide: other work on the machine shows up in
it, which is why `diff` calls a change only when it lies outside the runs' own spread.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

PROC = Path("/proc")
PSI_RESOURCES = ("cpu", "io", "memory")
#: /proc/stat counters that only grow (ctxt: context switches; processes: forks).
STAT_COUNTERS = ("ctxt", "intr", "softirq", "processes")
#: The aggregate `cpu` line of /proc/stat, in USER_HZ ticks.
CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
#: The inter-processor interrupts whose storms tell a spinning program apart (x86 names).
IPI_NAMES = {"CAL": "function call IPIs", "RES": "rescheduling IPIs", "TLB": "TLB shootdowns",
             "IWI": "IRQ work IPIs", "CFD": "function call IPIs", "IPI": "IPIs"}


# --- pure parsers ------------------------------------------------------------------------


@dataclass(frozen=True)
class IrqLine:
    """One line of /proc/interrupts: its counts per CPU and what it is."""

    desc: str
    per_cpu: tuple[int, ...]

    @property
    def total(self) -> int:
        return sum(self.per_cpu)


def parse_interrupts(text: str) -> dict[str, IrqLine]:
    """/proc/interrupts -> {"CAL": IrqLine("Function call interrupts", (76442, 39535)), ...}.

    Numbered lines keep their number as the name and the chip, hardware IRQ and device as
    the description. Lines with one total (ERR, MIS) have a one-element tuple.
    """
    lines = text.splitlines()
    if not lines:
        return {}
    ncpu = len(lines[0].split())
    out: dict[str, IrqLine] = {}
    for line in lines[1:]:
        name, sep, rest = line.partition(":")
        if not sep:
            continue
        tokens = rest.split()
        counts: list[int] = []
        for tok in tokens[:ncpu]:
            if not tok.isdigit():
                break
            counts.append(int(tok))
        if counts:
            out[name.strip()] = IrqLine(" ".join(tokens[len(counts):]), tuple(counts))
    return out


def parse_stat(text: str) -> dict[str, int]:
    """/proc/stat -> the growing counters (ctxt, intr total, softirq total, processes) and the
    aggregate CPU ticks as "cpu_user", "cpu_system", ...; instantaneous values are left out."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        key, _, rest = line.partition(" ")
        values = rest.split()
        if key == "cpu":
            for name, value in zip(CPU_FIELDS, values, strict=False):
                out[f"cpu_{name}"] = int(value)
        elif key in STAT_COUNTERS and values:
            out[key] = int(values[0])
    return out


def parse_psi(text: str) -> dict[str, int]:
    """One /proc/pressure file -> {"some": total µs, "full": total µs} (stalled time)."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        for item in rest.split():
            if item.startswith("total="):
                out[kind] = int(item[6:])
    return out


def parse_inner_ids(status: str) -> tuple[int, int] | None:
    """/proc/PID/task/TID/status -> (TID, PID) as the thread's innermost PID namespace
    numbers them (the last of NSpid and NStgid): what a tracer inside that namespace saw."""
    found: dict[str, int] = {}
    for line in status.splitlines():
        key, _, rest = line.partition(":")
        if key in ("NSpid", "NStgid") and rest.split() and rest.split()[-1].isdigit():
            found[key] = int(rest.split()[-1])
    if len(found) < 2:
        return None
    return found["NSpid"], found["NStgid"]


def parse_schedstat(text: str) -> tuple[int, int, int] | None:
    """/proc/PID/task/TID/schedstat -> (ns on CPU, ns waiting on a run queue, timeslices)."""
    parts = text.split()
    if len(parts) < 3 or not all(p.isdigit() for p in parts[:3]):
        return None
    return int(parts[0]), int(parts[1]), int(parts[2])


# --- snapshots and their deltas -----------------------------------------------------------


@dataclass(frozen=True)
class Snapshot:
    monotonic_ns: int
    interrupts: dict[str, IrqLine]
    stat: dict[str, int]
    psi: dict[str, dict[str, int]]
    clock_ticks: int = 100


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def snapshot(proc: Path = PROC) -> Snapshot:
    """Read /proc/interrupts, /proc/stat and /proc/pressure/* now (about 1 ms)."""
    psi = {}
    for res in PSI_RESOURCES:
        text = _read(proc / "pressure" / res)
        if text is not None:
            psi[res] = parse_psi(text)
    return Snapshot(
        monotonic_ns=time.monotonic_ns(),
        interrupts=parse_interrupts(_read(proc / "interrupts") or ""),
        stat=parse_stat(_read(proc / "stat") or ""),
        psi=psi,
        clock_ticks=os.sysconf("SC_CLK_TCK"),
    )


def delta(a: Snapshot, b: Snapshot) -> dict[str, Any]:
    """What happened between two snapshots, as JSON-able data (seconds where time).

    An interrupt line whose counts went down (re-registered) or that appeared in between is
    left out rather than reported wrong.
    """
    irqs: dict[str, dict[str, Any]] = {}
    for name, after in b.interrupts.items():
        before = a.interrupts.get(name)
        if before is None or len(before.per_cpu) != len(after.per_cpu):
            continue
        per_cpu = [y - x for x, y in zip(before.per_cpu, after.per_cpu, strict=True)]
        if min(per_cpu) < 0:
            continue
        irqs[name] = {"desc": after.desc, "per_cpu": per_cpu, "total": sum(per_cpu)}
    stat: dict[str, float] = {}
    for key, value in b.stat.items():
        if key in a.stat:
            diff = value - a.stat[key]
            stat[key] = diff / b.clock_ticks if key.startswith("cpu_") else diff
    psi: dict[str, dict[str, float]] = {}
    for res, totals in b.psi.items():
        before_psi = a.psi.get(res, {})
        psi[res] = {kind: (us - before_psi[kind]) / 1e6 for kind, us in totals.items()
                    if kind in before_psi}
    return {"window_s": (b.monotonic_ns - a.monotonic_ns) / 1e9, "interrupts": irqs,
            "stat": stat, "psi": psi}


class Window:
    """`start()` / `stop() -> dict`: the system counters over one window (a bench trial's
    probe). Cheap: two snapshots of five small files."""

    def __init__(self, proc: Path = PROC) -> None:
        self.proc = proc
        self._start: Snapshot | None = None

    def start(self) -> None:
        self._start = snapshot(self.proc)

    def stop(self) -> dict[str, Any]:
        if self._start is None:
            raise RuntimeError("Window.stop() before start()")
        return delta(self._start, snapshot(self.proc))


def summary(counters: dict[str, Any]) -> dict[str, float]:
    """The headline figures of a `delta`: PSI io/cpu/memory some/full (s), context switches,
    interrupts, and the named IPIs, flat, for a bench trial's row."""
    out: dict[str, float] = {}
    for res, kinds in counters.get("psi", {}).items():
        for kind, secs in kinds.items():
            out[f"psi_{res}_{kind}_s"] = secs
    stat = counters.get("stat", {})
    for key in ("ctxt", "intr"):
        if key in stat:
            out[key] = stat[key]
    for name, line in counters.get("interrupts", {}).items():
        if name in IPI_NAMES:
            out[f"irq_{name}"] = line["total"]
    return out


# --- per-thread run-queue wait ------------------------------------------------------------


def schedstat_available(proc: Path = PROC) -> bool:
    return (proc / "self" / "schedstat").exists()


@dataclass
class ThreadSched:
    """The last schedstat seen for one thread (cumulative since the thread started)."""

    tid: int
    pid: int
    comm: str
    run_s: float
    wait_s: float
    slices: int
    samples: int = 1


def parent_map(proc: Path = PROC) -> dict[int, int]:
    """pid -> ppid for every process now (one pass over /proc/*/stat)."""
    out: dict[int, int] = {}
    for entry in os.scandir(proc):
        if not entry.name.isdigit():
            continue
        text = _read(Path(entry.path) / "stat")
        if text is None:
            continue
        try:
            out[int(entry.name)] = int(text.rsplit(")", 1)[1].split()[1])
        except (IndexError, ValueError):
            continue
    return out


def descendants(parents: dict[int, int], root: int) -> dict[int, int]:
    """{pid: depth} of every process below root (depth 1 = its children). Pure."""
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    out: dict[int, int] = {}
    stack = [(root, 0)]
    while stack:
        pid, depth = stack.pop()
        for child in children.get(pid, ()):
            if child not in out:
                out[child] = depth + 1
                stack.append((child, depth + 1))
    return out


@dataclass
class ThreadSampler:
    """Samples /proc/PID/task/TID/schedstat of every thread below `root` deeper than
    `skip_depth` (the tracer and its launcher sit above), every `interval` seconds.

    /proc/PID/task/TID/children is not always built in, so each sample rescans /proc for
    the process tree (about 1 ms for a hundred processes). A thread's figures are the last
    sample before it ended: its final interval and threads shorter than one interval are
    not seen; `samples` says how often each was. Runs in a thread of ours that is never
    traced, with the job-control signals blocked so that they land on the main thread.

    Threads are keyed by the numbers of their innermost PID namespace (read once per
    thread): the run's own namespace, where the tracer and the launcher saw them.
    """

    root: int
    skip_depth: int
    interval: float = 0.05
    proc: Path = PROC
    seen: dict[int, ThreadSched] = field(default_factory=dict)
    sweeps: int = 0

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._inner: dict[int, tuple[int, int]] = {}  # our TID -> the namespace's (TID, PID)

    def start(self) -> None:
        if not schedstat_available(self.proc):
            return
        held = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGCHLD}
        old = signal.pthread_sigmask(signal.SIG_BLOCK, held)
        try:  # the new thread inherits our mask: process signals never land on it
            self._thread = threading.Thread(target=self._loop, name="schedstat", daemon=True)
            self._thread.start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)

    def stop(self) -> dict[int, ThreadSched]:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        return self.seen

    def _loop(self) -> None:
        while True:
            self.sample()
            if self._stop.wait(self.interval):
                return

    def sample(self) -> None:
        self.sweeps += 1
        tree = descendants(parent_map(self.proc), self.root)
        for pid, depth in tree.items():
            if depth > self.skip_depth:
                self._sample_process(pid)

    def _sample_process(self, pid: int) -> None:
        try:
            tids = [int(t) for t in os.listdir(self.proc / str(pid) / "task")]
        except (OSError, ValueError):
            return
        for tid in tids:
            base = self.proc / str(pid) / "task" / str(tid)
            values = parse_schedstat(_read(base / "schedstat") or "")
            if values is None:
                continue
            if tid not in self._inner:
                self._inner[tid] = parse_inner_ids(_read(base / "status") or "") or (tid, pid)
            inner_tid, inner_pid = self._inner[tid]
            known = self.seen.get(inner_tid)
            comm = known.comm if known else (_read(base / "comm") or "?").strip()
            self.seen[inner_tid] = ThreadSched(inner_tid, inner_pid, comm, values[0] / 1e9,
                                               values[1] / 1e9, values[2],
                                               (known.samples + 1) if known else 1)
