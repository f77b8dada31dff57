"""A cell of the benchmark matrix: the one model the matrix, store, statistics, report and
plots share.

A cell is what a trial measures: a probe (by its label), on a device, under a scheduler, with
a background load run at a policy, after an optional preparation step. Its `key` is its
identity across runs and databases; dimensions added later only enter the key when they are
not at their default, so the keys of older databases stay valid.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

UNLOADED = "none"
NO_POLICY = "-"
NO_PREPARE = "none"
#: The policy of a cell whose load a `backburner govern` daemon puts on the back burner by
#: rule (`bench --policy govern`): not a policy `run` or `apply` knows, but the way it is
#: applied. The rule bench writes gives the load GOVERNED_RULE_POLICY.
GOVERNED = "govern"
GOVERNED_RULE_POLICY = "background"
#: The device of a network study's cells is its slow link, ``link:RATE:DELAY:BUFFER``
#: (`bench --net-link`), and their scheduler the link's queue discipline.
LINK_PREFIX = "link:"


@dataclass(frozen=True, order=True)
class Cell:
    probe: str
    device: str
    scheduler: str
    load: str
    policy: str
    prepare: str = NO_PREPARE

    @property
    def key(self) -> str:
        parts = [self.probe, self.device, self.scheduler, self.load, self.policy]
        if self.prepare != NO_PREPARE:
            parts.append(f"prepare={self.prepare}")
        return "|".join(parts)

    @property
    def unloaded(self) -> bool:
        return self.load == UNLOADED

    @property
    def network(self) -> bool:
        """A network study's cell: measured over a slow link, not on a disk."""
        return self.device.startswith(LINK_PREFIX)

    @property
    def label(self) -> str:
        """What tells cells of one probe and device apart, for tables and plots."""
        parts = [self.scheduler, self.load, self.policy]
        if self.prepare != NO_PREPARE:
            parts.append(f"prepare {self.prepare}")
        return " \u00b7 ".join(parts)

    def baseline(self) -> Cell:
        """The unloaded cell a loaded one is judged against: same everything, no load."""
        return Cell(self.probe, self.device, self.scheduler, UNLOADED, NO_POLICY, self.prepare)

    def as_dict(self) -> dict[str, str]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


DIMENSIONS = tuple(f.name for f in fields(Cell))
