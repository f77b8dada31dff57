"""stats.stopping: the rule bench runs -- min runs, decided, out of reach, or out of budget
-- and its estimate of the trials a decision needs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from backburner import stats as bs
from backburner.stats.stopping import half_width, pairs_for


def _pairs(ratio: float, n: int, seed: int = 0, sigma: float = 0.1,
           timeouts: int = 0) -> bs.Pairs:
    rng = np.random.default_rng(seed)
    loaded, base = rng.lognormal(np.log(ratio), sigma, n), rng.lognormal(0, sigma, n)
    return bs.pair_rounds({i: (float(x), i < timeouts) for i, x in enumerate(loaded)},
                          {i: (float(x), False) for i, x in enumerate(base)})


def test_a_clear_difference_is_decided_once_min_runs_are_in() -> None:
    pairs = _pairs(3.0, 12)
    rule = bs.Rule(min_runs=10, max_runs=50)
    assert bs.decision(rule, pairs, 9) == bs.Stop.CONTINUE  # before min_runs
    assert bs.decision(rule, pairs, 10) == bs.Stop.DECIDED


def test_a_cell_on_the_band_edge_continues_until_max_runs() -> None:
    pairs = _pairs(1.1, 20, sigma=0.05)
    rule = bs.Rule(min_runs=5, max_runs=20)
    assert bs.decision(rule, pairs, 19) == bs.Stop.CONTINUE  # decidable in reach: goes on
    assert bs.decision(rule, pairs, 20) == bs.Stop.BUDGET


def _spread_about_one(spread: float, n: int, centre: float = 1.0) -> bs.Pairs:
    """Per-round log ratios evenly at the normal quantiles: centre log ``centre``, the
    given spread."""
    from scipy.special import ndtri

    d = math.log(centre) + spread * ndtri((np.arange(1, n + 1) - 0.5) / n)
    return bs.pair_rounds({i: (float(np.exp(x)), False) for i, x in enumerate(d)},
                          {i: (1.0, False) for i in range(n)})


def test_a_cell_no_budget_could_decide_stops_early_out_of_reach() -> None:
    """Spread 0.5 about a ratio of 1.1, the band's upper edge: even at the ends of the
    centre's range (the best case) 8 pairs say about 22 are needed, beyond 1.5 times 12, so
    a budget of 12 stops it at min_runs; with 2000 trials allowed it goes on."""
    pairs = _spread_about_one(0.5, 8, centre=1.1)
    assert bs.decision(bs.Rule(min_runs=8, max_runs=12), pairs, 8) == bs.Stop.OUT_OF_REACH
    assert bs.decision(bs.Rule(min_runs=8, max_runs=2000), pairs, 8) == bs.Stop.CONTINUE
    assert bs.decision(bs.Rule(min_runs=9, max_runs=12), pairs, 8) == bs.Stop.CONTINUE


def test_out_of_reach_takes_the_best_case_the_data_allow() -> None:
    """A tight cell just inside the band at 12 of 60 trials is not given up: its best case
    decides within the budget; a wide one is, where its best case needs well over it."""
    rule = bs.Rule(min_runs=6, max_runs=60)
    assert not bs.out_of_reach(rule, _pairs(1.02, 12, sigma=0.05), 0.10)
    assert not bs.out_of_reach(rule, _spread_about_one(0.1, 12), 0.10)
    # spread 0.6 on the edge: even the range's far ends need about 60 trials
    assert not bs.out_of_reach(rule, _spread_about_one(0.6, 12, centre=1.1), 0.10)
    assert bs.out_of_reach(bs.Rule(min_runs=6, max_runs=20),
                           _spread_about_one(0.6, 12, centre=1.1), 0.10)
    # the same spread well below the edge is in reach: "at most" needs only the upper end
    assert not bs.out_of_reach(bs.Rule(min_runs=6, max_runs=20),
                               _spread_about_one(0.6, 12, centre=0.7), 0.10)
    assert not bs.out_of_reach(rule, _pairs(1.0, 3, sigma=1.0), 0.10)  # too few to say


def test_timeouts_count_as_trials_and_the_sequence_stays_open_above() -> None:
    pairs = _pairs(1.0, 10, timeouts=6)
    rule = bs.Rule(min_runs=1, max_runs=10)
    assert bs.decision(rule, pairs, 10) == bs.Stop.BUDGET
    assert math.isinf(bs.paired_ratio_cs(pairs).hi)


def test_no_pair_leaves_a_cell_undecided() -> None:
    rule = bs.Rule(min_runs=1, max_runs=3)
    empty = bs.pair_rounds({0: (1.0, False)}, {1: (1.0, False)})
    assert empty.n == 0 and bs.decision(rule, empty, 1) == bs.Stop.CONTINUE


def test_half_width_falls_with_n_and_is_open_at_first() -> None:
    assert math.isinf(half_width(6, 0.95))
    assert half_width(20, 0.95) > half_width(100, 0.95) > half_width(1000, 0.95)
    assert half_width(1000, 0.95) == pytest.approx(0.15, abs=0.03)


@pytest.mark.parametrize(("spread", "margin", "expected"), [
    (0.21, math.log(1.1), 84), (0.07, math.log(1.1), 12), (0.1, 0.0, None),
    (0.3, 1e-4, None), (0.0, 0.1, 1)])
def test_pairs_for(spread: float, margin: float, expected: int | None) -> None:
    found = pairs_for(spread, margin, 0.95)
    assert found == expected
    if found is not None and spread:
        assert spread * half_width(found, 0.95) < margin <= spread * half_width(found - 1, 0.95)


def test_trials_needed_from_the_spread_and_centre_seen() -> None:
    tight = bs.trials_needed(_pairs(1.0, 30, sigma=0.05), 0.10, 0.95)
    wide = bs.trials_needed(_pairs(1.0, 30, sigma=0.15), 0.10, 0.95)
    assert tight is not None and wide is not None and tight < 30 < wide
    assert bs.trials_needed(_pairs(1.0, 2), 0.10, 0.95) is None  # too few to say


@pytest.mark.parametrize("args", [(0, 5), (6, 5), (1, 5, 1.0), (1, 5, 0.1, 1.0)])
def test_rule_refuses_nonsense(args: tuple[float, ...]) -> None:
    with pytest.raises(ValueError):
        bs.Rule(*args)  # type: ignore[arg-type]


def test_trials_needed_sees_an_outlier_as_the_sequence_does() -> None:
    """Ten tight rounds near 1.0x and one at 1.8x: at 11 pairs the sequence reaches the
    outlier and is undecided, so the estimate is beyond 11 -- where the spread (MAD) alone
    would say a handful."""
    d = [0.0, 0.01, -0.01, 0.02, -0.02, 0.005, -0.005, 0.015, -0.015, 0.0, math.log(1.8)]
    pairs = bs.pair_rounds({i: (math.exp(x), False) for i, x in enumerate(d)},
                           {i: (1.0, False) for i in range(len(d))})
    assert bs.paired_verdict(pairs).kind == bs.VerdictKind.UNDECIDED
    needed = bs.trials_needed(pairs, 0.10, 0.95)
    assert needed is not None and needed > 11
    assert pairs_for(0.015, math.log(1.1), 0.95) < 11
