"""The tracers: one class per engine, each turning a command into a traced command and its
output into per-thread syscall counts.

Every engine runs the same launcher (`trace.shim`) under it, which starts the job, mirrors
its end and reports the job's own wait status and rusage; the tracer's own exit status and
CPU use never stand in for the job's. The launcher's syscalls are traced too and dropped.

Which engine is cheapest is measured by benchmarks/trace_overhead.py; perf was far cheaper where
this was written (in-kernel tracepoints written to a buffer instead of two ptrace stops per
syscall), so `auto` prefers it and falls back to strace, which needs no root.
"""

from __future__ import annotations

import logging
import os
import shutil
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from .. import spawn, system
from ..base.errors import UnavailableError, UsageError
from ..kernel import procfs
from . import parsers

log = logging.getLogger(__name__)
RING_PAGES = 2048  # perf's ring buffer per CPU, in pages (a power of two)


@dataclass
class Collected:
    """What an engine read back from one run: per-thread syscalls of the job (the launcher
    left out), and how many events the tracer said it lost (its counts are short then)."""

    threads: dict[int, parsers.TracedThread] = field(default_factory=dict)
    lost_events: int = 0


class Engine(ABC):
    """A tracer. `depth` is how many processes sit between us and the launcher: `unshare`
    (see `contained`) and the tracer."""

    name: ClassVar[str]
    tool: ClassVar[str]
    package: ClassVar[str]
    depth: ClassVar[int] = 2
    note: ClassVar[str]

    def missing(self) -> str | None:
        """Why this engine cannot run here, or None when it can."""
        if shutil.which(self.tool) is None:
            return f"{self.tool} is not installed (Debian package {self.package})"
        return None

    def version(self) -> str:
        try:
            out = spawn.run_tool([self.tool, "--version"], timeout=20)
        except FileNotFoundError:
            return "?"
        lines = (out.stdout or out.stderr).strip().splitlines()
        return lines[0] if lines else "?"

    def before_exec(self) -> Callable[[], None] | None:
        """What the tracer's process needs set up in it before exec (a pre-exec hook), if
        anything: most need nothing."""
        return None

    @abstractmethod
    def command(self, inner: list[str], workdir: Path) -> list[str]: ...

    @abstractmethod
    def collect(self, workdir: Path, shim_pid: int, job_pid: int) -> Collected:
        """Per-thread syscall counts of the job (the launcher's own threads left out)."""


class NoEngine(Engine):
    name = "none"
    tool = ""
    package = ""
    depth = 1
    note = "no tracer: the kernel's counters only (exact: nothing slows the job down)"

    def missing(self) -> str | None:
        return None

    def version(self) -> str:
        return "-"

    def command(self, inner: list[str], workdir: Path) -> list[str]:
        return inner

    def collect(self, workdir: Path, shim_pid: int, job_pid: int) -> Collected:
        return Collected()


class StraceEngine(Engine):
    name = "strace"
    tool = "strace"
    package = "strace"
    note = ("strace -f -ff -T (ptrace: two stops per syscall). Syscall times are the wall "
            "time strace saw between entry and exit, stops included; the job's CPU time and "
            "context switches include the stops too")

    def command(self, inner: list[str], workdir: Path) -> list[str]:
        # -I 2: a SIGTERM/SIGINT we forward ends strace *and* its child (the launcher, which
        # passes it on to the job); the default with -o FILE (3) would ignore it.
        return ["strace", "-f", "-ff", "-qq", "-T", "-I", "2", "-e", "signal=none",
                "-o", str(workdir / "strace"), "--", *inner]

    def collect(self, workdir: Path, shim_pid: int, job_pid: int) -> Collected:
        threads: dict[int, parsers.TracedThread] = {}
        for path in workdir.glob("strace.*"):
            tid = int(path.suffix[1:]) if path.suffix[1:].isdigit() else None
            if tid is None:
                continue
            with open(path, errors="replace") as f:
                threads[tid] = parsers.parse_strace(tid, f, after_exec=tid == job_pid)
        parsers.assign_processes(threads, [shim_pid, job_pid])
        _drop_process(threads, shim_pid)
        return Collected(threads)  # ptrace stops the job: nothing is ever lost


#: The run's own PID namespace: `unshare` dies with us (the parent-death signal), its child
#: (the tracer, or the launcher) is the first process of the namespace and is SIGKILLed when
#: unshare dies, and when the first process of a PID namespace dies the kernel kills every
#: other process in it. Killed at any moment, we leave none of the run behind: a tracer
#: alone, killed, leaves its tracees running (strace detaches them; perf's workload never
#: knew it). perf refuses a PID namespace that reads another's /proc, hence a mount
#: namespace with its own /proc (mounts made outside later still reach it: slave).
NAMESPACE = ["--pid", "--fork", "--kill-child=SIGKILL", "--mount-proc", "--propagation",
             "slave"]


def contained(argv: list[str]) -> list[str]:
    """argv as the first process of a PID namespace of its own. Without root, inside a user
    namespace mapping our user to itself (a PID namespace needs CAP_SYS_ADMIN there)."""
    if shutil.which("unshare") is None:
        raise UnavailableError("unshare is not installed", "apt-get install util-linux")
    user = [] if system.is_root() else ["--user", "--map-current-user"]
    return ["unshare", *user, *NAMESPACE, *argv]


class PerfEngine(Engine):
    name = "perf"
    tool = "perf"
    package = "linux-perf"
    note = ("perf trace record (raw_syscalls tracepoints into a ring buffer, no stops). "
            "Syscall times are in-kernel durations; the few syscalls between the launcher's "
            "fork and the job's exec are counted in the job's first thread")

    def missing(self) -> str | None:
        absent = super().missing()
        if absent:
            return absent
        if os.geteuid() != 0:
            return "perf trace needs root here (tracepoints; perf_event_paranoid)"
        if not procfs.in_initial_user_namespace():
            return ("perf trace needs the machine's root, not a user namespace's (its "
                    "tracefs cannot be mounted there)")
        if not os.path.isdir(system.PERF_TRACEFS):  # where perf_namespace mounts it
            return f"this kernel has no tracefs ({system.PERF_TRACEFS} is missing)"
        return None

    def before_exec(self) -> Callable[[], None] | None:
        return system.perf_namespace  # its own tracefs, which no other run can unmount

    def command(self, inner: list[str], workdir: Path) -> list[str]:
        # 8 MiB of ring buffer per CPU (default 512 KiB): a syscall storm on a busy machine
        # overran the default and lost events; lost events are counted and reported anyway.
        return ["perf", "trace", "record", "-q", "-m", str(RING_PAGES), "-o",
                str(workdir / "perf.data"), "--", *inner]

    def collect(self, workdir: Path, shim_pid: int, job_pid: int) -> Collected:
        data = str(workdir / "perf.data")
        summary = workdir / "summary.txt"
        _perf(["perf", "trace", "-i", data, "-s", "--errno-summary", "-o", str(summary)],
              "summarising the trace")
        threads = parsers.parse_perf_summary(summary.read_text(errors="replace"))
        # --tid 1 keeps the sample lines out (PID 1 is never in our tree); task and lost
        # records stay.
        tasks = _perf(["perf", "script", "-i", data, "--show-task-events",
                       "--show-lost-events", "--tid", "1"], "reading the trace's task events")
        parsers.apply_perf_tasks(threads, parsers.parse_perf_tasks(tasks))
        _drop_process(threads, shim_pid)
        return Collected(threads, parsers.perf_lost_events(tasks))


def _perf(argv: list[str], what: str) -> str:
    result = spawn.run_tool(argv, timeout=600, before_exec=system.perf_namespace)
    if result.status != 0:
        lines = (result.stderr or result.stdout).strip().splitlines()
        raise UnavailableError(f"perf failed {what}: {lines[-1] if lines else 'no output'}")
    return result.stdout


def _drop_process(threads: dict[int, parsers.TracedThread], pid: int) -> None:
    for tid in [t.tid for t in threads.values() if t.pid == pid]:
        del threads[tid]


ENGINES: dict[str, type[Engine]] = {"perf": PerfEngine, "strace": StraceEngine,
                                    "none": NoEngine}
#: The order `auto` tries, cheapest first (see benchmarks/trace_overhead.py).
PREFERENCE = ("perf", "strace")


def choose(name: str = "auto") -> Engine:
    """The engine asked for, or the cheapest available one. UnavailableError (69) names the
    package to install when none (or not the one asked for) can run."""
    if name == "auto":
        reasons = []
        for candidate in PREFERENCE:
            engine = ENGINES[candidate]()
            why = engine.missing()
            if why is None:
                return engine
            reasons.append(why)
        raise UnavailableError("no tracer can run here: " + "; ".join(reasons),
                               "install strace (apt-get install strace), or use --engine none")
    if name not in ENGINES:
        raise UsageError(f"unknown engine {name!r}", "choose auto, " + ", ".join(ENGINES))
    engine = ENGINES[name]()
    why = engine.missing()
    if why:
        absent = bool(engine.package) and shutil.which(engine.tool) is None
        raise UnavailableError(f"engine {name}: {why}",
                               f"install {engine.package}" if absent else None)
    return engine


def default_name() -> str:
    """What `auto` would choose here: the first engine of PREFERENCE that can run."""
    return next((n for n in PREFERENCE if ENGINES[n]().missing() is None), "none")


def status() -> list[tuple[str, str | None]]:
    """(engine, why it cannot run or None) for each engine, in preference order."""
    return [(name, ENGINES[name]().missing()) for name in (*PREFERENCE, "none")]
