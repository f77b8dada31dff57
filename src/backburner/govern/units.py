"""Where systemd owns the cgroup tree: a governed process's weights and pauses through the
systemd unit that holds it, never by moving it into groups of our own (which would take it
out of its unit: `systemctl stop` would no longer reach it, and systemd would count it as
gone).

- A process of a system service (an updater, a package manager's daemon) leaves its
  service where it is: the service's IOWeight=/CPUWeight= are set at runtime
  (`system.UnitWeights`), once for all of its governed processes, put back when the last
  of them is gone or govern stops.
- A process whose unit also holds interactive work (a login session's scope, a user's
  service manager, a getty, a display manager, sshd) gets a transient scope of its own in
  the low-weight slice (`system.TransientScope`); its children are born there; all of them
  go back when the last governed one is gone or govern stops.
- A throttled rule's unit (the service, or that scope) is paused with FreezeUnit
  (`system.UnitFrozen`) while the desktop waits for the disk.

The IO class and CPU policy are set on the processes themselves, as everywhere (they
protect across slices: docs/guide/systemd.md).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable
from dataclasses import dataclass

from .. import system, systemd
from ..base.errors import BackburnerError
from ..kernel import procfs
from .rules import Rule

#: Services that hold logins or a desktop: weighting one would slow the user's own work.
INTERACTIVE = ("user@*.service", "*getty*.service", "display-manager.service", "gdm*.service",
               "sddm.service", "lightdm.service", "xdm.service", "lxdm.service",
               "ssh.service", "sshd.service", "sshd@*.service", "ssh@*.service",
               "systemd-logind.service")


def interactive(unit: str) -> bool:
    """Whether a unit may hold interactive work: then its process gets a scope of its own
    (pure; the list is INTERACTIVE, and every scope: a session's, a terminal's)."""
    if not unit.endswith(".service"):
        return True
    return any(fnmatch.fnmatchcase(unit, pattern) for pattern in INTERACTIVE)


@dataclass
class Held:
    """What govern changed for one unit, and how many governed processes need it."""

    unit: str  # the service, or the scope we made
    entries: list[system.Entry]
    count: int = 0
    freezer: system.UnitFrozen | None = None


class Placer:
    """The units of governed processes, counted; changes through the daemon's
    transaction."""

    def __init__(self, tx: system.LiveTransaction, problem: Callable[[str, str], None],
                 slice_name: str = systemd.DEFAULT_SLICE) -> None:
        self.tx = tx
        self.problem = problem
        self.slice_name = slice_name
        self.held: dict[str, Held] = {}

    def place(self, pid: int, start: int, rule: Rule) -> str | None:
        """Weights (and pauses) for a newly governed process through its unit; returns the
        unit it now counts on (None: nothing to do for it, or it could not be done: a
        problem says why)."""
        weights = systemd.slice_properties(rule.policy)
        if not weights and not rule.throttle:
            return None
        from ..systemd.bus import Bus

        try:
            with Bus.connect() as bus:
                unit = bus.unit_of_pid(pid)
        except BackburnerError as err:
            self.problem(f"rule {rule.name} unit", f"PID {pid}: {err}")
            return None
        if unit.startswith("backburner-"):
            return None  # already on the back burner (`run`'s scope, or ours)
        if interactive(unit):
            return self._scope(pid, start, rule, unit, weights)
        held = self.held.get(unit)
        if held is None:
            held = Held(unit, [])
            if weights and not self._record(held, system.UnitWeights(unit, weights), rule):
                return None
            self.held[unit] = held
        self._freezer(held, rule)
        held.count += 1
        return unit

    def _scope(self, pid: int, start: int, rule: Rule, unit: str, weights: dict[str, int]
               ) -> str | None:
        name = f"backburner-govern-{pid}-{start}.scope"
        held = Held(name, [])
        pids = [pid, *procfs.descendants_of(pid)]  # children it has go with it
        if not self._record(held, system.TransientScope(name, self.slice_name, pids, weights),
                            rule, f"out of {unit}"):
            return None
        self.held[name] = held
        self._freezer(held, rule)
        held.count += 1
        return name

    def _record(self, held: Held, change: system.Change, rule: Rule, note: str = "") -> bool:
        try:
            held.entries.append(self.tx.record(change))
        except BackburnerError as err:
            self.problem(f"rule {rule.name} {change.describe()}",
                         f"{change.describe()}{' ' + note if note else ''}: {err}")
            return False
        return True

    def _freezer(self, held: Held, rule: Rule) -> None:
        if not rule.throttle or held.freezer is not None:
            return
        freezer = system.UnitFrozen(held.unit)
        if self._record(held, freezer, rule):
            held.freezer = freezer

    def hold(self, unit: str | None) -> None:
        """One more governed process counts on `unit` (a child born of a governed one)."""
        if unit is not None and unit in self.held:
            self.held[unit].count += 1

    def release(self, unit: str | None) -> None:
        """A governed process is gone: the last one of a unit puts the unit back."""
        held = self.held.get(unit) if unit is not None else None
        if held is None:
            return
        held.count -= 1
        if held.count > 0:
            return
        del self.held[held.unit]
        for entry in reversed(held.entries):
            try:
                self.tx.undo_one(entry)
            except BackburnerError as err:
                self.problem(f"unit {held.unit}", f"putting back {entry.change.describe()}: "
                             f"{err}")

    def freezers(self) -> list[system.UnitFrozen]:
        return [h.freezer for h in self.held.values() if h.freezer is not None]

