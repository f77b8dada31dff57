"""bench.matrix: the cells of a run and their seeded, per-round shuffled order (pure)."""

from __future__ import annotations

from collections import Counter

from backburner.bench import matrix
from backburner.store.cell import Cell

SCHEDS = ["mq-deadline", "bfq"]
LOADS = ["none", "readers:2:seq", "install-loop"]
POLICIES = ["default", "background", "gentle"]


def _cells() -> list[Cell]:
    return matrix.build_cells(["/bin/true"], "testbed:1G", SCHEDS, LOADS, POLICIES, ["none"])


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


def test_no_warmup_and_several() -> None:
    cells = _cells()
    slots = matrix.order(cells, trials=3, seed=1, warmups=0)
    assert len(slots) == 3 * len(cells)
    assert sorted(_rounds(slots)) == [0, 1, 2]
    assert not any(s.warmup for s in slots)
    slots = matrix.order(cells, trials=2, seed=1, warmups=3)
    assert [s.round for s in slots if s.warmup] == [r for r in range(3) for _ in cells]
    assert sorted({s.round for s in slots if not s.warmup}) == [3, 4]


def test_probes_and_preparations_are_dimensions() -> None:
    cells = matrix.build_cells(["a", "b"], "d", ["bfq"], ["none", "copy"], ["default"],
                               ["none", "replay"])
    assert len(cells) == 2 * 2 * 2 and len({c.key for c in cells}) == 8
    assert {(c.probe, c.prepare) for c in cells} == {
        (p, r) for p in "ab" for r in ("none", "replay")}
    replay = next(c for c in cells if c.prepare == "replay" and not c.unloaded)
    assert replay.baseline() == Cell(replay.probe, "d", "bfq", "none", "-", "replay")


def test_blocks_keep_a_cells_trials_together() -> None:
    """--load-lifetime cell: each cell's counted trials come in blocks of consecutive slots
    (one run of the load), the blocks of all cells shuffled per pass."""
    cells = _cells()
    slots = matrix.order(cells, trials=6, seed=3, warmups=1, block=4)
    counted = [s for s in slots if not s.warmup]
    assert Counter(s.cell.key for s in counted) == {c.key: 6 for c in cells}
    blocks: dict[int, list[matrix.Slot]] = {}
    for s in counted:
        blocks.setdefault(s.block, []).append(s)
    for members in blocks.values():
        assert len({s.cell.key for s in members}) == 1
        assert [s.first_in_block for s in members] == [True] + [False] * (len(members) - 1)
        assert [s.last_in_block for s in members] == [False] * (len(members) - 1) + [True]
        rounds = [s.round for s in members]
        assert rounds == list(range(rounds[0], rounds[0] + len(rounds)))
    assert sorted(len(m) for m in blocks.values()) == sorted([4, 2] * len(cells))
    # consecutive in the run order, not just in round numbers
    positions = {id(s): i for i, s in enumerate(counted)}
    for members in blocks.values():
        idx = [positions[id(s)] for s in members]
        assert idx == list(range(idx[0], idx[0] + len(idx)))


def test_one_trial_blocks_are_the_plain_order() -> None:
    cells = _cells()
    assert matrix.order(cells, 3, 5) == matrix.order(cells, 3, 5, warmups=1, block=1)
