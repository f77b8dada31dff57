"""The significance rule on synthetic data with known truth, checked against scipy, plus
seeded random property tests (hypothesis is not installed)."""

from __future__ import annotations

import math
import random

import pytest
from scipy.stats import mannwhitneyu

from backburner.trace import diff
from backburner.trace.profile import Metric

COUNT = Metric("x", "count", "job")


def test_separation_p_matches_scipy_exact() -> None:
    for n_a, n_b in [(1, 1), (2, 2), (3, 3), (3, 4), (3, 5), (4, 4), (5, 5), (2, 9)]:
        a = [float(i) for i in range(n_a)]
        b = [100.0 + i for i in range(n_b)]
        ours = diff.compare_values("k", COUNT, a, b)
        ref = mannwhitneyu(a, b, alternative="two-sided", method="exact").pvalue
        assert ours is not None
        assert ours.p == pytest.approx(ref) == pytest.approx(diff.separation_p(n_a, n_b))


def test_the_rule() -> None:
    five = diff.compare_values("k", COUNT, [4, 4, 5, 4, 4], [89000, 90100, 88000, 91000, 89418])
    assert five.verdict == "changed" and five.p == pytest.approx(2 / 252)
    assert five.ratio == pytest.approx(89418 / 4) and five.delta == 89414
    three = diff.compare_values("k", COUNT, [1, 2, 3], [10, 11, 12])
    assert three.verdict == "apart" and three.p == pytest.approx(0.1)  # too few to call
    four = diff.compare_values("k", COUNT, [1, 2, 3, 4], [10, 11, 12, 13])
    assert four.verdict == "changed"
    touching = diff.compare_values("k", COUNT, [1, 2, 3, 4, 10], [10, 11, 12, 13, 14])
    assert touching.verdict == "noise"  # 10 in both: the ranges meet, not outside
    overlap = diff.compare_values("k", COUNT, [1, 5, 9, 3, 7], [2, 6, 10, 4, 8])
    assert overlap.verdict == "noise"
    ref = mannwhitneyu([1, 5, 9, 3, 7], [2, 6, 10, 4, 8], alternative="two-sided").pvalue
    assert overlap.p == pytest.approx(ref)
    assert diff.compare_values("k", COUNT, [3, 3], [3, 3, 3]) is None
    from_zero = diff.compare_values("k", COUNT, [0, 0, 0, 0], [2, 3, 2, 2])
    assert from_zero.ratio == math.inf and from_zero.verdict == "changed"


def test_score_floors() -> None:
    assert diff.score(0, 1, "count") == pytest.approx(math.log(2))
    assert diff.score(0, 0.001, "s") == pytest.approx(math.log(2))
    assert diff.score(4, 89418, "count") > diff.score(100, 3000, "count") > 0


def test_profiles_side_by_side(make_profile, make_run) -> None:
    good = make_profile("good", [make_run(i, {"futex": 4, "read": 50 + i}, nivcsw=5 + i % 2,
                                          cal=10 + i) for i in range(5)])
    bad = make_profile("bad", [make_run(i, {"sched_yield": 89000 + 100 * i, "read": 51 + i},
                                        nivcsw=3000 + i, cal=12 - i) for i in range(5)])
    d = diff.diff(good, bad)
    keys = [r.key for r in d.changed]
    assert keys[0] == "syscall:sched_yield:calls"  # biggest first
    assert "rusage:nivcsw" in keys[:5]
    assert "syscall:sched_yield:time_s" in keys
    assert "syscall:read:calls" in [r.key for r in d.noise]  # 50..54 vs 51..55
    assert "irq:CAL" in [r.key for r in d.noise]
    assert not ({r.key for r in d.changed} & {r.key for r in d.noise})
    # syscalls a side never made are 0 there, not missing
    futex = next(r for r in d.changed if r.key == "syscall:futex:calls")
    assert futex.a == (7,) * 5 and futex.b == (3,) * 5
    assert d.same > 0 and not d.only_one_side
    assert d.notes() == []
    data = d.to_dict()
    assert data["changed"][0]["ratio_infinite"] is True and data["changed"][0]["ratio"] is None


def test_notes_say_what_limits_the_diff(make_profile, make_run) -> None:
    a = make_profile("a", [make_run(0, {"read": 1})], engine="strace")
    b = make_profile("b", [make_run(0, {"read": 9}, exit_code=3)])
    b.runs[0].lost_events = 500
    d = diff.diff(a, b)
    assert not d.changed and "syscall:read:calls" in [r.key for r in d.apart]
    notes = " ".join(d.notes())
    assert "different engines" in notes and "cannot show a change" in notes
    assert "1 of 1 runs ended with status 3" in notes
    assert "B: the tracer lost events in run(s) 1" in notes


def test_untraced_profiles_do_not_invent_zero_syscalls(make_profile, make_run) -> None:
    a = make_profile("a", [make_run(i, traced=False) for i in range(4)], engine="none")
    b = make_profile("b", [make_run(i, {"read": 5}) for i in range(4)])
    d = diff.diff(a, b)
    assert all(not r.key.startswith("syscall") for r in d.changed + d.apart + d.noise)
    assert "syscall:read:calls" in d.only_one_side


def test_random_same_distribution_is_rarely_called() -> None:
    """Under no difference, a change is called with probability 2/252 (5 runs a side)."""
    rng = random.Random(1234)
    trials, called = 2000, 0
    for _ in range(trials):
        a = [rng.lognormvariate(0, 0.3) for _ in range(5)]
        b = [rng.lognormvariate(0, 0.3) for _ in range(5)]
        row = diff.compare_values("k", Metric("x", "s", "job"), a, b)
        called += row is not None and row.verdict == "changed"
    expected = trials * 2 / 252
    assert called <= expected + 4 * math.sqrt(expected) + 1


def test_random_real_shifts_are_called_and_direction_kept() -> None:
    rng = random.Random(99)
    for _ in range(500):
        base = rng.uniform(1, 1000)
        spread = base * rng.uniform(0.01, 0.1)
        a = [base + rng.uniform(-spread, spread) for _ in range(5)]
        shift = rng.choice([-1, 1]) * (2 * spread + base * rng.uniform(0.05, 2))
        b = [x + shift for x in a]
        rng.shuffle(b)
        row = diff.compare_values("k", Metric("x", "count", "job"), a, b)
        assert row is not None
        assert row.verdict == ("changed" if max(a) < min(b) or max(b) < min(a) else "noise")
        assert math.copysign(1, row.delta) == math.copysign(1, shift)
        if row.verdict == "changed":
            assert row.p == pytest.approx(2 / 252)
