"""The probe's and the loads' cgroups of a bench run on cgroup v2 where systemd owns the tree.

There bench asks systemd for a transient scope with `Delegate=yes` and moves itself into it
(`system.DelegatedScope`): the subtree below is handed to us, so our groups there are not
written behind systemd's back. Inside, bench lives in `probe` (its probe starts there as
its child, with no pre-exec work) and each policy with group settings gets a sibling
`load-N-NAME` group with its files (weights, io.prio.class). Siblings compete with each
other directly, so a load group's weight ranks it against the probe and nothing else. io
and memory are switched on below the scope (cpu too when a policy has a CPU weight): with
both, a load's writeback is charged to its own group.

Per trial, what a policy sets beyond its load's group is switched as the cell needs it:
the io.latency target of the probe's group on the device under test (the protected group
has the target; its siblings are throttled while it misses it), and io.cost on that device
(the root's io.cost.qos). Each switch is a journaled change, undone with the run.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from .. import system
from ..base.errors import UnavailableError
from ..base.quantities import slug
from ..kernel import cgroups, procfs
from ..policy import cgroup_plan
from ..policy.grammar import Policy


@dataclass
class BenchGroups:
    """Where the probe and each policy's load run, and the per-trial knobs now in force."""

    root: str  # the cgroup2 mount
    top: str  # the delegated scope's directory
    unit: str
    probe: str
    loads: dict[str, str]  # policy name -> its load group
    devno: str  # MAJ:MIN of the device under test
    latency_us: int | None = None
    io_cost: bool = False
    facts: dict[str, object] = field(default_factory=dict)

    def procs(self, policy: str) -> list[str]:
        """The cgroup.procs file a policy's load is started into ([]: bench's own, the
        probe's group)."""
        group = self.loads.get(policy)
        return [cgroups.procs_file(group)] if group else []

    def use(self, tx: system.Transaction, policy: Policy) -> None:
        """The probe group's io.latency target and io.cost on the device, as the trial's
        policy sets them; changed only when they differ from what is in force."""
        if policy.io_latency_us != self.latency_us:
            tx.apply(system.DeviceLine(os.path.join(self.probe, "io.latency"),
                                       cgroups.latency_line(self.devno, policy.io_latency_us),
                                       off="target=max"))
            self.latency_us = policy.io_latency_us
        if policy.io_cost != self.io_cost:
            tx.apply(system.DeviceLine(os.path.join(self.root, "io.cost.qos"),
                                       cgroups.qos_line(self.devno, policy.io_cost),
                                       off="enable=0"))
            self.io_cost = policy.io_cost


def needs_groups(policies: dict[str, Policy]) -> bool:
    return any(p.needs_cgroup for p in policies.values())


def place(tx: system.Transaction, policies: dict[str, Policy], device: str,
          also: set[str] | None = None) -> BenchGroups:
    """The delegated scope, bench itself in its `probe` group, the controllers the policies
    need switched on below the scope, and a load group per policy that has group settings
    (and per policy named in `also`: a throttled one, whose group is frozen)."""
    root = cgroups.unified_root()
    if root is None:
        raise AssertionError("place() is for a cgroup v2 tree systemd owns")
    owner = procfs.owner_tag(os.getpid())
    unit = f"backburner-bench-{owner}.scope"
    top = tx.apply(system.DelegatedScope(unit, os.getpid()))
    probe = os.path.join(top, "probe")
    tx.apply(system.CgroupDir(probe))
    tx.apply(system.CgroupMove(os.getpid(), probe))
    # memory with io: cgroup v2 charges writeback to the group that dirtied the pages only
    # where both controllers are on, else to the root's (cgroup-v2.rst, "Writeback").
    offered = cgroups.controllers(top)
    need = [c for c in ("io", "memory") if c in offered]
    if any(p.cpu_weight is not None for p in policies.values()):
        need.append("cpu")
    tx.apply(system.ControllersEnabled(os.path.join(top, "cgroup.subtree_control"), need))
    for pol in policies.values():  # before any load's group: one line, all undone
        if why := cgroup_plan.missing_in(probe, pol):
            raise UnavailableError(why, "use a policy without it on this kernel")
    loads = {}
    for i, (name, pol) in enumerate(policies.items()):
        if pol.needs_cgroup or name in (also or set()):
            group = os.path.join(top, f"load-{i}-{slug(name)}")
            tx.apply(system.CgroupDir(group, cgroup_plan.group_files(pol)))
            loads[name] = group
    groups = BenchGroups(root, top, unit, probe, loads, cgroups.devno_of(device))
    groups.facts = {"scope": unit, "probe": probe.removeprefix(root),
                    "loads": {k: v.removeprefix(root) for k, v in loads.items()},
                    "controllers": need, "device": groups.devno}
    return groups
