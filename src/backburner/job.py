"""Running one bulk job on the back burner, or re-prioritising one that already runs.

This joins the three cores: `priority` says what to set, `system` creates the job's cgroup
(with an undo), `spawn` starts the job with the priorities applied before exec.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from . import priority, spawn, system
from .errors import NotFoundError, SystemStateError

Report = Callable[[str], None]


def _quiet(_msg: str) -> None:
    pass


def cgroup_changes(plan: priority.CgroupPlan) -> list[system.Change]:
    """The shared `backburner` parent (removed once empty), then the job's own group."""
    changes: list[system.Change] = []
    parent_settings: dict[str, str] = {}
    if plan.version == 2 and plan.enable:
        changes.append(system.ControllersEnabled(
            os.path.join(plan.root, "cgroup.subtree_control"), list(plan.enable)))
        parent_settings["cgroup.subtree_control"] = " ".join(f"+{c}" for c in plan.enable)
    for path, files in plan.dirs.items():
        changes.append(system.CgroupDir(os.path.dirname(path), parent_settings, shared=True))
        changes.append(system.CgroupDir(path, dict(files)))
    return changes


def describe_plan(policy: priority.Policy, plan: priority.CgroupPlan | None) -> str:
    parts = [f"{k} {v}" for k, v in policy.settings().items() if v not in ("-", "inherit")]
    if plan:
        for path, files in plan.dirs.items():
            sets = ", ".join(f"{k}={v}" for k, v in files.items())
            parts.append(f"cgroup v{plan.version} {path} ({sets})")
    return "; ".join(parts) or "nothing changed (default policy)"


def run_job(argv: Sequence[str], policy: priority.Policy, *, use_cgroup: bool = True,
            report: Report = _quiet) -> spawn.Outcome:
    """Run argv to completion under policy; the job's cgroup is removed after it, whatever
    happens. Returns the job's Outcome for the caller to mirror."""
    if policy.io is not None and policy.io.klass == "rt":
        system.require_root("the realtime IO class (rt)")
    if not (policy.needs_cgroup and use_cgroup):
        report(f"applying {describe_plan(policy, None)}")
        return spawn.run_foreground(argv, policy=policy)
    system.require_root("placing the job in a cgroup with IO/CPU weights (--no-cgroup avoids it)")
    plan = priority.plan_cgroup(policy, f"run-{os.getpid()}")
    with system.Transaction("run") as tx:
        for change in cgroup_changes(plan):
            tx.apply(change)
        report(f"applying {describe_plan(policy, plan)}")
        return spawn.run_foreground(argv, policy=policy, cgroup_procs=plan.procs_files)


@dataclass(frozen=True)
class Reprioritised:
    pid: int
    threads: list[int]
    cgroups: list[str]


def reprioritise(pid: int, policy: priority.Policy, *, use_cgroup: bool = True,
                 report: Report = _quiet) -> Reprioritised:
    """`run --pid`: every thread of pid and its descendants, present ones included.

    The job outlives us, so its cgroup (``backburner/pid-PID``) is journaled and then handed
    over to the job: when the job ends, the journal is stale and `backburner restore` (or
    the next command that changes state) removes the group. If anything fails before the
    hand-over, the group is removed at once and the processes moved back out.
    """
    if not Path(f"/proc/{pid}").exists():
        raise NotFoundError(f"no process with PID {pid}", "check it with `ps -p PID`")
    if not (policy.needs_cgroup and use_cgroup):
        report(f"applying {describe_plan(policy, None)}")
        return Reprioritised(pid, priority.apply_to_tree(pid, policy), [])
    system.require_root("moving a process into a cgroup with IO/CPU weights")
    plan = priority.plan_cgroup(policy, f"pid-{pid}")
    with system.Transaction("run-pid") as tx:
        for change in cgroup_changes(plan):
            tx.apply(change)
        for path in plan.dirs:
            for proc in [pid, *priority.descendants_of(pid)]:
                try:
                    system.move_to_cgroup(path, proc)
                except SystemStateError:
                    if Path(f"/proc/{proc}").exists():
                        raise
        report(f"applying {describe_plan(policy, plan)}")
        threads = priority.apply_to_tree(pid, policy)
        tx.hand_over(pid, note=f"cgroups of PID {pid}")
    return Reprioritised(pid, threads, list(plan.dirs))


def prune_pid_cgroups(report: Report = _quiet) -> list[str]:
    """Remove `backburner/pid-N` groups left by `run --pid` whose processes have all ended."""
    removed = []
    for mount in {p.rsplit("/backburner/", 1)[0] for p in _pid_cgroups()}:
        for path in sorted(Path(mount, "backburner").glob("pid-*")):
            if re.fullmatch(r"pid-\d+", path.name) and not (path / "cgroup.procs").read_text():
                try:
                    path.rmdir()
                except OSError:
                    continue
                removed.append(str(path))
                report(f"removed empty cgroup {path}")
        system.CgroupDir(str(Path(mount, "backburner")), shared=True).undo(None, None)
    return removed


def _pid_cgroups() -> list[str]:
    found = []
    for mount in ("/sys/fs/cgroup", *map(str, Path("/sys/fs/cgroup").glob("*"))):
        found += [str(p) for p in Path(mount, "backburner").glob("pid-*")]
    return found
