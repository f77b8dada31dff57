"""The real `executor.Executor`: the one part of a bench run that touches the machine.

It builds the device under test (a testbed loop device, a slowdisk, or the device holding a
path), checks that it offers the schedulers asked for, discovers the probe's files and lays
them out, lays out the loads' data and makes the policies' cgroups, all in one
`system.Transaction` that is undone when `open()` ends. Per trial it switches schedulers,
drops caches, starts and stops loads (and the govern daemon for a governed one) and times the
probe, counting the device's traffic around it. What to do when is the runner's business.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from .. import system, systemd
from ..base.errors import SystemStateError, UnavailableError
from ..base.quantities import slug
from ..govern.throttle import freezer_at
from ..kernel import block, cgroups, levers, procfs
from ..policy import cgroup_plan, disks, grammar
from ..run import flushing, job
from ..store.cell import GOVERNED, NO_POLICY, Cell
from . import devices, display, groups, loads, proberoot, probes, room, throttled
from .config import Plan
from .environment import device_settings
from .executor import Measurement
from .governed import Governor
from .prepare import StepResult, before_trial, prepare_step, start_during
from .tracing import Tracing

log = logging.getLogger(__name__)


class MachineExecutor:
    """Devices, cgroups, loads, cache drops and probes, as `executor.Executor` says."""

    def __init__(self, plan: Plan, warn: Callable[[str], None],
                 show_output: bool = False) -> None:
        self.plan = plan
        self.cfg = plan.config
        self.warn = warn
        self.show_output = show_output
        self.policies = {**plan.policies, NO_POLICY: grammar.BUILTIN["default"]}
        self.cgroups: dict[str, list[str]] = {}
        self.loads: dict[str, loads.Load] = {}
        self._device: devices.Device | None = None
        self._tx: system.Transaction | None = None
        self.output = probes.ProbeOutput("/dev/null", show=True)  # replaced in open()
        self._load_bytes = (0, 0)
        self._probe_blocks = [0, 0]
        self._governor: Governor | None = None
        self._screen: display.Display | None = None  # for --ready window probes
        self._scratch: probes.Scratch | None = None  # where a probe on the host writes
        self._groups: groups.BenchGroups | None = None
        #: the throttle policy: the probe group's pressure file, each throttled policy's
        #: freezer, and the throttle around the load that runs now
        self._pressure = ""
        self._freezers: dict[str, system.CgroupFreezer] = {}
        self._groups_made: dict[str, system.CgroupDir] = {}  # path -> the change made it
        self._paced: throttled.Paced | None = None
        self._flushing: flushing.FlushBehind | None = None  # the load's flush-behind
        #: scheduler -> the values of the tunables a setup variant changes, as selected
        self._tunables: dict[str, dict[str, str]] = {}

    @property
    def device(self) -> devices.Device:
        assert self._device is not None, "use the executor inside open()"
        return self._device

    @property
    def tx(self) -> system.Transaction:
        assert self._tx is not None, "use the executor inside open()"
        return self._tx

    # --- set-up -------------------------------------------------------------------------

    @contextmanager
    def open(self) -> Iterator[dict[str, Any]]:
        with system.Transaction("bench") as tx, ExitStack() as held:
            self._tx = tx
            try:
                self._prepare(tx, held)
                yield self.device.facts
            finally:
                if self._paced is not None:  # a run interrupted mid-trial: no more pauses
                    self._paced.stop()
                    self._paced = None
                if self._flushing is not None:
                    self._flushing.stop()
                    self._flushing = None
                self._tx = None
                self._screen = self._scratch = None

    def _prepare(self, tx: system.Transaction, held: ExitStack) -> None:
        log.debug("phase: device")
        root = self.cfg.probe_root
        image = root if root is not None and os.path.isfile(root) else None
        self._device = device = devices.setup(self.plan.device, tx, self.cfg.rotational, image)
        self.output = probes.ProbeOutput(device.workdir, show=self.show_output)
        offered = device.schedulers()
        queues = {}
        under: dict[str, levers.Disk] = {}
        for sched in self.plan.schedulers:
            if sched not in offered:
                raise UnavailableError(f"IO scheduler {sched!r} is not offered by "
                                       f"{device.name}", f"it offers: {', '.join(offered)}")
            self.use_scheduler(sched)
            queues[sched] = device_settings(device.queue)  # its tunables, as selected
            under[sched] = levers.read_disk(device.name, cgroup2_root=cgroups.unified_root())
            self._own_tunables(sched)
        device.facts["queue"] = queues
        if any(p.ready_window is not None for p in self.plan.probes.values()):
            self._screen = held.enter_context(display.Display(device.workdir))
        log.debug("phase: discovery")
        touched: list[str] = []
        if root is None:
            for probe in self.plan.probes.values():
                touched += probes.discover_files(probe, device.workdir, self.cfg.timeout_s,
                                                 self._screen)
            if self._screen is not None:  # the probe opened the cookie: not a file to copy
                touched = [p for p in touched if p != self._screen.cookie]
            if not device.chroot:
                self._warn_other_devices(touched)
        if not device.chroot:
            self._scratch = probes.Scratch.make(device.workdir, "probe.scratch")
        if device.chroot:
            self._build_root(touched, root, image)
            devices.bind_virtual(device.chroot, tx)
        log.debug("phase: layout")
        self._check_room()
        self._lay_out_loads()
        self._make_cgroups(tx)
        device.facts["levers"] = self._levers(under)

    def _levers(self, under: dict[str, levers.Disk]) -> dict[str, dict[str, Any]]:
        """Which of each policy's levers act on the device under each scheduler (the
        report names them per cell): its groups are the delegated scope's, or ours."""
        enables = self._groups.facts["controllers"] if self._groups else ("io", "memory")
        groups = levers.read_groups(enables)  # type: ignore[arg-type]
        out: dict[str, dict[str, Any]] = {}
        for sched, disk in under.items():
            out[sched] = {}
            for name, pol in self.policies.items():
                if name == GOVERNED:
                    continue  # the daemon's rule sets it: not known here
                on = replace(disk, iocost=disk.iocost or (pol.io_cost and groups.cost))
                out[sched][name] = disks.record(pol, levers.Effect(on, groups))
        return out

    def _check_room(self) -> None:
        """Before any load file is written: the loads' files fit in what the probe's files
        left free (plan() could only guess the probe's share), else one line and 64."""
        st = os.statvfs(self.device.load_dir)
        probe_bytes = int(self.device.facts.get("probe_layout", {}).get("bytes") or 0)
        room.check_room(self.plan.device, loads.room_needed(self.plan.loads.values()),
                          probe_bytes, free=st.f_bavail * st.f_frsize)

    def _lay_out_loads(self) -> None:
        for i, (text, spec) in enumerate(self.plan.loads.items()):
            # numbered: two loads may share their first 60 characters
            directory = os.path.join(self.device.load_dir, f"{i:02d}-{slug(text)}")
            os.mkdir(directory, 0o700)
            load = loads.Load(spec, directory)
            load.prepare()
            self.loads[text] = load

    def _make_cgroups(self, tx: system.Transaction) -> None:
        """Where systemd owns the cgroup tree, the probe's and the loads' groups in a scope it
        delegates to us (`groups`); elsewhere a group per policy of our own."""
        throttles = self.plan.throttles
        if systemd.manages_cgroups(systemd.read_facts()):
            if groups.needs_groups(self.policies) or throttles:
                self._groups = groups.place(tx, self.policies, self.device.name,
                                            also=set(throttles))
                self.device.facts["cgroups"] = self._groups.facts
                self._pressure = os.path.join(self._groups.probe, "io.pressure")
                for name in throttles:
                    self._freezers[name] = self._freezer(tx, self._groups.loads[name], 2)
            return
        for i, (name, pol) in enumerate(self.policies.items()):
            if pol.needs_cgroup:
                owner = procfs.owner_tag(os.getpid())
                plan = cgroup_plan.plan_cgroup(pol, f"bench-{owner}-{i}-{slug(name)}")
                for change in job.cgroup_changes(plan):
                    self._made_group(tx, change)
                self.cgroups[name] = plan.procs_files
        if throttles:
            self._throttle_groups(tx)

    def _throttle_groups(self, tx: system.Transaction) -> None:
        """Where no systemd owns the tree: bench (and so the probe, its child) in a cgroup
        v2 group of its own, whose io.pressure is the probe's; each throttled load in a
        sibling (its stalls are not the probe's) and in a freezer group (`throttled`)."""
        root = cgroups.unified_root()
        assert root is not None, "plan() checked (throttled.require)"
        owner = procfs.owner_tag(os.getpid())
        top = os.path.join(root, "backburner")
        tx.apply(system.CgroupDir(top, shared=True))
        probe = os.path.join(top, f"bench-{owner}-probe")
        tx.apply(system.CgroupDir(probe, shared_parent={}))
        tx.apply(system.CgroupMove(os.getpid(), probe))
        self._pressure = os.path.join(probe, "io.pressure")
        made = {"probe": probe.removeprefix(root), "loads": {}}
        for i, name in enumerate(self.policies):
            if name not in self.plan.throttles:
                continue
            base = f"bench-{owner}-{i}-{slug(name)}"
            group = os.path.join(top, base)
            self._made_group(tx, system.CgroupDir(group))
            procs = [cgroups.procs_file(group)]
            where = freezer_at(base)
            assert where is not None, "plan() checked (throttled.require)"
            if where[0] != group:  # the v1 freezer hierarchy
                self._made_group(tx, system.CgroupDir(os.path.dirname(where[0]), shared=True))
                self._made_group(tx, system.CgroupDir(where[0], shared_parent={}))
                procs.append(cgroups.procs_file(where[0]))
            self._freezers[name] = self._freezer(tx, *where)
            self.cgroups[name] = [*self.cgroups.get(name, []), *procs]
            made["loads"][name] = [os.path.dirname(p) for p in procs]  # type: ignore[index]
        self.device.facts["throttle_cgroups"] = made

    def _made_group(self, tx: system.Transaction, change: Any) -> None:
        """Apply a change; a group's is kept, to be made again should it go (`_regroup`)."""
        tx.apply(change)
        if isinstance(change, system.CgroupDir):
            self._groups_made[change.path] = change

    @staticmethod
    def _freezer(tx: system.Transaction, path: str, version: int) -> system.CgroupFreezer:
        freezer = system.CgroupFreezer(path, version)
        tx.apply(freezer)  # journaled: its undo thaws, should bench die mid-pause
        return freezer

    def _build_root(self, touched: list[str], root: str | None, image: str | None) -> None:
        """The probe's files on the testbed, laid out as --probe-layout / --probe-root say,
        and the layout's facts recorded with the run."""
        chroot = self.device.chroot
        assert chroot is not None
        mode = self.cfg.probe_layout
        if image is not None:
            mode = "image"
        elif root is not None:
            proberoot.copy_tree(root, chroot)
            mode = "tree"
        else:
            st = os.statvfs(chroot)
            room.check_probe_room(self.plan.device, mode, proberoot.bytes_needed(mode, touched),
                                  st.f_bavail * st.f_frsize)
            copied = proberoot.build(mode, touched, chroot, self.cfg.seed)
            self.device.facts["probe_files_copied"] = copied
        facts = proberoot.facts(mode, touched, chroot, self.cfg.seed if mode == "aged" else None)
        self.device.facts["probe_layout"] = facts.as_dict()

    def _warn_other_devices(self, files: list[str]) -> None:
        for devno, paths in probes.devices_of(files).items():
            try:
                name = block.whole_disk_with_queue(devno)
            except Exception:  # noqa: BLE001 - a virtual fs: not a disk
                continue
            if name != self.device.name:
                self.warn(f"{len(paths)} of the probe's files (e.g. {paths[0]}) are on {name}, "
                          f"not on the device under test {self.device.name}: their reads are "
                          "not scheduled by the schedulers being compared")

    # --- per trial ----------------------------------------------------------------------

    def check_alive(self) -> None:
        self.device.check_alive()

    def _own_tunables(self, scheduler: str) -> None:
        """Read, with `scheduler` just selected, its own values of the tunables the setup
        variants change (one line before any trial when the device has no such file)."""
        keys = {k for p in self.plan.prepares.values() if p is not None
                and p.scheduler == scheduler for k, _ in p.tunables}
        own = {}
        for key in sorted(keys):
            path = os.path.join(self.device.queue, "iosched", key)
            try:
                own[key] = Path(path).read_text().strip()
            except OSError:
                raise UnavailableError(f"{scheduler} on {self.device.name} has no tunable "
                                       f"{key!r} ({path})",
                                       "see the files in queue/iosched/ with the scheduler "
                                       "selected") from None
        if own:
            self._tunables[scheduler] = own

    def _tune(self, cell: Cell) -> None:
        """The cell's setup variant's tunables in force, or the scheduler's own values where
        it sets none; each write a journaled change (put back with the run)."""
        own = self._tunables.get(cell.scheduler)
        if not own:
            return
        step = self.plan.prepares.get(cell.prepare)
        want = {**own, **(dict(step.tunables) if step is not None else {})}
        for key, value in want.items():
            path = os.path.join(self.device.queue, "iosched", key)
            if Path(path).read_text().strip() != value:
                self.tx.apply(system.SysfsValue(path, value))

    def prepare_trial(self, cell: Cell) -> StepResult | None:
        command = self.plan.trial_prepares.get(cell.probe)
        if command is None:
            return None
        return before_trial(command, self.device, self.cfg.timeout_s, self.cfg.shell)

    def use_scheduler(self, scheduler: str) -> None:
        if self.device.current_scheduler() != scheduler:
            self.tx.apply(system.SysfsValue(self.device.scheduler_file, scheduler))

    def drop_caches(self) -> None:
        system.drop_caches()

    def weight_raising_s(self, scheduler: str) -> float:
        return devices.weight_raising_s(self.device.queue, scheduler)

    def start_load(self, cell: Cell) -> None:
        self._tune(cell)
        self._load_bytes = self.device.counters()
        self._probe_blocks = [0, 0]
        load = self.loads[cell.load]
        if cell.policy == GOVERNED:  # the daemon's rule, not us, protects it
            self._governor = Governor(load.spec, self.device.workdir)
            self._governor.start()
        policy = self.policies[cell.policy]
        if self._groups is not None:
            self._groups.use(self.tx, policy)
            load.start(policy, self._groups.procs(cell.policy))
        else:
            self._regroup(cell.policy)
            load.start(policy, self.cgroups.get(cell.policy, []))
        if load.child is not None:  # for `restore`, should its death signal not end it
            self.tx.apply(system.Started(load.child.pid, procfs.start_time(load.child.pid)
                                         or 0))
        spec = self.plan.throttles.get(cell.policy)
        if spec is not None and load.child is not None:
            self._paced = throttled.Paced(spec, self._pressure, self._freezers[cell.policy])
            self._paced.start()
        if cell.policy in self.plan.flush_behind and load.child is not None:
            self._flushing = flushing.FlushBehind([self.device.load_dir], policy,
                                                 flushing.tree_of(load.child.pid))
            self._flushing.start()

    def _regroup(self, policy: str) -> None:
        """A policy's groups made again where one has gone while empty between trials
        (another program's clean-up of empty groups, seen on a shared machine: the load
        would not start), with a warning: a journaled change again, undone with the run."""
        for procs in self.cgroups.get(policy, []):
            group = os.path.dirname(procs)
            if os.path.isdir(group):
                continue
            self.warn(f"cgroup {group} was removed behind bench's back: made again")
            for path in (os.path.dirname(group), group):  # its parent too, if it went
                made = self._groups_made.get(path)
                if made is not None and not os.path.isdir(path):
                    self.tx.apply(dataclasses.replace(made))

    def settle(self, load: str, seconds: float) -> None:
        time.sleep(seconds)
        if not self.loads[load].alive():
            raise SystemStateError(f"load {load!r} ended during settling: "
                                   f"{self.loads[load].last_words()}")

    def load_alive(self, load: str) -> bool:
        return self.loads[load].alive()

    def stop_load(self, load: str) -> dict[str, Any]:
        """Stop the load and keep what it did while it ran (the price of the protection)."""
        running = self.loads[load]
        paced: dict[str, Any] = {}
        try:
            if self._paced is not None:  # thawed first: a frozen load cannot stop
                paced, self._paced = self._paced.stop(), None
            running.stop()
            if self._flushing is not None:  # after the load: its last files written back
                paced.update(self._flushing.stop())
                self._flushing = None
        finally:
            if self._governor is not None:
                self._governor.stop()
                self._governor = None
        bulk = running.bulk()
        if bulk is None:  # a command that counts nothing: the device's traffic, not the probe's
            after = self.device.counters()
            moved = sum(after) - sum(self._load_bytes) - 512 * sum(self._probe_blocks)
            bulk = loads.Bulk("device bytes", max(0.0, float(moved)), running.ran_s())
        out: dict[str, Any] = {**bulk.as_dict(), **paced}
        if running.failure:
            out["failure"] = running.failure
        return out

    def measure(self, cell: Cell, limit_s: float) -> Measurement:
        """The probe's start, with its preparation step, its output kept, and the device's
        traffic in the window (optionally: kernel counters and who issued the IO)."""
        extra: dict[str, Any] = {"loadavg": _loadavg()}  # a shared machine's noise, kept
        self._tune(cell)  # an unloaded cell's (a loaded one's are in force since its start)
        step = self.plan.prepares.get(cell.prepare)
        if step is not None and not step.runs_command:
            extra["tunables"] = dict(step.tunables)
            step = None
        if step is not None and not step.during:
            extra["prepare"] = prepare_step(step, self.device, self.cfg.timeout_s,
                                            self.cfg.shell).as_dict()
        tracing = Tracing(self.device, self.loads[cell.load]) if self.cfg.trace else None
        if tracing:
            tracing.start()
        during = (start_during(step, self.device, self.cfg.shell)
                  if step is not None and step.during else None)
        load = self.loads[cell.load]
        mark = load.mark()  # the load's own bytes around the start (`loadio`)
        paused = self._paced.snapshot() if self._paced is not None else None
        before = self.device.counters()
        t0 = time.monotonic()
        try:
            result = probes.time_probe(self.plan.probes[cell.probe], limit_s,
                                       chroot=self.device.chroot, screen=self._screen,
                                       scratch=self._scratch, **self.output.streams())
        finally:
            self.output.release()
        if result.outcome is not None:  # before the load stops: its bytes exclude the probe's
            self._probe_blocks[0] += result.outcome.in_blocks
            self._probe_blocks[1] += result.outcome.out_blocks
        window = max(time.monotonic() - t0, 1e-9)
        after = self.device.counters()
        if mark is not None and (end := load.mark()) is not None:
            window_io = load.during(mark, end)
            if window_io is not None:
                extra["bulk_during"] = window_io.as_dict()
        if paused is not None and self._paced is not None:
            now = self._paced.snapshot()
            extra["throttle_during"] = {"pauses": now[0] - paused[0],
                                        "paused_s": now[1] - paused[1]}
        if during is not None:
            extra["prepare"] = during.finish(self.cfg.timeout_s).as_dict()
        if tracing:
            extra.update(tracing.stop(result))
        tail = self.output.tail() if result.status != "ok" else []
        return Measurement(result, window, (after[0] - before[0], after[1] - before[1]),
                           extra, tail)


def _loadavg() -> list[float]:
    """The 1, 5 and 15 minute load averages (/proc/loadavg) as a trial starts."""
    try:
        return [float(v) for v in Path("/proc/loadavg").read_text().split()[:3]]
    except (OSError, ValueError):
        return []
