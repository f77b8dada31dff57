"""The trace file: a versioned JSON model of one command's runs, and its flat metrics.

Pure apart from `load`/`save` reading and writing the file. Everything read is validated:
a file that is not a trace, is damaged, or comes from a newer backburner is a `DataError`
(65) naming what is wrong, never a KeyError later. The format is documented in
docs/reference/trace-file.md; `VERSION` changes whenever a reader of the previous version
would misread a file (added optional fields do not change it).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..base.errors import DataError
from ..files import infile, outfile
from .parsers import SyscallStats

FORMAT = "backburner-trace"
VERSION = 1

#: The wait4 fields every run keeps (spawn.Outcome), numbers unless None is allowed.
OUTCOME_NUMBERS = ("wall_s", "user_s", "sys_s", "max_rss_kb", "in_blocks", "out_blocks",
                   "minflt", "majflt", "nvcsw", "nivcsw")


@dataclass
class Thread:
    tid: int
    pid: int
    comm: str
    syscalls: dict[str, SyscallStats] = field(default_factory=dict)
    #: last schedstat sample: run_s, wait_s, slices, samples; None when never sampled
    sched: dict[str, float] | None = None


@dataclass
class Run:
    index: int
    traced: bool
    outcome: dict[str, Any]
    counters: dict[str, Any]
    threads: list[Thread] = field(default_factory=list)
    sched_sweeps: int = 0
    #: events the tracer said it lost (perf's ring buffer overran): syscall counts are short
    lost_events: int = 0

    @property
    def shell_status(self) -> int:
        code, sig = self.outcome.get("exit_code"), self.outcome.get("signal")
        return int(code) if code is not None else 128 + int(sig or 0)


@dataclass
class Profile:
    label: str
    command: list[str]
    engine: dict[str, str]
    created_at: float
    host: dict[str, Any]
    sample_interval_s: float
    runs: list[Run] = field(default_factory=list)
    #: untraced runs of the same command, only to measure the tracer's overhead
    calibration: list[Run] = field(default_factory=list)
    tool: str = ""

    def lost_runs(self) -> list[int]:
        """1-based numbers of the runs whose tracer lost events."""
        return [i + 1 for i, r in enumerate(self.runs) if r.lost_events]

    def overhead(self) -> float | None:
        """Median traced wall time / median untraced wall time, when both were measured."""
        traced = [r.outcome["wall_s"] for r in self.runs]
        plain = [r.outcome["wall_s"] for r in self.calibration]
        if not traced or not plain or median(plain) <= 0:
            return None
        return median(traced) / median(plain)


def median(values: Iterable[float]) -> float:
    xs = sorted(values)
    if not xs:
        return math.nan
    mid = len(xs) // 2
    return xs[mid] if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2


# --- to and from JSON ---------------------------------------------------------------------


def _syscall_dict(s: SyscallStats) -> dict[str, Any]:
    return {"calls": s.calls, "errors": s.errors, "time_s": round(s.time_s, 9),
            "errnos": dict(sorted(s.errnos.items()))}


def _run_dict(r: Run) -> dict[str, Any]:
    return {"index": r.index, "traced": r.traced, "outcome": r.outcome, "counters": r.counters,
            "sched_sweeps": r.sched_sweeps, "lost_events": r.lost_events,
            "threads": [{"tid": t.tid, "pid": t.pid, "comm": t.comm, "sched": t.sched,
                         "syscalls": {k: _syscall_dict(v) for k, v in sorted(t.syscalls.items())}}
                        for t in r.threads]}


def to_dict(p: Profile) -> dict[str, Any]:
    return {"format": FORMAT, "version": VERSION, "tool": p.tool, "label": p.label,
            "command": p.command, "engine": p.engine, "created_at": p.created_at,
            "host": p.host, "sample_interval_s": p.sample_interval_s,
            "runs": [_run_dict(r) for r in p.runs],
            "calibration": [_run_dict(r) for r in p.calibration]}


class _Check:
    """Type checks that name the place in the file that is wrong."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, where: str, what: str) -> DataError:
        return DataError(f"{self.source}: {where}: {what}",
                         "the file is damaged or was not written by backburner trace")

    def get(self, d: Any, key: str, kind: type | tuple[type, ...], where: str,
            optional: bool = False) -> Any:
        if not isinstance(d, dict):
            raise self.fail(where, "not an object")
        if key not in d or d[key] is None:
            if optional:
                return None
            raise self.fail(where, f"{key} is missing")
        value = d[key]
        number = kind in (int, float) or kind == (int, float)
        if number and (isinstance(value, bool) or not isinstance(value, int | float)
                       or not math.isfinite(value)):
            raise self.fail(where, f"{key} is not a finite number")
        if not number and not isinstance(value, kind):
            raise self.fail(where, f"{key} has the wrong type")
        return value


def _syscalls(c: _Check, d: Any, where: str) -> dict[str, SyscallStats]:
    if not isinstance(d, dict):
        raise c.fail(where, "syscalls is not an object")
    out = {}
    for name, s in d.items():
        w = f"{where} syscall {name}"
        errnos = c.get(s, "errnos", dict, w)
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in errnos.values()):
            raise c.fail(w, "errno counts are not whole numbers")
        out[str(name)] = SyscallStats(int(c.get(s, "calls", int, w)),
                                      int(c.get(s, "errors", int, w)),
                                      float(c.get(s, "time_s", (int, float), w)),
                                      {str(k): v for k, v in errnos.items()})
    return out


def _run(c: _Check, d: Any, where: str) -> Run:
    outcome = c.get(d, "outcome", dict, where)
    for key in OUTCOME_NUMBERS:
        c.get(outcome, key, (int, float), f"{where} outcome")
    for key in ("exit_code", "signal"):
        c.get(outcome, key, int, f"{where} outcome", optional=True)
    if outcome.get("exit_code") is None and outcome.get("signal") is None:
        raise c.fail(f"{where} outcome", "neither an exit code nor a signal")
    counters = c.get(d, "counters", dict, where)
    threads = []
    for i, t in enumerate(c.get(d, "threads", list, where)):
        w = f"{where} thread {i}"
        sched = c.get(t, "sched", dict, w, optional=True)
        if sched is not None:
            sched = {k: float(c.get(sched, k, (int, float), f"{w} sched"))
                     for k in ("run_s", "wait_s", "slices")} | {
                "samples": float(sched.get("samples", 0) or 0)}
        threads.append(Thread(int(c.get(t, "tid", int, w)), int(c.get(t, "pid", int, w)),
                              str(c.get(t, "comm", str, w)),
                              _syscalls(c, c.get(t, "syscalls", dict, w), w), sched))
    lost = c.get(d, "lost_events", int, where, optional=True) or 0
    return Run(int(c.get(d, "index", int, where)), bool(c.get(d, "traced", bool, where)),
               outcome, counters, threads, int(d.get("sched_sweeps", 0) or 0), int(lost))


def from_dict(d: Any, source: str = "trace") -> Profile:
    c = _Check(source)
    if not isinstance(d, dict) or d.get("format") != FORMAT:
        raise DataError(f"{source} is not a backburner trace",
                        "record one with `backburner trace record -o FILE -- CMD`")
    version = d.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise c.fail("header", "version is not a positive whole number")
    if version > VERSION:
        raise DataError(f"{source} was written by a newer backburner (trace format "
                        f"{version}; this one reads up to {VERSION})", "upgrade backburner")
    runs = [_run(c, r, f"run {i}") for i, r in enumerate(c.get(d, "runs", list, "header"))]
    if not runs:
        raise c.fail("header", "no runs")
    calibration = [_run(c, r, f"calibration run {i}")
                   for i, r in enumerate(c.get(d, "calibration", list, "header"))]
    command = c.get(d, "command", list, "header")
    engine = c.get(d, "engine", dict, "header")
    c.get(engine, "name", str, "engine")
    return Profile(label=str(c.get(d, "label", str, "header")),
                   command=[str(x) for x in command],
                   engine={str(k): str(v) for k, v in engine.items()},
                   created_at=float(c.get(d, "created_at", (int, float), "header")),
                   host=c.get(d, "host", dict, "header"),
                   sample_interval_s=float(c.get(d, "sample_interval_s", (int, float),
                                                 "header")),
                   runs=runs, calibration=calibration, tool=str(d.get("tool", "")))


def save(p: Profile, path: str) -> None:
    """Written whole or not at all, 0600 (a trace names the commands a user ran and the
    files they failed to find), and never over a device or a FIFO (`outfile`)."""
    with outfile.replaced(path, perms=outfile.PRIVATE) as f:
        json.dump(to_dict(p), f, indent=1)
        f.write("\n")


MAX_TRACE_BYTES = 512 << 20  # far beyond any real trace: a bigger file is not one


def load(path: str) -> Profile:
    text = infile.read_text(path, "trace file", MAX_TRACE_BYTES)
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        raise DataError(f"{path} is not a backburner trace (not JSON)") from None
    return from_dict(data, path)


# --- views --------------------------------------------------------------------------------


def merge_syscalls(threads: Iterable[Thread]) -> dict[str, SyscallStats]:
    out: dict[str, SyscallStats] = {}
    for t in threads:
        for name, s in t.syscalls.items():
            out.setdefault(name, SyscallStats()).add(s)
    return out


@dataclass
class ProcessView:
    pid: int
    comm: str
    threads: list[Thread]
    syscalls: dict[str, SyscallStats]
    wait_s: float | None


def processes(run: Run) -> list[ProcessView]:
    """Threads grouped by process, in order of first appearance (the job first)."""
    groups: dict[int, list[Thread]] = {}
    for t in run.threads:
        groups.setdefault(t.pid, []).append(t)
    out = []
    for pid, threads in groups.items():
        leader = next((t for t in threads if t.tid == pid), threads[0])
        waits = [t.sched["wait_s"] for t in threads if t.sched]
        out.append(ProcessView(pid, leader.comm, threads, merge_syscalls(threads),
                               sum(waits) if waits else None))
    return out


@dataclass(frozen=True)
class Metric:
    label: str
    unit: str  # count | s | KiB
    group: str  # syscalls | job | system | sched


_RUSAGE = {
    "wall_s": ("wall time", "s"), "user_s": ("user CPU time", "s"),
    "sys_s": ("system CPU time", "s"), "nvcsw": ("voluntary context switches", "count"),
    "nivcsw": ("involuntary context switches", "count"),
    "minflt": ("minor page faults", "count"), "majflt": ("major page faults", "count"),
    "in_blocks": ("blocks read (512 B)", "count"),
    "out_blocks": ("blocks written (512 B)", "count"), "max_rss_kb": ("peak RSS", "KiB"),
}
_STAT = {"ctxt": "context switches, system-wide", "intr": "interrupts, system-wide",
         "softirq": "softirqs, system-wide", "processes": "forks, system-wide"}
IPI_LABELS = {"CAL": "function call IPIs (CAL)", "RES": "rescheduling IPIs (RES)",
              "TLB": "TLB shootdown IPIs (TLB)", "IWI": "IRQ work IPIs (IWI)",
              "LOC": "local timer interrupts (LOC)"}


def _irq_label(name: str, desc: str) -> str:
    if name in IPI_LABELS:
        return IPI_LABELS[name]
    return f"interrupts {name}" + (f" ({desc})" if desc else "")


def metrics(run: Run) -> dict[str, tuple[float, Metric]]:
    """Every figure of one run, flat: key -> (value, what it is). Syscalls merged over all
    threads of the job; interrupts summed over CPUs; PSI and /proc/stat system-wide."""
    out: dict[str, tuple[float, Metric]] = {}
    for key, (label, unit) in _RUSAGE.items():
        if isinstance(run.outcome.get(key), int | float):
            out[f"rusage:{key}"] = (float(run.outcome[key]), Metric(label, unit, "job"))
    if out.get("rusage:max_rss_kb", (0,))[0] <= run.outcome.get("launcher_rss_kb", 0):
        # Linux keeps the launcher's RSS at fork as the floor of ru_maxrss: not the job's
        out.pop("rusage:max_rss_kb", None)
    merged = merge_syscalls(run.threads)
    if run.traced:
        total = SyscallStats()
        for name, s in merged.items():
            total.add(s)
            out[f"syscall:{name}:calls"] = (s.calls, Metric(f"{name} calls", "count", "syscalls"))
            out[f"syscall:{name}:errors"] = (s.errors,
                                             Metric(f"{name} errors", "count", "syscalls"))
            out[f"syscall:{name}:time_s"] = (s.time_s, Metric(f"{name} time", "s", "syscalls"))
            for errno, n in s.errnos.items():
                out[f"syscall:{name}:errno:{errno}"] = (
                    n, Metric(f"{name} \u2192 {errno}", "count", "syscalls"))
        out["syscalls:calls"] = (total.calls, Metric("syscalls, all", "count", "syscalls"))
        out["syscalls:errors"] = (total.errors, Metric("failed syscalls", "count", "syscalls"))
        out["syscalls:time_s"] = (total.time_s, Metric("time in syscalls", "s", "syscalls"))
        out["tasks:threads"] = (len(run.threads), Metric("threads", "count", "job"))
        out["tasks:processes"] = (len({t.pid for t in run.threads}),
                                  Metric("processes", "count", "job"))
    sched = [t.sched for t in run.threads if t.sched]
    if sched:
        out["sched:wait_s"] = (sum(s["wait_s"] for s in sched),
                               Metric("run-queue wait (schedstat)", "s", "sched"))
        out["sched:slices"] = (sum(s["slices"] for s in sched),
                               Metric("timeslices (schedstat)", "count", "sched"))
    _system_metrics(run.counters, out)
    return out


def _system_metrics(counters: dict[str, Any], out: dict[str, tuple[float, Metric]]) -> None:
    for name, line in (counters.get("interrupts") or {}).items():
        if isinstance(line, dict) and isinstance(line.get("total"), int | float):
            out[f"irq:{name}"] = (float(line["total"]),
                                  Metric(_irq_label(name, str(line.get("desc", ""))),
                                         "count", "system"))
    for key, value in (counters.get("stat") or {}).items():
        if not isinstance(value, int | float):
            continue
        if key.startswith("cpu_"):
            out[f"stat:{key}"] = (float(value), Metric(f"CPU {key[4:]} time, system-wide", "s",
                                                       "system"))
        elif key in _STAT:
            out[f"stat:{key}"] = (float(value), Metric(_STAT[key], "count", "system"))
    for res, kinds in (counters.get("psi") or {}).items():
        for kind, secs in (kinds or {}).items():
            if isinstance(secs, int | float):
                out[f"psi:{res}:{kind}"] = (float(secs), Metric(
                    f"{res} pressure, {kind} stalled", "s", "system"))


def zero_when_absent(key: str) -> bool:
    """A syscall a run never made counts 0 for it; any other absent figure is unknown."""
    return key.startswith("syscall:")

