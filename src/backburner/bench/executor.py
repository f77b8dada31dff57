"""The seam between the bench's rules and the machine they run on.

`runner.Bench` decides everything that can be decided from the plan and the times measured
so far: the seeded order, which slots are left on resume, warm-ups, when caches are dropped,
when a load starts, settles and stops, the abort limits and when a cell is given up. An
`Executor` only does what it is told to the machine and reports what it measured. The real
one (`machine.MachineExecutor`) builds the testbed and runs loads and probes; a scripted one
lets those rules be tested without root, in milliseconds, as hyperfine tests its benchmark
loop against a mock executor.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..store.cell import Cell
from .prepare import StepResult
from .probes import ProbeResult


@dataclass
class Measurement:
    """One probe start as the executor saw it."""

    result: ProbeResult
    window_s: float  # how long the device's counters were read around the probe
    moved: tuple[int, int]  # the device's bytes read and written in that window
    #: what the cell's preparation step and --trace found, in the order they were found
    extra: dict[str, Any] = field(default_factory=dict)
    stderr_tail: list[str] = field(default_factory=list)  # of a trial that did not succeed


class Executor(Protocol):
    """What the runner asks of the machine; each call does one thing, in the order asked."""

    def open(self) -> AbstractContextManager[dict[str, Any]]:
        """Build what the run needs (device, schedulers offered, loads laid out, cgroups);
        yields the device's facts for the run's record. Everything is undone at exit."""

    def check_alive(self) -> None:
        """Raise SystemStateError when what serves the device has died."""

    def prepare_trial(self, cell: Cell) -> StepResult | None:
        """Run the --prepare command of the cell's probe to its end, un-timed; None when
        there is none."""

    def use_scheduler(self, scheduler: str) -> None:
        """Make `scheduler` the device's IO scheduler (nothing if it already is)."""

    def drop_caches(self) -> None:
        """Drop the page cache, dentries and inodes: the next start is cold."""

    def weight_raising_s(self, scheduler: str) -> float:
        """How long `scheduler` favours a newly started queue on this device (0: not at all)."""

    def start_load(self, cell: Cell) -> None:
        """Start the cell's load under the cell's policy (never the "none" load)."""

    def settle(self, load: str, seconds: float) -> None:
        """Let the started load run for `seconds`; SystemStateError if it ended meanwhile."""

    def load_alive(self, load: str) -> bool:
        """Whether the load's process is running now."""

    def stop_load(self, load: str) -> dict[str, Any]:
        """Stop the load's process tree; what it did while it ran (its bulk work), and
        under "failure" its last lines of output when it had ended by itself, failing."""

    def measure(self, cell: Cell, limit_s: float) -> Measurement:
        """Start the cell's probe once (with its preparation step), given up at `limit_s`."""
