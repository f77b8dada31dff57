"""Runs the matrix of a `config.Plan`: for each slot, scheduler → caches dropped → load →
probe → stored.

All system changes of a run live in one `system.Transaction`; every trial is committed to
the store as it ends. `--resume` rebuilds the same slot order from the stored seed and
skips the (cell, round) pairs already stored. Without `--seed` the seed is drawn at random
and recorded with the run (and printed in its header line), so any order can be repeated.

Cache state: in cold mode (the default) caches are dropped before every counted trial
(round > 0, stored with cold=1). The warm-up round (round 0) runs WITHOUT dropping caches
and is stored with cold=0: it is never counted, but its time is the cell's warm reference,
which the report's "not-cold" check compares the cold median with (a cold time equal to the
warm time means the drop did not reach the probe's files). Warm-up times are therefore not
used for the abort limits of cold trials. In warm mode (`--warm`) nothing is dropped and
every trial is stored with cold=0.
"""

from __future__ import annotations

import logging
import os
import shlex
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from statistics import median
from typing import Any

from .. import __version__, job, outfile, priority, procfs, safepath, system
from ..cell import NO_POLICY, Cell
from ..errors import DataError, SystemStateError, UnavailableError
from ..store import Run, Store, backend_for, looks_like_url, machine_id, refuse_existing
from ..units import slug
from . import config, devices, loads, proberoot, probes
from .config import Plan
from .devices import weight_raising_s
from .environment import capture as capture_environment
from .environment import device_settings
from .governed import Governor
from .matrix import Slot
from .prepare import prepare_step, start_during
from .tracing import Tracing, hold_tracefs

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


def header(plan: Plan, path: str, *, left: int | None = None) -> str:
    """The run's first line: its size, cache mode and seed (which reproduces the order)."""
    config = plan.config
    cells = len(plan.cells)
    total = cells * (config.trials + config.warmup)
    todo = f"{left} of {total} trials left" if left is not None else f"{total} trials"
    rounds = f"{config.warmup} warm-up round{'s' if config.warmup != 1 else ''}"
    return (f"bench: {cells} cells × {config.trials} trials + {rounds} ({todo}), "
            f"{'cold' if config.cold else 'warm'}, seed {config.seed} (--seed {config.seed} "
            f"repeats the order) → {path}")


@dataclass
class Progress:
    """What the UI shows; the runner calls `update` after every slot."""

    total: int
    done: int = 0
    cell: str = ""
    last: str = ""
    events: list[str] = field(default_factory=list)


Reporter = Callable[[Progress], None]
Warn = Callable[[str], None]


class Bench:
    def __init__(self, plan: Plan, store: Store, run_id: int,
                 reporter: Reporter, warn: Warn, show_output: bool = False) -> None:
        self.plan = plan
        self.cfg = plan.config
        self.store = store
        self.run_id = run_id
        self.report = reporter
        self.warn = warn
        self.policies = {**plan.policies, NO_POLICY: priority.BUILTIN["default"]}
        self.cgroups: dict[str, list[str]] = {}
        self.loads: dict[str, loads.Load] = {}
        self.device: devices.Device | None = None
        self.unloaded: dict[Cell, list[float]] = defaultdict(list)  # by baseline cell
        self.timeouts: dict[str, int] = defaultdict(int)
        self.show_output = show_output
        self.output = probes.ProbeOutput("/dev/null", show=True)  # replaced in prepare()
        self._load_bytes = (0, 0)
        self._probe_blocks = [0, 0]
        self._governor: Governor | None = None

    # --- set-up -------------------------------------------------------------------------

    def prepare(self, tx: system.Transaction) -> None:
        log.debug("phase: device")
        root = self.cfg.probe_root
        image = root if root is not None and os.path.isfile(root) else None
        self.device = devices.setup(self.plan.device, tx, self.cfg.rotational, image)
        self.output = probes.ProbeOutput(self.device.workdir, show=self.show_output)
        offered = self.device.schedulers()
        queues = {}
        for sched in self.plan.schedulers:
            if sched not in offered:
                raise UnavailableError(f"IO scheduler {sched!r} is not offered by "
                                       f"{self.device.name}", f"it offers: {', '.join(offered)}")
            if self.device.current_scheduler() != sched:
                tx.apply(system.SysfsValue(self.device.scheduler_file, sched))
            queues[sched] = device_settings(self.device.queue)  # its tunables, as selected
        self.device.facts["queue"] = queues
        log.debug("phase: discovery")
        touched: list[str] = []
        if root is None:
            for probe in self.plan.probes.values():
                touched += probes.discover_files(probe, self.device.workdir,
                                                 self.cfg.timeout_s)
            if not self.device.chroot:
                self._warn_other_devices(touched)
        if self.device.chroot:
            self._build_root(touched, root, image)
            devices.bind_virtual(self.device.chroot, tx)
        log.debug("phase: layout")
        for i, (text, spec) in enumerate(self.plan.loads.items()):
            # numbered: two loads may share their first 60 characters
            directory = os.path.join(self.device.load_dir, f"{i:02d}-{slug(text)}")
            os.mkdir(directory, 0o700)
            load = loads.Load(spec, directory)
            load.prepare()
            self.loads[text] = load
        for i, (name, pol) in enumerate(self.policies.items()):
            if pol.needs_cgroup:
                owner = procfs.owner_tag(os.getpid())
                plan = priority.plan_cgroup(pol, f"bench-{owner}-{i}-{slug(name)}")
                for change in job.cgroup_changes(plan):
                    tx.apply(change)
                self.cgroups[name] = plan.procs_files
        self.store.update_environment(self.run_id, {"device": self.device.facts})

    def _build_root(self, touched: list[str], root: str | None, image: str | None) -> None:
        """The probe's files on the testbed, laid out as --probe-layout / --probe-root say,
        and the layout's facts recorded with the run."""
        assert self.device is not None and self.device.chroot is not None
        mode = self.cfg.probe_layout
        if image is not None:
            mode = "image"
        elif root is not None:
            proberoot.copy_tree(root, self.device.chroot)
            mode = "tree"
        else:
            copied = proberoot.build(mode, touched, self.device.chroot, self.cfg.seed)
            self.device.facts["probe_files_copied"] = copied
        facts = proberoot.facts(mode, touched, self.device.chroot,
                                self.cfg.seed if mode == "aged" else None)
        self.device.facts["probe_layout"] = facts.as_dict()

    def _warn_other_devices(self, files: list[str]) -> None:
        assert self.device is not None
        for devno, paths in probes.devices_of(files).items():
            try:
                name = devices._whole_disk(devno)
            except Exception:  # noqa: BLE001 - a virtual fs: not a disk
                continue
            if name != self.device.name:
                self.warn(f"{len(paths)} of the probe's files (e.g. {paths[0]}) are on {name}, "
                          f"not on the device under test {self.device.name}: their reads are "
                          "not scheduled by the schedulers being compared")

    # --- one slot -----------------------------------------------------------------------

    def limit_for(self, cell: Cell) -> float:
        base = self.unloaded.get(cell.baseline())
        if cell.unloaded or not base:
            return self.cfg.timeout_s
        return min(self.cfg.timeout_s, max(1.0, self.cfg.abort_factor * median(base)))

    def _lives_for_block(self, load: loads.Load) -> bool:
        return self.cfg.load_lifetime == "cell" and not load.spec.is_none

    def run_slot(self, tx: system.Transaction, slot: Slot) -> dict[str, Any]:
        assert self.device is not None
        cell = slot.cell
        cold = self.cfg.cold and not slot.warmup  # the warm-up is the warm reference
        self.device.check_alive()
        load = self.loads[cell.load]
        block = self._lives_for_block(load)
        if self.timeouts[cell.key] >= self.cfg.abort_after:
            now = time.time()
            extra: dict[str, Any] = {
                "reason": f"{self.timeouts[cell.key]} earlier trials timed out"}
            if load.child is not None and (not block or slot.last_in_block):
                self._stop_load(load, extra)
            return {"status": "aborted", "cold": int(cold), "started_at": now, "ended_at": now,
                    "extra": extra}
        extra = {}
        if not block or slot.first_in_block or not load.alive():
            if self.device.current_scheduler() != cell.scheduler:
                tx.apply(system.SysfsValue(self.device.scheduler_file, cell.scheduler))
            if cold and not block:
                system.drop_caches()
            self._start_load(load, cell, extra)
        if cold and block:
            system.drop_caches()  # while the load runs, as on a machine that is updating
        started_at = time.time()
        try:
            result, window, moved = self._measure(cell, extra)
        finally:
            if load.child is not None and (not block or slot.last_in_block):
                self._stop_load(load, extra)
        return self._record(cell, cold, result, window, moved, started_at, extra)

    def _start_load(self, load: loads.Load, cell: Cell, extra: dict[str, Any]) -> None:
        """Start the load and let it settle: --settle seconds, and with a load that lives
        for a block of trials at least BFQ's weight-raising time, so the probe meets a load
        that has lost any head start a newly started queue gets."""
        if load.spec.is_none:
            return
        assert self.device is not None
        self._load_bytes = self.device.counters()
        self._probe_blocks = [0, 0]
        if cell.policy == config.GOVERNED:  # the daemon's rule, not us, protects it
            assert self.device is not None
            self._governor = Governor(load.spec, self.device.workdir)
            self._governor.start()
        load.start(self.policies[cell.policy], self.cgroups.get(cell.policy, []))
        settle = self.cfg.settle_s
        if self._lives_for_block(load):
            settle = max(settle, weight_raising_s(self.device.queue, cell.scheduler))
        extra["settle_s"] = settle
        time.sleep(settle)
        if not load.alive():
            raise SystemStateError(f"load {cell.load!r} ended during settling: "
                                   f"{load.last_words()}")

    def _stop_load(self, load: loads.Load, extra: dict[str, Any]) -> None:
        """Stop the load and keep what it did while it ran (the price of the protection)."""
        assert self.device is not None
        try:
            load.stop()
        finally:
            if self._governor is not None:
                self._governor.stop()
                self._governor = None
        bulk = load.bulk()
        if bulk is None:  # a command that counts nothing: the device's traffic, not the probe's
            after = self.device.counters()
            moved = sum(after) - sum(self._load_bytes) - 512 * sum(self._probe_blocks)
            bulk = loads.Bulk("device bytes", max(0.0, float(moved)), load.ran_s())
        extra["bulk"] = bulk.as_dict()

    def _measure(self, cell: Cell, extra: dict[str, Any]
                 ) -> tuple[probes.ProbeResult, float, tuple[int, int]]:
        """The probe's start, with its preparation step, its output kept, and the device's
        traffic in the window (optionally: kernel counters and who issued the IO)."""
        assert self.device is not None
        step = self.plan.prepares.get(cell.prepare)
        if step is not None and not step.during:
            extra["prepare"] = prepare_step(step, self.device, self.cfg.timeout_s).as_dict()
        tracing = Tracing(self.device, self.loads[cell.load]) if self.cfg.trace else None
        if tracing:
            tracing.start()
        during = start_during(step, self.device) if step is not None and step.during else None
        before = self.device.counters()
        t0 = time.monotonic()
        try:
            result = probes.time_probe(self.plan.probes[cell.probe], self.limit_for(cell),
                                       chroot=self.device.chroot, **self.output.streams())
        finally:
            self.output.release()
        if result.outcome is not None:  # before the load stops: its bytes exclude the probe's
            self._probe_blocks[0] += result.outcome.in_blocks
            self._probe_blocks[1] += result.outcome.out_blocks
        window = max(time.monotonic() - t0, 1e-9)
        after = self.device.counters()
        if during is not None:
            extra["prepare"] = during.finish(self.cfg.timeout_s).as_dict()
        if tracing:
            extra.update(tracing.stop(result))
        extra["limit_s"] = self.limit_for(cell)
        return result, window, (after[0] - before[0], after[1] - before[1])

    def _record(self, cell: Cell, cold: bool, result: probes.ProbeResult, window: float,
                moved: tuple[int, int], started_at: float, extra: dict[str, Any]
                ) -> dict[str, Any]:
        out = result.outcome
        if result.status == "timeout":
            self.timeouts[cell.key] += 1
        elif cell.unloaded and result.status == "ok" and cold == self.cfg.cold:
            self.unloaded[cell.baseline()].append(result.wall_s)
        in_blocks = out.in_blocks if out else 0
        out_blocks = out.out_blocks if out else 0
        if result.status != "ok":
            tail = self.output.tail()
            if tail:
                extra["stderr_tail"] = tail
        return {
            "status": result.status,
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
        cells = list(self.plan.cells)
        slots = self.plan.slots()
        done = self.store.done_keys(self.run_id)
        self._reload_history()
        progress = Progress(total=len(slots), done=sum(
            1 for s in slots if (s.cell.key, s.round) in done))
        with system.Transaction("bench") as tx, ExitStack() as held:
            self.prepare(tx)
            if self.cfg.trace:
                hold_tracefs(held)
            log.debug("phase: trials")
            ids = {c.key: self.store.add_cell(self.run_id, c) for c in cells}
            for slot in slots:
                if (slot.cell.key, slot.round) in done:
                    continue
                progress.cell = slot.cell.label + (" (warm-up)" if slot.warmup else "")
                self.report(progress)
                trial = self.run_slot(tx, slot)
                self.store.add_trial(self.run_id, ids[slot.cell.key], round=slot.round,
                                     warmup=int(slot.warmup), **trial)
                progress.done += 1
                wall = trial.get("wall_s")
                progress.last = f"{trial['status']} {wall:.3f}s" if wall else trial["status"]
                self.report(progress)
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


def preflight(plan: Plan) -> None:
    """The last checks before anything is built: root, a trustworthy work directory, and
    room for the testbed image in it."""
    system.require_root("bench (switching IO schedulers, dropping caches, loop devices)")
    work = system.trusted_dir(system.work_root(), "work directory")
    config.check_space(plan.device, str(work))
    if plan.device.kind == "path":  # the loads' private directory is made in it
        safepath.check_chain(plan.device.path, "work directory", sticky_ok=True)


def start(plan: Plan, output: str, reporter: Reporter, warn: Warn,
          command: str | None = None, environment: dict[str, Any] | None = None,
          show_output: bool = False) -> tuple[Store, int]:
    """A new run into a new database (never overwrites), or into a shared one."""
    preflight(plan)
    store = Store.create(output)  # first: an existing database is refused before any wait
    run_id = None
    try:
        busy = devices.busy_devices()
        if busy:
            warn(f"other heavy IO is running on {', '.join(busy)}: results will be noisy")
        cmd = command or shlex.join(["backburner", *sys.argv[1:]])
        env = {**capture_environment(), **(environment or {})}
        run_id = store.add_run(cmd, plan.config.to_dict(), plan.config.seed, env, __version__)
        Bench(plan, store, run_id, reporter, warn, show_output).run()
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
        Bench(plan, self.store, self.run_id, reporter, warn, show_output).run()


def resume(path: str, reporter: Reporter, warn: Warn) -> tuple[Store, int]:
    job = Resume(path)
    try:
        job.run(reporter, warn)
    except BaseException:
        job.store.close()
        raise
    return job.store, job.run_id
