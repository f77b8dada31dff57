"""Runs the matrix of a `config.Plan`: for each slot, --prepare → scheduler → caches dropped →
load → probe → stored.

The rules are here; what touches the machine is an `executor.Executor` (the real ones,
`machine.MachineExecutor` for a disk and `netstudy.NetExecutor` for a network study's slow
link, keep all system changes of a run in one `system.Transaction`).
Every trial is committed to the store as it ends. `--resume` rebuilds the same slot order
from the stored seed and skips the (cell, round) pairs already stored. Without `--seed` the
seed is drawn at random and recorded with the run (and printed in its header line), so any
order can be repeated.

Cache state: in cold mode (the default) caches are dropped before every counted trial
(round > 0, stored with cold=1). The warm-up round (round 0) runs WITHOUT dropping caches
and is stored with cold=0: it is never counted, but its time is the cell's warm reference,
which the report's "not-cold" check compares the cold median with (a cold time equal to the
warm time means the drop did not reach the probe's files). Warm-up times are therefore not
used for the abort limits of cold trials. In warm mode (`--warm`) nothing is dropped and
every trial is stored with cold=0.

A --prepare command (hyperfine's) runs first in every slot, warm-up or counted, un-timed:
before the cache drop, so that what it reads is not left in the cache for a cold trial, and
before the load starts, so that it does not compete with it. If it fails, the trial is
stored as failed with its last lines of stderr, and the probe does not start.
"""

from __future__ import annotations

import logging
import os
import shlex
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from statistics import median
from typing import Any

from .. import __version__, system
from ..base.errors import DataError
from ..base.quantities import fmt_duration
from ..files import outfile, safepath
from ..store import Run, Store, backend_for, looks_like_url, machine_id, refuse_existing
from ..store.cell import Cell
from . import config, devices, room
from .config import Plan
from .environment import capture as capture_environment
from .executor import Executor, Measurement
from .machine import MachineExecutor
from .matrix import Slot
from .netplan import NetPlan
from .netstudy import NetExecutor
from .netstudy import preflight as net_preflight
from .stopping import Stopper

log = logging.getLogger(__name__)


def default_output() -> str:
    return time.strftime("results/bench-%Y%m%d-%H%M%S.db")


def prepare_output(path: str | None) -> str:
    """The result database to create (default: under results/): refused if it exists (before
    anything is waited for or set up), its folder made."""
    path = path or default_output()
    backend_for(path)  # an address that is not one of ours is refused, never made a file
    if looks_like_url(path):
        return path  # a shared database: the run is added to it
    refuse_existing(path)
    outfile.make_dirs(os.path.dirname(os.path.abspath(path)))
    return path


AnyPlan = Plan | NetPlan


def header(plan: AnyPlan, path: str, *, left: int | None = None) -> str:
    """The run's first line: its size, cache mode and seed (which reproduces the order)."""
    config = plan.config
    cells = len(plan.cells)
    total = cells * (config.rounds + config.warmup)
    most = "at most " if config.sequential else ""
    todo = f"{left} of {most}{total} trials left" if left is not None else f"{most}{total} trials"
    rounds = f"{config.warmup} warm-up round{'s' if config.warmup != 1 else ''}"
    trials = f"{config.trials} trials"
    if config.sequential:
        rule = config.stopping_rule()
        budget = f", at most {fmt_duration(config.max_time_s)}" if config.max_time_s else ""
        band = (f"±{config.tolerance * 100:g}%" if config.tolerance is not None
                else "the band a person notices")
        trials = f"{rule.min_runs}–{rule.max_runs} trials until decided ({band}{budget})"
    mode = (f"over {plan.device}" if isinstance(plan, NetPlan)
            else "cold" if config.cold else "warm")
    return (f"bench: {cells} cells × {trials} + {rounds} ({todo}), {mode}, seed "
            f"{config.seed} (--seed {config.seed} repeats the order) → {path}")


@dataclass
class Progress:
    """What the UI shows; the runner calls `update` after every slot. `total` shrinks as
    a run until decided skips the slots of decided cells, so the time left is estimated
    from the slots still to run at the pace of those run so far, and bounded by the time
    budget (`deadline`, on the monotonic clock) when there is one. `events`: lines for
    the user (a time budget that ended cells), appended once each."""

    total: int
    done: int = 0
    cell: str = ""
    last: str = ""
    events: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    done_at_start: int = 0  # slots done before this session (a resumed run)
    deadline: float | None = None

    def left_s(self, now: float | None = None) -> float | None:
        """Seconds left, estimated; None before the first slot of this session ends."""
        now = time.monotonic() if now is None else now
        ran = self.done - self.done_at_start
        if ran <= 0:
            return None
        pace = (now - self.started) / ran
        left = max(self.total - self.done, 0) * pace
        if self.deadline is not None:  # past it, each cell stops at its block's end
            left = min(left, max(self.deadline - now, 0.0) + pace)
        return left

    def left_text(self, now: float | None = None) -> str:
        left = self.left_s(now)
        if left is None:
            return "time left: estimating"
        return f"about {fmt_duration(round(left))} left" if left >= 1 else "almost done"


Reporter = Callable[[Progress], None]
Warn = Callable[[str], None]


class Bench:
    """The rules of a run, on whatever executes them: the seeded order and what is left of
    it, warm-ups, cache drops, each load's lifetime and settling, the abort limits, and
    every trial committed to the store as it ends."""

    def __init__(self, plan: AnyPlan, store: Store, run_id: int, executor: Executor,
                 reporter: Reporter) -> None:
        self.plan = plan
        self.cfg = plan.config
        self.store = store
        self.run_id = run_id
        self.executor = executor
        self.report = reporter
        self.unloaded: dict[Cell, list[float]] = defaultdict(list)  # by baseline cell
        self.timeouts: dict[str, int] = defaultdict(int)
        self.running: set[str] = set()  # loads started and not stopped yet
        self.stopper = (Stopper(plan.cells, self.cfg.stopping_rule(), self.cfg.max_time_s,
                                self.cfg.cold) if self.cfg.sequential else None)

    # --- one slot -----------------------------------------------------------------------

    def limit_for(self, cell: Cell) -> float:
        base = self.unloaded.get(cell.baseline())
        if cell.unloaded or not base:
            return self.cfg.timeout_s
        return min(self.cfg.timeout_s, max(1.0, self.cfg.abort_factor * median(base)))

    def _lives_for_block(self, cell: Cell) -> bool:
        return self.cfg.load_lifetime == "cell" and not self.plan.loads[cell.load].is_none

    def run_slot(self, slot: Slot) -> dict[str, Any]:
        cell = slot.cell
        cold = self.cfg.cold and not slot.warmup  # the warm-up is the warm reference
        self.executor.check_alive()
        block = self._lives_for_block(cell)
        ends = not block or slot.last_in_block  # a load started for this slot stops after it
        if self.timeouts[cell.key] >= self.cfg.abort_after:
            now = time.time()
            extra: dict[str, Any] = {
                "reason": f"{self.timeouts[cell.key]} earlier trials timed out"}
            if cell.load in self.running and ends:
                self._stop_load(cell.load, extra)
            return {"status": "aborted", "cold": int(cold), "started_at": now, "ended_at": now,
                    "extra": extra}
        extra = {}
        prepared = self.executor.prepare_trial(cell)  # before the cache drop: it may read
        if prepared is not None:
            extra["trial_prepare"] = prepared.as_dict()
            if prepared.status != "ok":
                return self._prepare_failed(cell, cold, ends, list(prepared.tail), extra)
        if not block or slot.first_in_block or not self.executor.load_alive(cell.load):
            self.executor.use_scheduler(cell.scheduler)
            if cold and not block:
                self.executor.drop_caches()
            self._start_load(cell, extra)
        if cold and block:
            self.executor.drop_caches()  # while the load runs, as on a machine that is updating
        started_at = time.time()
        try:
            measured = self.executor.measure(cell, self.limit_for(cell))
            extra.update(measured.extra)
            extra["limit_s"] = self.limit_for(cell)
        finally:
            if cell.load in self.running and ends:
                self._stop_load(cell.load, extra)
        return self._record(cell, cold, measured, started_at, extra)

    def _prepare_failed(self, cell: Cell, cold: bool, ends: bool, tail: list[str],
                        extra: dict[str, Any]) -> dict[str, Any]:
        """A --prepare that failed fails its trial, as the probe's own failure would; the
        probe does not start, and a load that would have stopped after it stops."""
        now = time.time()
        if cell.load in self.running and ends:
            self._stop_load(cell.load, extra)
        if tail:
            extra["stderr_tail"] = tail
        return {"status": "failed", "cold": int(cold), "started_at": now, "ended_at": now,
                "extra": {"reason": "the --prepare command failed", **extra}}

    def _start_load(self, cell: Cell, extra: dict[str, Any]) -> None:
        """Start the load and let it settle: --settle seconds, and with a load that lives
        for a block of trials at least BFQ's weight-raising time, so the probe meets a load
        that has lost any head start a newly started queue gets."""
        if self.plan.loads[cell.load].is_none:
            return
        self.executor.start_load(cell)
        self.running.add(cell.load)
        settle = self.cfg.settle_s
        if self._lives_for_block(cell):
            settle = max(settle, self.executor.weight_raising_s(cell.scheduler))
        extra["settle_s"] = settle
        self.executor.settle(cell.load, settle)

    def _stop_load(self, load: str, extra: dict[str, Any]) -> None:
        """Stop it and keep its bulk work; a load that failed by itself meanwhile (a package
        that would not install) fails the trial with its last lines, as a probe's would."""
        self.running.discard(load)
        bulk = self.executor.stop_load(load)
        failure = bulk.pop("failure", None)
        extra["bulk"] = bulk
        if failure:
            extra["load_failure"] = list(failure)

    def _record(self, cell: Cell, cold: bool, measured: Measurement, started_at: float,
                extra: dict[str, Any]) -> dict[str, Any]:
        result, moved, window = measured.result, measured.moved, measured.window_s
        out = result.outcome
        if result.status == "timeout":
            self.timeouts[cell.key] += 1
        elif cell.unloaded and result.status == "ok" and cold == self.cfg.cold:
            self.unloaded[cell.baseline()].append(result.wall_s)
        in_blocks = out.in_blocks if out else 0
        out_blocks = out.out_blocks if out else 0
        status = result.status
        if result.status != "ok" and measured.stderr_tail:
            extra["stderr_tail"] = measured.stderr_tail
        elif status == "ok" and "load_failure" in extra:  # timed against no load
            status = "failed"
            extra["reason"] = "the load failed while the probe ran"
            extra["stderr_tail"] = extra.pop("load_failure")
        return {
            "status": status,
            "cold": int(cold),
            "wall_s": result.wall_s,
            "user_s": out.user_s if out else None,
            "sys_s": out.sys_s if out else None,
            "max_rss_kb": out.max_rss_kb if out else None,
            "in_blocks": out.in_blocks if out else None,
            "out_blocks": out.out_blocks if out else None,
            "exit_code": out.exit_code if out else None,
            "signal": out.signal if out else None,
            # the device's traffic in the probe's window, the probe's own taken out
            "load_read_bps": max(0, moved[0] - 512 * in_blocks) / window,
            "load_write_bps": max(0, moved[1] - 512 * out_blocks) / window,
            "started_at": started_at,
            "ended_at": time.time(),
            "extra": {"launcher_rss_kb": out.launcher_rss_kb if out else None,
                      # the probe's own wait4 counters: waits and preemptions, page faults
                      **({"nvcsw": out.nvcsw, "nivcsw": out.nivcsw, "majflt": out.majflt}
                         if out else {}),
                      **extra, **result.detail},
        }

    # --- the whole matrix ---------------------------------------------------------------

    def run(self) -> None:
        slots = self.plan.slots()
        done = self.store.done_keys(self.run_id)
        self._reload_history()
        progress = Progress(total=len(slots), done=sum(
            1 for s in slots if (s.cell.key, s.round) in done))
        progress.done_at_start = progress.done
        with self.executor.open() as facts:
            self.store.update_environment(self.run_id, {"device": facts})
            log.debug("phase: trials")
            ids = {c.key: self.store.add_cell(self.run_id, c) for c in self.plan.cells}
            for slot in slots:
                if (slot.cell.key, slot.round) in done:
                    continue
                if self.stopper and self.stopper.skips(slot):
                    progress.total -= 1  # a decided cell's slot is not run
                    continue
                if self.stopper:
                    progress.deadline = self.stopper.deadline()
                progress.cell = slot.cell.label + (" (warm-up)" if slot.warmup else "")
                self.report(progress)
                trial = self.run_slot(slot)
                self.store.add_trial(self.run_id, ids[slot.cell.key], round=slot.round,
                                     warmup=int(slot.warmup), **trial)
                if self.stopper:
                    self.stopper.add(slot.cell, trial, slot.warmup, slot.round)
                progress.done += 1
                wall = trial.get("wall_s")
                progress.last = f"{trial['status']} {wall:.3f}s" if wall else trial["status"]
                self.report(progress)
        if self.stopper:  # why each cell stopped, for the report
            reasons = self.stopper.finish()
            ended = [c.label for c in self.plan.cells if reasons.get(c.key) == "max-time"]
            if ended and self.cfg.max_time_s:
                progress.events.append(
                    f"the time budget ({fmt_duration(self.cfg.max_time_s)} of trials, "
                    f"--max-time) ended {len(ended)} cell{'s' if len(ended) != 1 else ''} "
                    f"before {'they were' if len(ended) != 1 else 'it was'} decided: "
                    + "; ".join(ended))
            self.report(progress)  # the slots skipped after the last one that ran
            self.store.update_environment(self.run_id, {"stopping": reasons})
        self.store.finish_run(self.run_id)

    def _reload_history(self) -> None:
        """On resume, the abort limits and timeout counts continue from what is stored."""
        by_id = {c.id: c for c in self.store.cells(self.run_id)}
        for t in self.store.trials(include_warmup=True, run_ids=[self.run_id]):
            stored = by_id.get(t["cell_id"])
            if stored is None:
                continue
            if t["status"] == "timeout":
                self.timeouts[stored.key] += 1
            if (stored.cell.unloaded and t["status"] == "ok"
                    and bool(t["cold"]) == self.cfg.cold):
                self.unloaded[stored.cell.baseline()].append(t["wall_s"])
            if self.stopper:
                self.stopper.add(stored.cell, t, bool(t["warmup"]), int(t["round"]))


def preflight(plan: AnyPlan) -> None:
    """The last checks before anything is built: root, a trustworthy work directory, and
    room for the testbed image in it (a network study: what its link and policy need)."""
    if isinstance(plan, NetPlan):
        net_preflight(plan)
        return
    system.require_root("bench (switching IO schedulers, dropping caches, loop devices)")
    work = system.trusted_dir(system.work_root(), "work directory")
    room.check_space(plan.device, str(work))
    if plan.device.kind == "path":  # the loads' private directory is made in it
        safepath.check_chain(plan.device.path, "work directory", sticky_ok=True)


def machine_executor(plan: AnyPlan, warn: Warn, show_output: bool = False) -> Executor:
    """What runs a plan on this machine: a disk study's devices, or a network study's
    testbed."""
    if isinstance(plan, NetPlan):
        return NetExecutor(plan, warn)
    return MachineExecutor(plan, warn, show_output)


def start(plan: AnyPlan, output: str, reporter: Reporter, warn: Warn,
          command: str | None = None, environment: dict[str, Any] | None = None,
          show_output: bool = False, executor: Executor | None = None) -> tuple[Store, int]:
    """A new run into a new database (never overwrites), or into a shared one; run on this
    machine unless another `executor` is given."""
    preflight(plan)
    store = Store.create(output)  # first: an existing database is refused before any wait
    run_id = None
    try:
        busy = devices.busy_devices()
        if busy:
            warn(f"other heavy IO is running on {', '.join(busy)}: results will be noisy")
        if not isinstance(plan, NetPlan) and (line := devices.settle_warning(
                plan.schedulers, plan.config.settle_s,
                any(not spec.is_none for spec in plan.loads.values()),
                plan.config.load_lifetime == "cell")):
            warn(line)
        cmd = command or shlex.join(["backburner", *sys.argv[1:]])
        env = {**capture_environment(), **(environment or {})}
        run_id = store.add_run(cmd, plan.config.to_dict(), plan.config.seed, env, __version__)
        Bench(plan, store, run_id, executor or machine_executor(plan, warn, show_output),
              reporter).run()
    except BaseException:
        measured = run_id is not None and store.trials(include_warmup=True, run_ids=[run_id])
        if measured:
            store.close()
        else:
            store.discard()  # nothing measured: leave no half-made database behind
        raise
    return store, run_id


class Resume:
    """The last run of this machine in a database (or, in a file copied from another
    machine, its last run), to be continued: its configuration and what is left.

    A run with nothing left is only marked finished (if its finish time was lost): no testbed
    is built and no root is needed. The run stays locked while this is open (the file, or
    the run in a shared database), so a second `--resume` of it is refused at once."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.store = Store.open(path)
        try:
            runs = self.store.runs()
            if not runs:
                raise DataError(f"{path} holds no bench run to resume",
                                "start one with `backburner bench --output FILE`")
            run = self.own_run(path, runs)
            self.store.lock_run(run)
            cfg = config.BenchConfig.from_dict(
                run.config, f"{path}: the stored configuration of run {run.id}")
            self.plan = config.plan(cfg, resolve=False)
            self.run_id = run.id
            self.finished = run.finished_at is not None
            done = self.store.done_keys(run.id)
            slots = self.plan.slots()
            self.total = len(slots)
            self.left = sum(1 for s in slots if (s.cell.key, s.round) not in done)
            if self.finished and cfg.sequential:
                self.left = 0  # it stopped where its cells were decided or out of budget
        except BaseException:
            self.store.close()
            raise

    @staticmethod
    def own_run(path: str, runs: list[Run]) -> Run:
        """This machine's last run (in a shared database its last unfinished one). A file
        may have been copied from the machine that ran it, so its last run will do; a shared
        database holds every machine's runs, and continuing another's would mix two
        machines' trials in one run: refused."""
        mine = [r for r in runs if r.machine_id == machine_id()]
        if not looks_like_url(path):
            return (mine or runs)[-1]
        unfinished = [r for r in mine if r.finished_at is None]
        if unfinished or mine:
            return (unfinished or mine)[-1]
        others = sorted({f"{r.hostname or '?'} ({r.machine_id[:8]})" for r in runs
                         if r.finished_at is None})
        raise DataError(f"{path} holds no run of this machine to resume; " + (
                        f"unfinished runs there are from {', '.join(others)}" if others
                        else "every run there is finished"),
                        "resume a run on the machine that started it, or start a new one "
                        "with `backburner bench --output`")

    @property
    def complete(self) -> bool:
        return self.left == 0

    def header(self) -> str:
        return header(self.plan, self.path, left=self.left)

    def run(self, reporter: Reporter, warn: Warn, show_output: bool = False) -> None:
        if self.complete:
            if not self.finished:  # every trial is stored; only the finish time was lost
                self.store.finish_run(self.run_id)
            return
        plan = config.plan(self.plan.config)  # now the probes must exist, and fio
        preflight(plan)
        Bench(plan, self.store, self.run_id, machine_executor(plan, warn, show_output),
              reporter).run()


def resume(path: str, reporter: Reporter, warn: Warn) -> tuple[Store, int]:
    job = Resume(path)
    try:
        job.run(reporter, warn)
    except BaseException:
        job.store.close()
        raise
    return job.store, job.run_id
