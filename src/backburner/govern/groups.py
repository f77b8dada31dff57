"""The cgroups of a govern rule, made on its first match through the daemon's transaction:
the groups its policy's weights need (`priority.plan_cgroup`), and a freezer group when the
rule is throttled. A controller or freezer that is missing is a problem that `status`
shows; the rule's other actions still apply."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

from .. import job, priority, system
from ..errors import SystemStateError, UnavailableError
from . import throttle
from .rules import Rule

#: Told of a problem: (key, message), as `Governor.problem`.
Problem = Callable[[str, str], None]


@dataclass
class Groups:
    """A rule's cgroups, made when it first matches."""

    dirs: list[str] = field(default_factory=list)
    freezers: list[system.CgroupFreezer] = field(default_factory=list)


def fill(groups: Groups, rule: Rule, tx: system.LiveTransaction | None, problem: Problem
         ) -> None:
    """Make the rule's groups into `groups` (nothing in a dry run, or for a rule that needs
    none)."""
    if tx is None or not (rule.policy.needs_cgroup or rule.throttle):
        return
    if rule.policy.needs_cgroup:
        try:
            plan = priority.plan_cgroup(rule.policy, f"govern-{rule.name}")
            _make(tx, rule, job.cgroup_changes(plan), groups, problem)
        except (UnavailableError, SystemStateError) as err:
            problem(f"rule {rule.name} weights", f"no cgroup weights: {err}")
    if rule.throttle:
        _make_freezer(tx, rule, groups, problem)


def _make(tx: system.LiveTransaction, rule: Rule, changes: list[system.Change], groups: Groups,
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


def _make_freezer(tx: system.LiveTransaction, rule: Rule, groups: Groups, problem: Problem
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
                             system.CgroupDir(path)], groups, problem)
            if len(groups.dirs) == before:
                return
        freezer = system.CgroupFreezer(path, version)
        tx.apply(freezer)
        groups.freezers.append(freezer)
    except SystemStateError as err:
        problem(f"rule {rule.name} throttle", f"cannot be paused: {err}")
