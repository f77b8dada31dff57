"""What the store hands out: runs, and cells as a run stored them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .cell import Cell

TRIAL_FIELDS = (
    "round", "warmup", "status", "cold", "wall_s", "user_s", "sys_s", "max_rss_kb",
    "in_blocks", "out_blocks", "exit_code", "signal", "load_read_bps", "load_write_bps",
    "started_at", "ended_at", "extra",
)


@dataclass(frozen=True)
class StoredCell:
    """A cell as one run stored it: its row id, its run, and the shared cell model."""

    id: int
    run_id: int
    cell: Cell

    @property
    def key(self) -> str:
        return self.cell.key


@dataclass(frozen=True)
class Run:
    id: int
    uuid: str
    machine_id: str
    hostname: str
    started_at: float
    finished_at: float | None
    command: str
    config: dict[str, Any]
    seed: int
    environment: dict[str, Any]
    tool_version: str

    @property
    def machine(self) -> str:
        """How a person names the machine: its host name, else its id."""
        return self.hostname or self.machine_id[:12] or "unknown"

    @property
    def kernel(self) -> str:
        return str(self.environment.get("kernel", "unknown"))


@dataclass(frozen=True)
class Filter:
    """Which runs a report reads from a shared database."""

    run: int | None = None
    machine: str | None = None  # host name, or a prefix of the machine id
    since: float | None = None  # started at or after (epoch seconds)

    def describe(self) -> str:
        parts = [f"--run {self.run}" if self.run is not None else "",
                 f"--machine {self.machine}" if self.machine else "",
                 f"--since {self.since:.0f}" if self.since is not None else ""]
        return " ".join(p for p in parts if p) or "no filter"

    def matches(self, run: Run) -> bool:
        if self.run is not None and run.id != self.run:
            return False
        if self.machine is not None and self.machine not in (run.hostname, run.machine) \
                and not (len(self.machine) >= 6 and run.machine_id.startswith(self.machine)):
            return False
        return self.since is None or run.started_at >= self.since
