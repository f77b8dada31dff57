"""stats.sequential: the median's confidence sequence and the ratio's interval made from two
of them (their validity under optional stopping is measured in test_simulation.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from backburner import stats as bs


def test_kept_counts_are_symmetric_and_narrow_with_n() -> None:
    widths = []
    for n in (8, 20, 50, 100, 400):
        first, last = bs.accepted_counts(n, 0.975)
        assert first + last == n  # symmetric about n/2
        widths.append((last - first) / n)
    assert widths == sorted(widths, reverse=True) and widths[-1] < 0.2


def test_kept_counts_are_where_the_martingale_is_under_one_over_alpha() -> None:
    from scipy.special import betaln

    n, alpha = 30, 0.05
    first, last = bs.accepted_counts(n, 1 - alpha)

    def log_m(j: int) -> float:
        return betaln(0.5 + j, 0.5 + n - j) - betaln(0.5, 0.5) + n * math.log(2)

    assert log_m(first) < -math.log(alpha) <= log_m(first - 1)
    assert log_m(last) < -math.log(alpha) <= log_m(last + 1)


def test_median_cs_is_open_with_too_few_samples_and_wider_than_fixed_n() -> None:
    assert bs.median_cs([1.0, 2.0, 3.0], 0.95) == (-math.inf, math.inf)
    x = np.random.default_rng(1).lognormal(0, 0.3, 40)
    lo, hi = bs.median_cs(x, 0.95)
    fixed = bs.order_statistic_ci(x, 0.95)
    assert fixed is not None and lo <= fixed[0] < fixed[1] <= hi
    assert lo in x and hi in x


def test_median_cs_takes_timeouts_at_their_limit_below_and_unbounded_above() -> None:
    x = np.arange(1.0, 31.0)
    lo, hi = bs.median_cs(x[:20], 0.95, censored=[50.0] * 10)
    assert lo == bs.median_cs(np.concatenate([x[:20], [50.0] * 10]), 0.95)[0]
    assert math.isinf(hi)  # a timeout is that order statistic


def test_ratio_cs_combines_the_two_sequences_at_half_alpha_each() -> None:
    rng = np.random.default_rng(2)
    a, b = rng.lognormal(np.log(2), 0.1, 60), rng.lognormal(0, 0.1, 60)
    r = bs.ratio_cs(a, b, confidence=0.95)
    (la, ha), (lb, hb) = bs.median_cs(a, 0.975), bs.median_cs(b, 0.975)
    assert (r.lo, r.hi) == pytest.approx((la / hb, ha / lb))
    assert r.method == bs.SEQUENTIAL_METHOD == "confidence-sequence"
    assert r.ratio == pytest.approx(np.median(a) / np.median(b))
    assert r.lo < 2 < r.hi


def test_ratio_cs_is_open_while_a_sequence_is() -> None:
    r = bs.ratio_cs([2.0, 2.1, 2.2], [1.0, 1.1, 1.2])
    assert (r.lo, r.hi) == (0.0, math.inf)


def test_ratio_cs_refuses_a_zero_baseline() -> None:
    with pytest.raises(ValueError, match="not positive"):
        bs.ratio_cs([1.0, 2.0], [0.0, 0.0, 0.0])


def test_sequential_verdict_reads_the_sequence_against_the_band() -> None:
    rng = np.random.default_rng(3)
    v = bs.sequential_verdict(rng.lognormal(np.log(3), 0.1, 30), rng.lognormal(0, 0.1, 30))
    assert v.kind == bs.VerdictKind.SLOWER and v.ratio.method == "confidence-sequence"
    same = bs.sequential_verdict(rng.lognormal(0, 0.02, 200), rng.lognormal(0, 0.02, 200))
    assert same.kind == bs.VerdictKind.INDISTINGUISHABLE
    few = bs.sequential_verdict(rng.lognormal(np.log(3), 0.1, 5), rng.lognormal(0, 0.1, 5))
    assert few.kind == bs.VerdictKind.UNDECIDED  # too few trials for any sequence
