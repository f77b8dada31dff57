"""stats.band: the band a person notices -- more than 10% and more than 100 ms of the
unloaded start, never wider than ±25% -- or a band given by hand."""

from __future__ import annotations

import math

import pytest

from backburner import stats as bs
from backburner.stats import Basis


@pytest.mark.parametrize(("start_s", "tolerance", "basis"), [
    (0.05, 0.25, Basis.WIDEST),     # 100 ms would be double the start
    (0.2, 0.25, Basis.WIDEST),      # the quick preset's start: 100 ms is half of it
    (0.4, 0.25, Basis.WIDEST),      # 100 ms is a quarter: the cap and the rule agree
    (0.5, 0.2, Basis.ABSOLUTE),     # 100 ms of it
    (0.8, 0.125, Basis.ABSOLUTE),
    (1.0, 0.1, Basis.RELATIVE),     # both parts agree
    (9.0, 0.1, Basis.RELATIVE),     # the office preset's Writer window
    (60.0, 0.1, Basis.RELATIVE),
])
def test_the_band_a_person_notices(start_s: float, tolerance: float, basis: Basis) -> None:
    band = bs.noticeable(start_s)
    assert band.tolerance == pytest.approx(tolerance)
    assert band.basis == basis and band.reference_s == start_s


def test_the_band_is_never_wider_than_the_cap_nor_narrower_than_the_fraction() -> None:
    widths = [bs.noticeable(t / 100).tolerance for t in range(1, 2000)]
    assert max(widths) == bs.WIDEST == 0.25
    assert min(widths) == bs.NOTICEABLE_FRACTION == 0.10
    assert widths == sorted(widths, reverse=True)  # a longer start: never a wider band


@pytest.mark.parametrize("start_s", [None, 0.0, -1.0, math.nan, math.inf])
def test_without_a_usable_time_the_narrowest_band(start_s: float | None) -> None:
    band = bs.noticeable(start_s)
    assert (band.tolerance, band.basis, band.reference_s) == (0.10, Basis.RELATIVE, None)


def test_a_band_given_by_hand_replaces_the_rule() -> None:
    assert bs.band_for(0.2, 0.05) == bs.Band(0.05, Basis.GIVEN, 0.2)
    assert bs.band_for(0.2) == bs.noticeable(0.2)
    assert bs.band_for(None, 0.4).tolerance == 0.4  # by hand, even wider than the rule's cap
    for bad in (-0.1, 1.0, math.nan):
        with pytest.raises(ValueError, match="tolerance"):
            bs.band_for(0.2, bad)


def test_a_rule_sizes_its_band_per_cell() -> None:
    rule = bs.Rule(min_runs=8, max_runs=40)
    assert rule.band(0.2).tolerance == 0.25 and rule.band(9.0).tolerance == 0.10
    assert bs.Rule(min_runs=8, max_runs=40, tolerance=0.15).band(0.2).tolerance == 0.15
