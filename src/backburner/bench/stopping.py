"""Which cells of a sequential run still need trials: the runner's side of `stats.stopping`.

The trial order is the fixed-count one for ``max_runs`` rounds (seeded, reshuffled per round),
and cells that no longer need trials have their slots skipped, so the undecided cells stay
interleaved as before. A loaded cell stops once `stats.decision` says it is decided (and
stays stopped: its interval is valid whatever happens later) or out of reach; it is judged
on its rounds paired with its baseline's (`stats.paired`). Its unloaded baseline goes on
while any cell judged against it needs trials. The time budget stops every cell alike, at the
start of a block, so a load started for a block always runs it to its end.

What stopped each cell, and why, is kept for the run's record (`reasons`): "decided",
"out-of-reach", "max-runs", "max-time", or "aborted" (given up after its timeouts, as in a
fixed-count run); the report says it of every cell that stopped undecided.
"""

from __future__ import annotations

import math
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ..store.cell import Cell
from .matrix import Slot

if TYPE_CHECKING:  # numpy (and its BLAS threads) only once a decision is asked for
    from .. import stats


class Stopper:
    """The samples of a sequential run so far, and from them which slots to skip."""

    def __init__(self, cells: Iterable[Cell], rule: stats.Rule, max_time_s: float | None,
                 cold: bool, clock: Callable[[], float] | None = None) -> None:
        self.cells = list(cells)
        self.rule = rule
        self.max_time_s = max_time_s
        self.cold = cold
        self.clock = clock or time.monotonic
        self.started: float | None = None
        #: per cell, per round: the trial's time and whether it is a timeout's limit
        self.timed: dict[str, dict[int, stats.paired.Timed]] = defaultdict(dict)
        self.trials: dict[str, int] = defaultdict(int)
        self.reasons: dict[str, str] = {}
        self._block: tuple[str, int] | None = None
        self._skip_block = False

    # --- what was measured ----------------------------------------------------------------

    def add(self, cell: Cell, trial: dict[str, Any], warmup: bool, round_no: int) -> None:
        """A counted trial's outcome in its round: a time, a timeout's limit, or only a
        count (failed, aborted)."""
        if warmup or bool(trial.get("cold")) != self.cold:
            return
        key = cell.key
        self.trials[key] += 1
        status, wall = trial.get("status"), trial.get("wall_s")
        if status == "ok" and wall is not None and wall > 0:
            self.timed[key][round_no] = (float(wall), False)
        elif status == "timeout":
            limit = wall if wall is not None else (trial.get("extra") or {}).get("limit_s")
            if isinstance(limit, int | float) and math.isfinite(limit) and limit > 0:
                self.timed[key][round_no] = (float(limit), True)
        elif status == "aborted":  # given up after its timeouts: more slots would be aborted
            self.reasons.setdefault(key, "aborted")

    # --- what to skip ---------------------------------------------------------------------

    def skips(self, slot: Slot) -> bool:
        """Whether to skip this slot: decided once per block (a block is never cut short),
        warm-ups never skipped."""
        if slot.warmup:
            return False
        if self.started is None:
            self.started = self.clock()
        block = (slot.cell.key, slot.block)
        if block != self._block:
            self._block = block
            self._skip_block = self._stops(slot.cell)
        return self._skip_block

    def _stops(self, cell: Cell) -> bool:
        key = cell.key
        if key in self.reasons:
            return True
        if self.trials[key] >= self.rule.max_runs:
            self.reasons[key] = "max-runs"
        elif self.max_time_s is not None and self.started is not None \
                and self.clock() - self.started >= self.max_time_s:
            self.reasons[key] = "max-time"
        elif self.trials[key] >= self.rule.min_runs and (reason := self._done(cell)):
            self.reasons[key] = reason
        return key in self.reasons

    def _done(self, cell: Cell) -> str | None:
        """A loaded cell: "decided" or "out-of-reach" once `stats.decision` says so, against
        the band its baseline's median so far sizes. A baseline: "decided" once no cell
        judged against it needs more trials."""
        if not cell.unloaded:
            from .. import stats

            base = self.timed[cell.baseline().key]
            pairs = stats.pair_rounds(self.timed[cell.key], base)
            times = [t for t, _ in base.values()]
            reference = float(statistics.median(times)) if times else None
            stop = stats.decision(self.rule, pairs, self.trials[cell.key], reference)
            return {stats.Stop.DECIDED: "decided",
                    stats.Stop.OUT_OF_REACH: "out-of-reach"}.get(stop)
        judged = [c for c in self.cells if not c.unloaded and c.baseline() == cell]
        return "decided" if all(self._stops(c) for c in judged) else None

    def deadline(self) -> float | None:
        """When the time budget ends, on this stopper's clock (None: no budget, or the
        trials have not begun)."""
        if self.max_time_s is None or self.started is None:
            return None
        return self.started + self.max_time_s

    def finish(self) -> dict[str, str]:
        """Every cell's reason to have stopped: the ones that ran out of slots ran out of
        rounds (max-runs)."""
        for cell in self.cells:
            if cell.key not in self.reasons:
                self._stops(cell)
            self.reasons.setdefault(cell.key, "max-runs")
        return dict(self.reasons)
