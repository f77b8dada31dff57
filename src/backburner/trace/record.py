"""Recording: run a command under an engine, N times, and keep everything in a Profile.

One run: the system counters and the job's wait4 come from the launcher (`trace.shim`), the
syscalls from the engine's output, the run-queue wait of each thread from a sampler thread
of ours (never traced). `compare` interleaves two commands (ABBA ABBA ...), so that a drift
of the machine over time (another job starting, the disk cache filling) falls on both.

Each run is the first process of a PID namespace of its own (`engines.contained`) that
dies with us, and its scratch directory is journaled: killed at any moment, we leave no
process and nothing `restore` does not undo. A ^C or SIGTERM sent to us ends the whole
recording: the job is asked to stop (SIGTERM through the launcher), everything is undone,
nothing is written, and the interrupt goes on up (130, 143).
"""

from __future__ import annotations

import json
import logging
import os
import platform
import shutil
import signal
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from .. import __version__, spawn
from ..base import errors, interrupts
from ..base.errors import BackburnerError, UnavailableError
from ..kernel import procfs
from . import counters, engines, scratch
from .parsers import TracedThread
from .profile import Profile, Run, Thread

log = logging.getLogger(__name__)
Report = Callable[[str], None]
#: How long a job asked to stop (^C, SIGTERM to us) has before its namespace is killed.
STOP_GRACE_S = 5.0
#: How long `unshare` may take to fork the namespace's first process.
FORK_WAIT_S = 2.0


def _quiet(_msg: str) -> None:
    pass


@dataclass(frozen=True)
class Options:
    runs: int = 1
    engine: str = "auto"
    overhead: bool = False  # also run untraced, to measure traced / untraced wall time
    sample_interval: float = 0.05


def host_facts() -> dict[str, Any]:
    return {"kernel": platform.release(), "machine": platform.machine(),
            "cpus": os.cpu_count(), "schedstat": counters.schedstat_available()}


def new_profile(argv: Sequence[str], engine: engines.Engine, opts: Options) -> Profile:
    return Profile(label=" ".join(argv), command=list(argv),
                   engine={"name": engine.name, "version": engine.version(),
                           "note": engine.note},
                   created_at=time.time(), host=host_facts(),
                   sample_interval_s=opts.sample_interval, tool=f"backburner {__version__}")


def _raise_from(error: dict[str, Any]) -> None:
    """Re-raise the launcher's error as the same type (CommandNotFound keeps 127)."""
    cls = getattr(errors, str(error.get("type")), None)
    message, hint = str(error.get("message")), error.get("hint")
    if isinstance(cls, type) and issubclass(cls, BackburnerError):
        exc = cls.__new__(cls)
        BackburnerError.__init__(exc, message, hint)
        raise exc
    raise BackburnerError(message, hint)


_OUTCOME_FIELDS = {f.name for f in fields(spawn.Outcome)}


class Session:
    """An engine and a private work directory (a tmpfs, journaled), for many runs.
    Everything it set up is undone when the `with` block ends, however it ends."""

    def __init__(self, engine: engines.Engine, sample_interval: float = 0.05) -> None:
        self.engine = engine
        self.sample_interval = sample_interval
        self._stack = ExitStack()
        self.workdir = Path()
        self._count = 0

    def __enter__(self) -> Session:
        try:
            self.workdir = Path(scratch.private_dir(self._stack, "trace-"))
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def run(self, argv: Sequence[str], index: int, traced: bool = True
            ) -> tuple[Run, spawn.Outcome]:
        """One run of argv. Raises CommandNotFound/CommandNotExecutable like `run`."""
        engine = self.engine if traced else engines.NoEngine()
        self._count += 1
        rundir = self.workdir / f"run-{self._count}"
        rundir.mkdir()
        result = rundir / "result.json"
        sampler = counters.ThreadSampler(os.getpid(), skip_depth=engine.depth + 1,
                                         interval=self.sample_interval)
        sampler.start()
        try:
            tracer = _run_contained(engine, rundir, result, argv)
        finally:
            seen = sampler.stop()
        data = _read_result(result, tracer, engine)
        if "error" in data:
            _raise_from(data["error"])
        outcome = spawn.Outcome(**{k: v for k, v in data["outcome"].items()
                                   if k in _OUTCOME_FIELDS})
        got = engine.collect(rundir, int(data["shim_pid"]), outcome.pid)
        threads = _threads(got.threads, seen, include_unseen=engine.name == "none")
        shutil.rmtree(rundir, ignore_errors=True)  # perf.data can be large: free it now
        log.debug("run %d (%s): %d threads, %d schedstat sweeps", index, engine.name,
                  len(threads), sampler.sweeps)
        run = Run(index, engine.name != "none", data["outcome"], data["counters"], threads,
                  sampler.sweeps, got.lost_events)
        if got.lost_events:
            log.warning("%s lost %d events in run %d: its syscall counts are short",
                        engine.name, got.lost_events, index + 1)
        return run, outcome


def _run_contained(engine: engines.Engine, rundir: Path, result: Path,
                   argv: Sequence[str]) -> spawn.Outcome:
    """The traced command in its own PID namespace, waited for with our signal handlers in
    place: a ^C or SIGTERM stops the run's whole namespace, then goes on up."""
    alive_r, alive_w = os.pipe()  # the launcher starts the job only while we hold alive_w
    child: spawn.Child | None = None
    try:
        inner = spawn.python_module("backburner.trace.shim", "--alive", str(alive_r),
                                     str(result), "--", *argv)
        command = engines.contained(engine.command(inner, rundir))
        with interrupts.deferred():  # a signal during the start finds `child` set
            child = spawn.launch(command, pass_fds=(alive_r,), die_with_parent=True,
                                 death_signal=signal.SIGKILL,  # unshare holds SIGTERM back
                                 before_exec=engine.before_exec(),
                                 new_group=_interrupt_ignored())
        os.close(alive_r)
        alive_r = -1
        outcome = child.wait()
        assert outcome is not None
        return outcome
    except BaseException:
        os.close(alive_w)  # a launcher that has not started yet will not start the job
        alive_w = -1
        if child is not None:
            with interrupts.deferred():  # a second ^C must not cut the stop short
                _stop(child, engine.depth)
        raise
    finally:
        for fd in (alive_r, alive_w):
            if fd >= 0:
                os.close(fd)


def _interrupt_ignored() -> bool:
    """Whether we were started with SIGINT ignored (in the background by a shell): the
    command then keeps ignoring it, as it inherits, but the tracers install handlers of
    their own (perf and strace end on SIGINT and take the job down with them), so the run
    gets a process group of its own, which a SIGINT to ours does not reach."""
    return signal.getsignal(signal.SIGINT) == signal.SIG_IGN


def _stop(child: spawn.Child, launcher_depth: int) -> None:
    """End a run early: SIGTERM to the launcher (it passes it on to the job, whose own
    clean-up runs, then the tracer ends with its workload); after STOP_GRACE_S, SIGKILL to
    `unshare` (which ignores SIGTERM), whose `--kill-child` SIGKILLs the namespace's first
    process as it dies, which takes every process of the namespace with it; we wait until
    that first process is gone. Not SIGKILL to the first process itself: util-linux 2.38's
    unshare, seeing its child killed by SIGKILL, tries to re-raise it and prints
    "sigprocmask unblock failed" on the user's terminal."""
    first = _first_process(child)
    if first is not None:
        below = [first]
        for _ in range(launcher_depth - 1):
            below = [kid for pid in below for kid in procfs.children_of(pid)]
        for pid in below or [first]:
            start = procfs.start_time(pid)
            if start is not None:
                spawn.signal_process(pid, start, signal.SIGTERM)
        if child.wait(STOP_GRACE_S) is None:
            start = procfs.start_time(first)
            child.stop(grace=0)
            deadline = time.monotonic() + STOP_GRACE_S
            while start is not None and procfs.start_time(first) == start \
                    and time.monotonic() < deadline:
                time.sleep(0.01)
    if child.wait(STOP_GRACE_S) is None:  # no namespace was made: unshare alone
        child.stop(grace=0)
    log.debug("run stopped: %s", child.outcome.describe() if child.outcome else "?")


def _first_process(child: spawn.Child) -> int | None:
    """The namespace's first process (unshare's child), once unshare has forked it."""
    deadline = time.monotonic() + FORK_WAIT_S
    while child.poll() is None:
        kids = procfs.children_of(child.pid)
        if kids:
            return kids[0]
        if time.monotonic() > deadline:
            return None
        time.sleep(0.005)
    return None


def _read_result(path: Path, tracer: spawn.Outcome, engine: engines.Engine) -> dict[str, Any]:
    """The launcher's result. Once the namespace is gone so is the launcher: the file is
    complete (written whole, then renamed) or will never be."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        what = engine.name if engine.name != "none" else "the launcher"
        raise UnavailableError(f"{what} did not run the command ({tracer.describe()})",
                               "its own message, if any, is above") from None


def _threads(traced: dict[int, TracedThread], seen: dict[int, counters.ThreadSched],
             include_unseen: bool) -> list[Thread]:
    out = []
    for tid in sorted(traced):
        t = traced[tid]
        out.append(Thread(tid, t.pid if t.pid is not None else tid, t.comm or "?", t.syscalls))
    by_tid = {t.tid: t for t in out}
    for tid, s in sorted(seen.items()):
        sched = {"run_s": s.run_s, "wait_s": s.wait_s, "slices": float(s.slices),
                 "samples": float(s.samples)}
        if tid in by_tid:
            by_tid[tid].sched = sched
            if by_tid[tid].comm == "?":
                by_tid[tid].comm = s.comm
        elif include_unseen:
            out.append(Thread(tid, s.pid, s.comm, {}, sched))
    return out


def _progress(what: str, i: int, runs: int, traced: bool, outcome: spawn.Outcome) -> str:
    return (f"{what}run {i + 1}/{runs}{'' if traced else ' (untraced)'}: "
            f"{outcome.describe()} after {outcome.wall_s:.3f} s")


def record(argv: Sequence[str], opts: Options, report: Report = _quiet
           ) -> tuple[Profile, spawn.Outcome]:
    """Run argv `opts.runs` times under the engine; the Profile and the last run's Outcome
    (the one to mirror). With `opts.overhead`, an untraced run follows or precedes each."""
    engine = engines.choose(opts.engine)
    profile = new_profile(argv, engine, opts)
    calibrate = opts.overhead and engine.name != "none"
    last: spawn.Outcome | None = None
    with Session(engine, opts.sample_interval) as session:
        for i in range(opts.runs):
            order = [True, False] if calibrate else [True]
            if i % 2:
                order.reverse()
            for traced in order:
                run, outcome = session.run(argv, i, traced=traced and engine.name != "none")
                if traced:
                    profile.runs.append(run)
                    last = outcome
                else:
                    profile.calibration.append(run)
                report(_progress("", i, opts.runs, traced, outcome))
    assert last is not None
    return profile, last


def compare(argv_a: Sequence[str], argv_b: Sequence[str], opts: Options,
            report: Report = _quiet) -> tuple[Profile, Profile]:
    """Both commands, `opts.runs` times each, interleaved A B B A A B ..."""
    engine = engines.choose(opts.engine)
    profiles = {"A": new_profile(argv_a, engine, opts), "B": new_profile(argv_b, engine, opts)}
    argvs = {"A": argv_a, "B": argv_b}
    calibrate = opts.overhead and engine.name != "none"
    with Session(engine, opts.sample_interval) as session:
        for i in range(opts.runs):
            slots = [("A", True), ("B", True)]
            if calibrate:
                slots += [("A", False), ("B", False)]
            if i % 2:
                slots.reverse()
            for side, traced in slots:
                run, outcome = session.run(argvs[side], i,
                                           traced=traced and engine.name != "none")
                target = profiles[side].runs if traced else profiles[side].calibration
                target.append(run)
                report(_progress(f"{side} ", i, opts.runs, traced, outcome))
    return profiles["A"], profiles["B"]
