"""What the govern daemon keeps: one `Governed` record per process it changed (its rule, what
its main thread had before, the groups it was moved into and from where, its unit, the
journal entries retired at its exit) and the `Counters` of the events it saw.

Plain records apart from `governor` (the decisions): `status.json` is written from them,
and the governor's event handling reads and fills them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Counters:
    events: int = 0
    forks: int = 0
    execs: int = 0
    comms: int = 0
    exits: int = 0
    matched: int = 0
    inherited: int = 0
    gone: int = 0  # exited between the event and the action: skipped
    overflows: int = 0
    lost_events: int = 0
    rescans: int = 0
    errors: int = 0
    slow_matches: int = 0  # cmdline searches past their deadline (`pattern`): no match


@dataclass
class Governed:
    """A process we changed (or, with --dry-run, would have)."""

    pid: int
    start: int
    comm: str
    rule: str
    sets: str
    since: float
    io: str | None = None
    cpu: str | None = None
    throttled: bool = False
    parent: int | None = None  # the governed process it was forked by
    old: dict[str, int] = field(default_factory=dict)  # main thread before any change
    moves: dict[str, str] = field(default_factory=dict)  # our group -> where it came from
    entries: list[Any] = field(default_factory=list)  # journal entries, retired at exit
    prio_entry: Any = None
    unit: str | None = None  # the systemd unit its weights are set through (`Placer`)

    def to_json(self) -> dict[str, Any]:
        return {"pid": self.pid, "start": self.start, "comm": self.comm, "rule": self.rule,
                "set": self.sets, "since": self.since, "inherited_from": self.parent,
                "cgroups": sorted(self.moves), "unit": self.unit,
                "throttled": self.throttled}
