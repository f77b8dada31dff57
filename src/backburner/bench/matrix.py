"""The benchmark matrix: cells (probe × preparation × scheduler × load × policy) and a fair,
seeded trial order.

Pure: data in, data out. The first rounds are warm-ups (run, stored, not counted). Every
round runs every cell once, in an order shuffled afresh per round from the recorded seed, so
slow drift of the machine spreads over all cells instead of biasing the ones that ran last.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from ..store.cell import NO_POLICY, UNLOADED, Cell


@dataclass(frozen=True)
class Slot:
    round: int
    cell: Cell
    warmup: bool = False
    #: with --load-lifetime cell: the slots of one block share one run of the load; the first
    #: slot of a block starts it and the last one stops it
    block: int = 0
    first_in_block: bool = True
    last_in_block: bool = True


def build_cells(probes: list[str], device: str, schedulers: list[str], loads: list[str],
                policies: list[str], prepares: list[str],
                only_under: dict[str, str] | None = None) -> list[Cell]:
    """The unloaded cell has no background job, so no policy: one per scheduler. A
    preparation in `only_under` (a scheduler's tunables) exists only under that scheduler."""
    only = only_under or {}
    return [Cell(probe, device, sched, load, pol, prep)
            for probe in probes for prep in prepares for sched in schedulers
            if only.get(prep, sched) == sched
            for load in loads for pol in ([NO_POLICY] if load == UNLOADED else policies)]


def plan_order(cells: list[Cell], config: Any) -> list[Slot]:
    """A plan's slots: `order` with the configuration's rounds, seed, warm-ups, and
    blocks when a load lives for a block of a cell's trials (`config.BenchConfig`)."""
    block = config.block if config.load_lifetime == "cell" else 1
    return order(cells, config.rounds, config.seed, config.warmup, block)


def order(cells: list[Cell], trials: int, seed: int, warmups: int = 1,
          block: int = 1) -> list[Slot]:
    """All slots in run order; reproducible from `seed` alone.

    Rounds 0..warmups-1 are warm-ups (unloaded cells first: a --warm run's abort limits use
    them), then `trials` counted rounds. With ``block`` > 1 (a load that lives for a whole
    block of trials) each cell's counted trials come in blocks of that many consecutive
    slots, the blocks of all cells shuffled together per pass, so drift still spreads over
    every cell.
    """
    rng = random.Random(seed)
    slots: list[Slot] = []
    for rnd in range(warmups):
        round_cells = list(cells)
        rng.shuffle(round_cells)
        round_cells.sort(key=lambda c: not c.unloaded)
        slots.extend(Slot(rnd, c, warmup=True) for c in round_cells)
    block = max(1, min(block, trials))
    first = warmups
    block_no = 0
    while first < warmups + trials:
        size = min(block, warmups + trials - first)
        pass_cells = list(cells)
        rng.shuffle(pass_cells)
        for c in pass_cells:
            block_no += 1
            for i in range(size):
                slots.append(Slot(first + i, c, block=block_no, first_in_block=i == 0,
                                  last_in_block=i == size - 1))
        first += size
    return slots
