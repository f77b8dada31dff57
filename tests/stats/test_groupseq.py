"""stats.groupseq: the looks a run with a horizon can stop at, and the interval that holds
at all of them at once."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from backburner import stats as bs
from backburner.stats.groupseq import CENSORED_SHARE, Design, half_width


def _pairs(d: list[float] | np.ndarray, timeouts: int = 0) -> bs.Pairs:
    return bs.pair_rounds({i: (float(math.exp(x)), i < timeouts) for i, x in enumerate(d)},
                          {i: (1.0, False) for i in range(len(d))})


def test_the_looks_are_every_fourth_pair_from_min_runs_and_max_runs() -> None:
    assert Design(8, 24).looks == (8, 12, 16, 20, 24)
    assert Design(6, 100).looks[-2:] == (98, 100) and len(Design(6, 100).looks) == 25
    assert Design(5, 5).looks == (5,)
    assert Design(8, 24).alpha == pytest.approx(0.01)
    assert Design(8, 24).look(7) is None and Design(8, 24).look(15) == 12


def test_the_interval_is_the_t_interval_of_the_last_look_at_its_alpha() -> None:
    d = np.random.default_rng(3).normal(0.05, 0.1, 14)
    design = Design(8, 24)
    r = bs.paired_ratio_gs(_pairs(d), design)
    seen = d[:12]  # 14 pairs: the look at 12 holds until the one at 16
    half = sps.t.ppf(1 - 0.01 * (1 - CENSORED_SHARE) / 2, 11) * seen.std(ddof=1) / math.sqrt(12)
    assert r.method == bs.GROUP_SEQUENTIAL_METHOD == "paired-group-sequential"
    assert math.log(r.ratio) == pytest.approx(seen.mean())
    assert (math.log(r.lo), math.log(r.hi)) == pytest.approx((seen.mean() - half,
                                                              seen.mean() + half))
    assert r == bs.paired_ratio_gs(_pairs(d[:12]), design)
    assert half_width(14, design) == pytest.approx(half / seen.std(ddof=1))


def test_before_the_first_look_it_is_open() -> None:
    r = bs.paired_ratio_gs(_pairs([0.1] * 7), Design(8, 24))
    assert (r.lo, r.hi) == (0.0, math.inf) and math.isnan(r.ratio)


def test_within_its_horizon_it_is_narrower_than_the_sequence() -> None:
    d = np.random.default_rng(5).normal(0.0, 0.13, 24)
    for n in (8, 12, 16, 20, 24):
        gs = bs.paired_ratio_gs(_pairs(d[:n]), Design(8, 24))
        cs = bs.paired_ratio_cs(_pairs(d[:n]))
        assert math.log(gs.hi / gs.lo) < math.log(cs.hi / cs.lo)


def test_a_timeout_takes_the_order_statistic_interval_open_on_its_side() -> None:
    """A loaded timeout: its d is only a lower bound, so the interval is the
    order-statistic one, its lower end from the bounds, its upper end open once timeouts
    reach it; far beyond the band it is still "slower"."""
    d = np.random.default_rng(7).normal(math.log(3.0), 0.1, 24)
    few = bs.paired_ratio_gs(_pairs(d, timeouts=2), Design(8, 24))
    assert few.lo > 2.0 and math.isfinite(few.hi)
    assert few.lo == pytest.approx(math.exp(np.sort(d)[3]))  # k = 4 at 0.001, n = 24
    v = bs.paired_verdict(_pairs(d, timeouts=6), design=Design(8, 24))
    assert v.kind == bs.VerdictKind.SLOWER and v.open_above
    assert v.ratio.method == bs.GROUP_SEQUENTIAL_METHOD


def test_pairs_count_along_rounds_in_round_order() -> None:
    """The looks take the first pairs in round order, so round 10 comes after round 9."""
    pairs = bs.pair_rounds({i: (float(i + 1), False) for i in range(12)},
                           {i: (1.0, False) for i in range(12)})
    assert list(np.exp(pairs.d)) == pytest.approx(list(range(1, 13)))


def test_a_design_refuses_nonsense() -> None:
    with pytest.raises(ValueError):
        Design(0, 5)
    with pytest.raises(ValueError):
        Design(6, 5)
