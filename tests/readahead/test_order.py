"""Read orders and their cost (pure): exact small cases and seeded random checks against a
direct model of a disk head."""

from __future__ import annotations

import random

import pytest

from backburner.readahead.order import (
    CHUNK,
    GAP,
    Piece,
    access_order,
    ascending_fraction,
    chunks,
    coalesce,
    physical_order,
    seeks,
    span,
    within_budget,
)

K = 4096


def test_physical_order_sorts_and_joins() -> None:
    pieces = [Piece(0, 0, K, 10 * K), Piece(1, 0, K, 2 * K), Piece(0, K, K, 11 * K),
              Piece(2, 0, K, None)]
    assert physical_order(pieces) == [Piece(2, 0, K, None), Piece(1, 0, K, 2 * K),
                                      Piece(0, 0, 2 * K, 10 * K)]


def test_hard_links_are_read_once_and_cost_no_seek() -> None:
    a, b = Piece(0, 0, K, 8 * K), Piece(5, 0, K, 8 * K)  # one inode, two names
    assert physical_order([a, b]) == [a]
    assert seeks([a, b]) == 1
    assert ascending_fraction([a, b]) == 1.0


def test_coalesce_only_what_continues() -> None:
    assert coalesce([Piece(0, 0, K, 0), Piece(0, K, K, 5 * K)]) == [Piece(0, 0, K, 0),
                                                                   Piece(0, K, K, 5 * K)]
    assert coalesce([Piece(0, 0, K, 0), Piece(1, K, K, K)]) == [Piece(0, 0, K, 0),
                                                               Piece(1, K, K, K)]
    assert coalesce([Piece(0, 0, K), Piece(0, K, K), Piece(0, 0, 0)]) == [Piece(0, 0, 2 * K)]


def test_access_order_is_file_then_offset() -> None:
    pieces = [Piece(1, K, K, 0), Piece(0, 5 * K, K, 9 * K), Piece(1, 0, K, 50 * K)]
    assert access_order(pieces) == [Piece(0, 5 * K, K, 9 * K), Piece(1, 0, K, 50 * K),
                                    Piece(1, K, K, 0)]


def test_seeks_and_fraction_small_cases() -> None:
    sweep = [Piece(0, 0, K, 0), Piece(1, 0, K, K), Piece(2, 0, K, 2 * K + GAP)]
    assert seeks(sweep) == 1
    assert ascending_fraction(sweep) == 1.0
    jumpy = [Piece(0, 0, K, 100 * K), Piece(1, 0, K, 0), Piece(2, 0, 2 * K, 200 * K)]
    assert seeks(jumpy) == 3
    assert ascending_fraction(jumpy) == pytest.approx(0.5)  # 200 K - K is more than GAP
    assert seeks([Piece(0, 0, K, None), Piece(1, 0, K, None)]) == 2
    assert ascending_fraction([]) == 1.0
    assert span(sweep) == 3 * K + GAP


def _head_model(pieces: list[Piece], gap: int) -> tuple[int, float]:
    """Seeks and the best ascending run, the slow and obvious way: the head covers
    [lo, hi) since its last seek; reading inside that or up to `gap` beyond continues."""
    n, runs, cur, lo, hi = 0, [], 0, None, 0
    for p in pieces:
        cont = lo is not None and p.physical is not None and lo <= p.physical <= hi + gap
        if not cont:
            n += 1
            runs.append(cur)
            cur = 0
            lo = p.physical
            hi = 0 if p.physical is None else p.physical + p.length
        else:
            hi = max(hi, p.physical + p.length)
        cur += p.length
    runs.append(cur)
    total = sum(p.length for p in pieces)
    return n, (max(runs) / total if total else 1.0)


@pytest.mark.parametrize("seed", range(20))
def test_random_orders_match_the_model(seed: int) -> None:
    rng = random.Random(seed)
    pieces = [Piece(i, 0, rng.randint(1, 40) * K,
                    None if rng.random() < 0.1 else rng.randint(0, 2000) * K)
              for i in range(rng.randint(1, 60))]
    for order in (pieces, physical_order(pieces), access_order(pieces)):
        n, frac = _head_model(order, GAP)
        assert seeks(order) == n
        assert ascending_fraction(order) == pytest.approx(frac)
    ordered = physical_order(pieces)
    assert seeks(ordered) <= seeks(pieces)
    known = [p for p in ordered if p.physical is not None]
    assert [p.physical for p in known] == sorted(p.physical for p in known)
    distinct = {(p.physical, p.length) for p in pieces if p.physical is not None}
    unknown = sum(p.length for p in pieces if p.physical is None)
    assert sum(p.length for p in ordered) == unknown + sum(ln for _, ln in distinct)


def test_budget_keeps_what_comes_first() -> None:
    ranges = [[(0, 10)], [(0, 5), (20, 5)], [(0, 100)]]
    assert within_budget(ranges, None) == (ranges, False)
    assert within_budget(ranges, 17) == ([[(0, 10)], [(0, 5), (20, 2)], []], True)
    assert within_budget(ranges, 120) == (ranges, False)
    assert within_budget(ranges, 0) == ([[], [], []], True)


def test_chunks_cover_the_piece() -> None:
    p = Piece(3, K, 2 * CHUNK + 5, 77 * K)
    cs = chunks(p)
    assert [c.length for c in cs] == [CHUNK, CHUNK, 5]
    assert [c.logical for c in cs] == [K, K + CHUNK, K + 2 * CHUNK]
    assert [c.physical for c in cs] == [77 * K, 77 * K + CHUNK, 77 * K + 2 * CHUNK]
    assert chunks(Piece(0, 0, 5, None), 2) == [Piece(0, 0, 2), Piece(0, 2, 2), Piece(0, 4, 1)]
