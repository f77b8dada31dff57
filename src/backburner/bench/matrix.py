"""The benchmark matrix: cells (scheduler × load × policy) and a fair, seeded trial order.

Pure: data in, data out. Round 0 is the warm-up (run, stored, not counted). Every round
runs every cell once, in an order shuffled afresh per round from the recorded seed, so slow
drift of the machine spreads over all cells instead of biasing the ones that ran last.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from ..cell import NO_POLICY, UNLOADED, Cell


def build_cells(probe: str, device: str, schedulers: list[str], loads: list[str],
                policies: list[str]) -> list[Cell]:
    """The unloaded cell has no background job, so no policy: one per scheduler."""
    cells = []
    for sched in schedulers:
        for load in loads:
            for pol in ([NO_POLICY] if load == UNLOADED else policies):
                cells.append(Cell(probe, device, sched, load, pol))
    return cells


@dataclass(frozen=True)
class Slot:
    round: int
    cell: Cell

    @property
    def warmup(self) -> bool:
        return self.round == 0


def order(cells: list[Cell], trials: int, seed: int, warmup: bool = True) -> list[Slot]:
    """All (round, cell) slots in run order; reproducible from `seed` alone."""
    rng = random.Random(seed)
    slots: list[Slot] = []
    for rnd in range(0 if warmup else 1, trials + 1):
        round_cells = list(cells)
        rng.shuffle(round_cells)
        if rnd == 0:  # unloaded cells warm up first (a --warm run's abort limits use them)
            round_cells.sort(key=lambda c: not c.unloaded)
        slots.extend(Slot(rnd, c) for c in round_cells)
    return slots
