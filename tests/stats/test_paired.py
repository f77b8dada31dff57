"""stats.paired: the rounds' paired ratios and their confidence sequence (its validity under
stopping is measured in test_simulation.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from backburner import stats as bs


def _rounds(values: list[float], open_at: tuple[int, ...] = ()) -> dict[int, tuple[float, bool]]:
    return {i: (v, i in open_at) for i, v in enumerate(values)}


def test_pairs_are_the_rounds_both_cells_have_in_round_order() -> None:
    loaded = {3: (4.0, False), 1: (2.0, False), 7: (9.0, False)}
    base = {1: (1.0, False), 3: (2.0, False), 5: (1.0, False)}
    pairs = bs.pair_rounds(loaded, base)
    assert pairs.n == 2 and pairs.d == pytest.approx([math.log(2.0), math.log(2.0)])


def test_the_sequence_is_the_median_cs_of_the_log_ratios() -> None:
    rng = np.random.default_rng(4)
    a, b = rng.lognormal(np.log(2), 0.2, 40), rng.lognormal(0, 0.2, 40)
    r = bs.paired_ratio_cs(bs.pair_rounds(_rounds(list(a)), _rounds(list(b))))
    lo, hi = bs.median_cs(np.log(a) - np.log(b), 0.95)
    assert (r.lo, r.hi) == pytest.approx((math.exp(lo), math.exp(hi)))
    assert r.ratio == pytest.approx(math.exp(np.median(np.log(a / b))))
    assert r.method == bs.PAIRED_METHOD == "paired-confidence-sequence" and r.lo < 2 < r.hi


def test_pairing_narrows_the_interval_against_two_medians_box() -> None:
    rng = np.random.default_rng(5)
    a, b = rng.lognormal(0, 0.1, 30), rng.lognormal(0, 0.1, 30)
    paired = bs.paired_ratio_cs(bs.pair_rounds(_rounds(list(a)), _rounds(list(b))))
    box = bs.ratio_cs(a, b)
    assert math.log(paired.hi / paired.lo) < 0.8 * math.log(box.hi / box.lo)


def test_drift_shared_by_a_round_cancels() -> None:
    """Every round 3x slower than the one before it for both cells: the medians' box is
    lost in the drift, the rounds' ratios are not."""
    drift = [3.0 ** i for i in range(20)]
    loaded = [2.0 * x * (1.01 if i % 2 else 0.99) for i, x in enumerate(drift)]
    r = bs.paired_ratio_cs(bs.pair_rounds(_rounds(loaded), _rounds(drift)))
    assert 1.9 < r.lo < r.hi < 2.1


def test_timeouts_make_bounds_and_leave_their_end_open() -> None:
    """A loaded timeout: d at least its bound, so the upper end may open; a baseline one:
    d at most its bound, so the lower end may."""
    base = [1.0] * 12
    loaded_to = bs.pair_rounds(_rounds([2.0] * 12, open_at=tuple(range(7))), _rounds(base))
    r = bs.paired_ratio_cs(loaded_to)
    assert math.isinf(r.hi) and r.lo == pytest.approx(2.0)
    assert bs.paired_verdict(loaded_to).lower_bound
    base_to = bs.pair_rounds(_rounds([2.0] * 12), _rounds(base, open_at=tuple(range(7))))
    r = bs.paired_ratio_cs(base_to)
    assert r.lo == 0.0 and r.hi == pytest.approx(2.0)
    assert not bs.paired_verdict(base_to).lower_bound


def test_too_few_or_no_pairs_leave_it_open() -> None:
    r = bs.paired_ratio_cs(bs.pair_rounds(_rounds([2.0] * 5), _rounds([1.0] * 5)))
    assert (r.lo, r.hi) == (0.0, math.inf)
    none = bs.paired_ratio_cs(bs.pair_rounds({}, {}))
    assert math.isnan(none.ratio) and (none.lo, none.hi) == (0.0, math.inf)
    assert bs.paired_verdict(bs.pair_rounds({}, {})).kind == bs.VerdictKind.UNDECIDED


@pytest.mark.parametrize("bad", [0.0, -1.0, math.inf, math.nan])
def test_a_time_that_is_no_time_is_refused(bad: float) -> None:
    with pytest.raises(ValueError, match="positive and finite"):
        bs.pair_rounds({0: (bad, False)}, {0: (1.0, False)})
