"""bench.matrix: the cells of a run and their seeded, per-round shuffled order (pure)."""

from __future__ import annotations

from collections import Counter

from backburner.bench import matrix
from backburner.cell import Cell

SCHEDS = ["mq-deadline", "bfq"]
LOADS = ["none", "readers:2:seq", "install-loop"]
POLICIES = ["default", "background", "gentle"]


def _cells() -> list[Cell]:
    return matrix.build_cells("/bin/true", "testbed:1G", SCHEDS, LOADS, POLICIES)


def test_cells_unloaded_has_no_policy_and_one_per_scheduler() -> None:
    cells = _cells()
    unloaded = [c for c in cells if c.unloaded]
    assert sorted(c.scheduler for c in unloaded) == sorted(SCHEDS)
    assert {c.policy for c in unloaded} == {"-"}
    loaded = [c for c in cells if not c.unloaded]
    assert len(loaded) == len(SCHEDS) * (len(LOADS) - 1) * len(POLICIES)
    assert {(c.scheduler, c.load, c.policy) for c in loaded} == {
        (s, ld, p) for s in SCHEDS for ld in LOADS[1:] for p in POLICIES}
    assert "-" not in {c.policy for c in loaded}
    assert len(cells) == len({c.key for c in cells})  # keys identify cells
    assert all(c.probe == "/bin/true" and c.device == "testbed:1G" for c in cells)


def test_cell_key_and_label() -> None:
    c = Cell("p", "d", "bfq", "copy", "background")
    assert c.key == "p|d|bfq|copy|background"
    assert not c.unloaded and Cell("p", "d", "bfq", "none", "-").unloaded
    assert c.label == "bfq · copy · background"


def _rounds(slots: list[matrix.Slot]) -> dict[int, list[Cell]]:
    out: dict[int, list[Cell]] = {}
    for s in slots:
        out.setdefault(s.round, []).append(s.cell)
    return out


def test_order_is_a_permutation_per_round() -> None:
    cells = _cells()
    slots = matrix.order(cells, trials=4, seed=7)
    assert len(slots) == len(cells) * 5
    rounds = _rounds(slots)
    assert sorted(rounds) == [0, 1, 2, 3, 4]
    for cs in rounds.values():
        assert Counter(c.key for c in cs) == Counter(c.key for c in cells)
    # rounds are contiguous and increasing: round r is finished before r+1 starts
    assert [s.round for s in slots] == sorted(s.round for s in slots)
    # shuffled afresh per round, not one order repeated
    assert len({tuple(c.key for c in cs) for r, cs in rounds.items() if r}) > 1


def test_order_is_deterministic_for_a_seed_and_differs_across_seeds() -> None:
    cells = _cells()
    a = matrix.order(cells, trials=3, seed=42)
    assert a == matrix.order(list(cells), trials=3, seed=42)
    assert a != matrix.order(cells, trials=3, seed=43)
    seqs = {tuple((s.round, s.cell.key) for s in matrix.order(cells, 3, seed))
            for seed in range(10)}
    assert len(seqs) == 10


def test_warmup_round_first_with_unloaded_cells_first() -> None:
    cells = _cells()
    for seed in range(20):
        slots = matrix.order(cells, trials=2, seed=seed)
        n = len(cells)
        assert all(s.round == 0 and s.warmup for s in slots[:n])
        assert not any(s.warmup for s in slots[n:])
        n_unloaded = sum(c.unloaded for c in cells)
        assert all(s.cell.unloaded for s in slots[:n_unloaded])
        assert not any(s.cell.unloaded for s in slots[n_unloaded:n])


def test_counted_rounds_do_not_put_unloaded_first() -> None:
    """Only the warm-up sorts unloaded cells first; counted rounds are fully shuffled."""
    cells = _cells()
    firsts = set()
    for seed in range(30):
        for cs in list(_rounds(matrix.order(cells, 1, seed)).values())[1:]:
            firsts.add(cs[0].unloaded)
    assert firsts == {True, False}


def test_no_warmup() -> None:
    cells = _cells()
    slots = matrix.order(cells, trials=3, seed=1, warmup=False)
    assert len(slots) == 3 * len(cells)
    assert sorted(_rounds(slots)) == [1, 2, 3]
    assert not any(s.warmup for s in slots)
    assert slots[0].round == 1
