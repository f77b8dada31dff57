"""The cgroups of a govern rule, made on its first match through the daemon's transaction:
the groups its policy's weights need (`cgroup_plan.plan_cgroup`), and a freezer group when the
rule is throttled. A controller or freezer that is missing is a problem that `status`
shows; the rule's other actions still apply."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

from .. import system
from ..base.errors import BackburnerError, SystemStateError, UnavailableError
from ..net import background, policy
from ..policy import cgroup_plan
from ..run import job
from . import throttle
from .rules import Rule, Ruleset

#: Told of a problem: (key, message), as `Governor.problem`.
Problem = Callable[[str, str], None]


@dataclass
class RuleGroups:
    """A rule's cgroups, made when it first matches."""

    dirs: list[str] = field(default_factory=list)
    freezers: list[system.CgroupFreezer] = field(default_factory=list)


def fill(groups: RuleGroups, rule: Rule, tx: system.LiveTransaction | None, problem: Problem
         ) -> None:
    """Make the rule's groups into `groups` (nothing in a dry run, or for a rule that needs
    none)."""
    if tx is None or not (rule.policy.needs_cgroup or rule.throttle):
        return
    if rule.policy.needs_cgroup:
        try:
            plan = cgroup_plan.plan_cgroup(rule.policy, f"govern-{rule.name}")
            _make(tx, rule, job.cgroup_changes(plan), groups, problem)
        except (UnavailableError, SystemStateError) as err:
            problem(f"rule {rule.name} weights", f"no cgroup weights: {err}")
    if rule.throttle:
        _make_freezer(tx, rule, groups, problem)


def _make(tx: system.LiveTransaction, rule: Rule, changes: list[system.Change], groups: RuleGroups,
          problem: Problem) -> None:
    for change in changes:
        try:
            tx.apply(change)
        except SystemStateError as err:
            problem(f"rule {rule.name} {change.describe()}", str(err))
            if not isinstance(change, system.CgroupDir) or change.shared:
                return
            continue
        if isinstance(change, system.CgroupDir) and not change.shared:
            groups.dirs.append(change.path)


def _make_freezer(tx: system.LiveTransaction, rule: Rule, groups: RuleGroups, problem: Problem
                  ) -> None:
    target = throttle.freezer_group(rule.name)
    if target is None:
        problem(f"rule {rule.name} throttle", "no cgroup freezer (v1 freezer or cgroup v2) "
                "is mounted: it cannot be paused")
        return
    path, version = target
    try:
        if path not in groups.dirs:
            before = len(groups.dirs)
            _make(tx, rule, [system.CgroupDir(os.path.dirname(path), shared=True),
                             system.CgroupDir(path, shared_parent={})], groups, problem)
            if len(groups.dirs) == before:
                return
        freezer = system.CgroupFreezer(path, version)
        tx.apply(freezer)
        groups.freezers.append(freezer)
    except SystemStateError as err:
        problem(f"rule {rule.name} throttle", f"cannot be paused: {err}")


def network_target(ruleset: Ruleset, under_systemd: bool) -> background.Target | None:
    """Where rules with `net = "background"` put their policy: the interface the default
    route leaves by, checked as `run --net` checks it (one line, before anything changes);
    None when no rule asks. Where systemd owns the cgroup tree the job's group would be
    one of ours beside its unit's: refused, as `run --net` refuses it."""
    rule = next((r for r in ruleset.rules if r.net), None)
    if rule is None:
        return None
    if under_systemd:
        raise UnavailableError(f"govern rule {rule.name}: net = \"background\" where "
                               "systemd owns the cgroup tree would put the process in a "
                               "group of ours beside its unit",
                               "remove the key; for a unit: backburner apply --unit UNIT "
                               "--net background")
    net = ruleset.net
    return background.check("background", net.dev, net.netns, net.uplink,
                            options=("[net] dev", "[net] netns", "[net] uplink"))


@dataclass
class Network:
    """The one group whose traffic is held back, shared by every rule with `net`: the
    interface takes one policy (one HTB root), made on the first match; `close` stops its
    pacer before the daemon's transaction ends and undoes the rest."""

    target: background.Target | None
    applied: policy.Applied | None = None
    failed: bool = False

    def group(self, tx: system.LiveTransaction, rule: Rule, problem: Problem) -> str | None:
        """The group's directory, made now if this is the first match; None (and a problem
        shown) where it cannot be made: the rule's other settings still apply."""
        if self.applied is not None or self.failed:
            return self.applied.group if self.applied is not None else None
        if self.target is None:
            problem(f"rule {rule.name} net", "the network policy was not checked at start "
                    "(a rule with net came with a reload): restart the daemon")
            return None
        try:
            self.applied, _procs = background.apply(tx, self.target, "govern")
        except BackburnerError as err:
            self.failed = True
            problem(f"rule {rule.name} net", f"traffic not held back: {err}")
            return None
        return self.applied.group

    def __enter__(self) -> Network:
        return self

    def __exit__(self, *_exc: object) -> None:
        if self.applied is not None:
            policy.stop(self.applied)
