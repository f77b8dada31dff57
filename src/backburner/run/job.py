"""Running one bulk job on the back burner, or re-prioritising one that already runs.

This joins the three cores: `priority` says what to set, `system` creates the job's cgroup
(with an undo), `spawn` starts the job with the priorities applied before exec.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from .. import spawn, system, systemd
from ..base.errors import NotFoundError, SystemStateError, UsageError
from ..kernel import procfs
from ..policy import cgroup_plan, grammar, live
from ..status import records
from . import flushing

if TYPE_CHECKING:  # the network policy is imported by the runs that ask for it (--net)
    from ..net import background
    from ..net import policy as nt

Report = Callable[[str], None]


def _quiet(_msg: str) -> None:
    pass


def cgroup_changes(plan: cgroup_plan.CgroupPlan) -> list[system.Change]:
    """The shared `backburner` parent (removed once empty), then the job's own group."""
    changes: list[system.Change] = []
    parent_settings: dict[str, str] = {}
    if plan.version == 2 and plan.enable:
        changes.append(system.ControllersEnabled(
            os.path.join(plan.root, "cgroup.subtree_control"), list(plan.enable)))
        parent_settings["cgroup.subtree_control"] = " ".join(f"+{c}" for c in plan.enable)
    for path, files in plan.dirs.items():
        changes.append(system.CgroupDir(os.path.dirname(path), parent_settings, shared=True))
        changes.append(system.CgroupDir(path, dict(files), shared_parent=parent_settings))
    return changes


def without_cgroup(policy: grammar.Policy) -> grammar.Policy:
    """What `--no-cgroup` can honour: IO/CPU weights exist only as files of a cgroup, so a
    weight asked for on purpose is refused rather than silently ignored; the weights a named
    policy carries (`--policy background --no-cgroup`) are left out, its IO class and CPU
    policy still applied."""
    base = grammar.BUILTIN.get(policy.name.removesuffix("+custom"))
    asked = [what for attr, what in (("io_weight", "an IO weight"), ("cpu_weight", "a CPU weight"))
             if getattr(policy, attr) is not None
             and (base is None or getattr(base, attr) != getattr(policy, attr))]
    if asked:
        verb = "needs" if len(asked) == 1 else "need"
        raise UsageError(f"{' and '.join(asked)} {verb} a cgroup, and --no-cgroup makes none",
                         "drop --no-cgroup, or the weight")
    if policy.group_controls:
        knobs = policy.group_controls
        raise UsageError(f"{', '.join(knobs)} {'needs' if len(knobs) == 1 else 'need'} a "
                         "cgroup, and --no-cgroup makes none", "drop --no-cgroup, or the policy")
    return replace(policy, io_weight=None, cpu_weight=None)


def describe_plan(policy: grammar.Policy, plan: cgroup_plan.CgroupPlan | None) -> str:
    parts = [f"{k} {v}" for k, v in policy.settings().items() if v not in ("-", "inherit")]
    if plan:
        for path, files in plan.dirs.items():
            sets = ", ".join(f"{k}={v}" for k, v in files.items())
            parts.append(f"cgroup v{plan.version} {path} ({sets})")
    return "; ".join(parts) or "nothing changed (default policy)"


def run_job(argv: Sequence[str], policy: grammar.Policy, *, use_cgroup: bool = True,
            report: Report = _quiet, facts: systemd.Facts | None = None,
            slice_name: str = systemd.DEFAULT_SLICE,
            net: background.Target | None = None,
            flush_behind: bool = False) -> spawn.Outcome:
    """Run argv to completion under policy; the job's cgroup is removed after it, whatever
    happens. Returns the job's Outcome for the caller to mirror.

    `flush_behind`: the files the job writes are written back as it closes them, at its IO
    class (`run.flushing`), while it runs.

    Where systemd owns the cgroup tree (`facts`, read from the machine unless given), the
    job's group is a transient scope that systemd makes and collects; elsewhere we make it.

    `net` (checked by `background.check`): the job's traffic on the back burner on that
    interface, the job in that interface's namespace.
    """
    if not use_cgroup:
        policy = without_cgroup(policy)
    if policy.io is not None and policy.io.klass == "rt":
        system.require_root("the realtime IO class (rt)")
    sets = {k: v for k, v in policy.settings().items() if v not in ("-", "inherit")}
    if net is not None:
        sets["net"] = f"background on {net.dev}"
    if flush_behind:
        sets["flush-behind"] = "on"
    with records.running_job(argv, sets), ExitStack() as held:  # `backburner status` lists it
        if flush_behind:
            held.enter_context(flushing.around_children(policy, report))
        return _run_job(argv, policy, report=report, facts=facts, slice_name=slice_name,
                        net=net)


def _run_job(argv: Sequence[str], policy: grammar.Policy, *, report: Report,
             facts: systemd.Facts | None, slice_name: str,
             net: background.Target | None) -> spawn.Outcome:
    if net is not None:
        return _run_with_net(argv, policy, net, report=report, facts=facts,
                             slice_name=slice_name)
    if not policy.needs_cgroup:
        report(f"applying {describe_plan(policy, None)}")
        return spawn.run_foreground(argv, policy=policy)
    managed = systemd.manages_cgroups(facts if facts is not None else systemd.read_facts())
    cgroup_plan.refuse_for_job(policy, "run", under_systemd=managed)
    system.require_root("placing the job in a cgroup with IO/CPU weights (--no-cgroup avoids it)")
    if managed:
        return run_in_scope(argv, policy, report=report, slice_name=slice_name)
    plan = cgroup_plan.plan_cgroup(policy, f"run-{procfs.owner_tag(os.getpid())}")
    with system.Transaction("run") as tx:
        for change in cgroup_changes(plan):
            tx.apply(change)
        report(f"applying {describe_plan(policy, plan)}")
        return spawn.run_foreground(argv, policy=policy, cgroup_procs=plan.procs_files)


def _run_with_net(argv: Sequence[str], policy: grammar.Policy, net: background.Target, *,
                  report: Report, facts: systemd.Facts | None,
                  slice_name: str = systemd.DEFAULT_SLICE) -> spawn.Outcome:
    """The job in a cgroup v2 group of its own for its packets (beside the group of its
    IO/CPU weights, when the policy has them), the network policy on `net` for as long
    as it runs; the pacer ends before the transaction takes the policy away."""
    from ..net import background
    from ..net import policy as nt

    if systemd.manages_cgroups(facts if facts is not None else systemd.read_facts()):
        if net.attribution == "net_cls":  # systemd on cgroup v1 alone: no BPFProgram=
            return _run_with_net_cls_in_scope(argv, policy, net, report=report,
                                              slice_name=slice_name)
        return _run_with_net_in_scope(argv, policy, net, report=report,
                                      slice_name=slice_name)
    plan = (cgroup_plan.plan_cgroup(policy, f"run-{procfs.owner_tag(os.getpid())}")
            if policy.needs_cgroup else None)
    if plan is not None:
        cgroup_plan.refuse_for_job(policy, "run", under_systemd=False)
    with system.Transaction("run") as tx:
        procs: list[str] = []
        if plan is not None:
            for change in cgroup_changes(plan):
                tx.apply(change)
            procs += plan.procs_files
        applied, net_procs = background.apply(tx, net, procfs.owner_tag(os.getpid()))
        where = f" in network namespace {net.ns}" if net.ns else ""
        report(f"applying {describe_plan(policy, plan)}; network: background on "
               f"{net.dev}{where} ({_group_kind(applied)} {applied.group})")
        try:
            return spawn.run_foreground(argv, policy=policy, cgroup_procs=[*procs, net_procs],
                                        netns=net.netns_path)
        finally:
            nt.stop(applied)


def _group_kind(applied: nt.Applied) -> str:
    return "cgroup v1 net_cls" if applied.attribution == "net_cls" else "cgroup v2"


def _run_with_net_in_scope(argv: Sequence[str], policy: grammar.Policy,
                           net: background.Target, *, report: Report,
                           slice_name: str) -> spawn.Outcome:
    """Where systemd owns the cgroup tree: the job's transient scope (as `run_in_scope`
    makes it) gets the network policy's programs, pinned for this run for systemd to
    attach (BPFProgram=, as a unit's drop-in names the service's), and the pacer paces
    the groups they are on while the job runs; the pins and the classes go after it."""
    from ..kernel.bpf import calls as bpf
    from ..net import policy as nt
    from ..net import service

    name = f"backburner-run-{procfs.owner_tag(os.getpid())}"
    with system.Transaction("run") as tx:
        applied = service.start(tx, net, bpf.BPFFS, name)
        programs = [tuple(p.split(":", 1)) for p in
                    system.bpf.bpf_program_settings(bpf.BPFFS, name)]
        where = f" in network namespace {net.ns}" if net.ns else ""
        report(f"network: background on {net.dev}{where} (BPF programs in "
               f"{applied.group}, attached to the job's scope by systemd)")
        try:
            return run_in_scope(argv, policy, report=report, slice_name=slice_name,
                                extra=[("BPFProgram", ("a(ss)", programs))],
                                netns=net.netns_path)
        finally:
            nt.stop(applied)


def _run_with_net_cls_in_scope(argv: Sequence[str], policy: grammar.Policy,
                               net: background.Target, *, report: Report,
                               slice_name: str) -> spawn.Outcome:
    """Where systemd owns a cgroup v1 tree: the job's transient scope as `run_in_scope`
    makes it, and the job in our net_cls group too (a controller systemd leaves alone),
    joined before it asks for the scope."""
    from ..net import background
    from ..net import policy as nt

    with system.Transaction("run") as tx:
        applied, net_procs = background.apply(tx, net, procfs.owner_tag(os.getpid()))
        where = f" in network namespace {net.ns}" if net.ns else ""
        report(f"network: background on {net.dev}{where} ({_group_kind(applied)} "
               f"{applied.group})")
        try:
            return run_in_scope(argv, policy, report=report, slice_name=slice_name,
                                netns=net.netns_path, cgroup_procs=[net_procs])
        finally:
            nt.stop(applied)


def run_in_scope(argv: Sequence[str], policy: grammar.Policy, *, report: Report = _quiet,
                 slice_name: str = systemd.DEFAULT_SLICE, extra: Sequence[Any] = (),
                 netns: str | None = None, cgroup_procs: Sequence[str] = ()) -> spawn.Outcome:
    """The job in a transient systemd scope of its own, in a slice beside user.slice that
    carries the policy's weights (in system.slice, where a scope lands by default, a weight
    ranks the job only against other services, and the desktop's user.slice weighs as much
    as all of them). As `systemd-run --scope` does, the child asks systemd for the scope
    itself, after its IO class and CPU policy are set and before it execs the job: the
    Outcome (exit status, signal, rusage) is the job's own. The slice, made with the scope
    when it does not exist yet, is stopped by systemd when its last job has gone (even if
    we were killed): nothing of it is ours to undo. `extra`: more properties of the scope
    (the network policy's BPFProgram=); `netns`: the network namespace the job runs in;
    `cgroup_procs`: groups of ours it joins first, in hierarchies systemd leaves alone."""
    systemd.check_slice_name(slice_name)
    unit = systemd.scope_unit_name(os.getpid())
    weights = systemd.slice_properties(policy)
    own = replace(policy, io_weight=None, cpu_weight=None)  # the slice carries the weights
    from ..systemd.bus import Bus

    with Bus.connect() as bus:  # fails here, in one line, where systemd does not answer
        have = bus.slice_weights(slice_name, list(weights))

    def join_scope() -> None:
        with Bus.connect() as bus:
            bus.start_scope(unit, os.getpid(), slice_name,
                            [(k, ("t", v)) for k, v in weights.items()],
                            "backburner run: a bulk job on the back burner", extra=extra)

    if have is None:
        where = f"{slice_name} (" + ", ".join(f"{k}={v}" for k, v in weights.items()) + ")"
    else:  # a unit file's, or another job's: as it is
        where = f"{slice_name} as it is (" + ", ".join(
            f"{k}={'default' if v is None else v}" for k, v in have.items()) + ")"
    parts = [f"{k} {v}" for k, v in own.settings().items() if v not in ("-", "inherit")]
    report(f"applying {'; '.join([*parts, f'systemd scope {unit} in {where}'])}")
    return spawn.run_foreground(argv, policy=own, before_exec=join_scope, netns=netns,
                                cgroup_procs=cgroup_procs)


@dataclass(frozen=True)
class Reprioritised:
    pid: int
    threads: list[int]
    cgroups: list[str]


def check_target(pid: int, force: bool = False) -> None:
    """`run --pid` on PID 1, a kernel thread or one of our own ancestors would re-prioritise
    the machine (every process inherits from PID 1; kthreadd's children are the kernel's
    own workers) or backburner itself: refused unless forced."""
    if procfs.start_time(pid) is None:
        raise NotFoundError(f"no process with PID {pid}", "check it with `ps -p PID`")
    if force:
        return
    why = None
    if pid == 1:
        why = "PID 1 (init: every process on the machine descends from it)"
    elif procfs.is_kernel_thread(pid):  # by its flags: PID 2 of a container is no kthread
        why = f"PID {pid}, a kernel thread"
    elif pid == os.getpid() or pid in procfs.ancestors_of(os.getpid()):
        why = f"PID {pid}, which runs backburner itself (one of its ancestors)"
    if why:
        raise UsageError(f"refusing to re-prioritise {why}", "add --force if you mean it")


def describe_targets(pid: int) -> str:
    """What `run --pid` would change: the processes and threads of the tree."""
    threads = live.tree_threads(pid)
    procs = sorted({p for p, _ in threads})
    names = ", ".join(f"{p} ({procfs.comm_of(p) or '?'})" for p in procs[:5])
    more = f" and {len(procs) - 5} more" if len(procs) > 5 else ""
    return f"{len(procs)} process(es), {len(threads)} thread(s): {names}{more}"


def reprioritise(pid: int, policy: grammar.Policy, *, use_cgroup: bool = True,
                 force: bool = False, report: Report = _quiet) -> Reprioritised:
    """`run --pid`: every thread of pid and its descendants, present ones included.

    The old priorities of every thread and the cgroup each process came from are journaled
    (`system.Priorities`, `system.CgroupMove`) and the journal is handed over to the job:
    when the job ends the journal is stale and `backburner restore` (or the next command
    that changes state) removes the group; while it lives, `restore` puts its threads'
    priorities and cgroups back as they were. If anything fails before the hand-over,
    everything is put back at once.
    """
    check_target(pid, force)
    cgroup_plan.refuse_for_job(policy, "run --pid")
    if not use_cgroup:
        policy = without_cgroup(policy)
    if policy.io is None and policy.cpu is None and not policy.needs_cgroup:
        raise UsageError("nothing to change: give --policy, --io, --cpu, --io-weight or "
                         "--cpu-weight with --pid")
    if policy.needs_cgroup:
        system.require_root("moving a process into a cgroup with IO/CPU weights")
    if earlier := live_reprioritisations(pid):
        report(f"PID {pid}: putting back the earlier re-prioritisation first")
        for journal in earlier:
            system.undo_journal(journal)
    report(f"PID {pid}: {describe_targets(pid)}")
    plan = (cgroup_plan.plan_cgroup(policy, f"pid-{procfs.owner_tag(pid)}")
            if policy.needs_cgroup else None)
    with system.Transaction(RUN_PID_LABEL) as tx:
        if plan is not None:
            for change in cgroup_changes(plan):
                tx.apply(change)
            for path in plan.dirs:
                for proc in [pid, *procfs.descendants_of(pid)]:
                    try:
                        tx.apply(system.CgroupMove(proc, path))
                    except SystemStateError:
                        if procfs.start_time(proc) is not None:
                            raise
        report(f"applying {describe_plan(policy, plan)}")
        threads = tx.apply(system.Priorities(pid, str(policy.io) if policy.io else None,
                                             str(policy.cpu) if policy.cpu else None))
        tx.hand_over(pid, note=f"PID {pid} re-prioritised")
    return Reprioritised(pid, threads, list(plan.dirs) if plan else [])


RUN_PID_LABEL = "run-pid"


def live_reprioritisations(pid: int) -> list[system.Journal]:
    """The journals of `run --pid` calls on this process that it still owns (it lives)."""
    return [info.journal for info in system.journals()
            if info.label == RUN_PID_LABEL and info.owner_pid == pid and info.alive]


def restore_reprioritised(pid: int, report: Report = _quiet) -> list[str]:
    """`restore --pid`: put back now what `run --pid` changed on a process that still runs
    (a finished one's changes are undone by a plain `restore`)."""
    found = live_reprioritisations(pid)
    if not found:
        raise NotFoundError(f"PID {pid} was not re-prioritised by `run --pid` (or has exited)",
                            "a plain `backburner restore` undoes what exited processes left")
    undone: list[str] = []
    for journal in found:
        undone += system.undo_journal(journal, report)
    return undone


def still_reprioritised() -> list[int]:
    """PIDs that `run --pid` changed and that still run: `restore` leaves them alone."""
    return sorted({info.owner_pid for info in system.journals()
                   if info.label == RUN_PID_LABEL and info.alive and info.owner_pid})
