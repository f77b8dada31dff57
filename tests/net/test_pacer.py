"""net.pacer's rules, pure: the window's delay rule and its floor and ceiling, the window
that follows the ACK class's rate, and LEDBAT++'s slowdown schedule."""

from __future__ import annotations

import pytest

from backburner.net import policy
from backburner.net.pacer import Rule, Slowdown, WindowRule


def test_window_rule_grows_on_an_empty_queue_and_shrinks_on_a_long_one() -> None:
    rule = WindowRule()
    assert rule.next_window(10_000, 0.0, 2) == pytest.approx(10_800)
    assert rule.next_window(10_000, 0.040, 2) == pytest.approx(9_000)
    assert rule.next_window(10_000, None, 2) == pytest.approx(9_000)  # a lost echo
    assert rule.next_window(3_000, 0.5, 4) == 4 * rule.floor_bytes  # a segment each
    assert rule.next_window(rule.ceiling_bytes, 0.0, 1) == rule.ceiling_bytes
    assert Rule().factor(0.010) == pytest.approx(1.04)


def test_window_follows_the_ack_rate_over_the_path_and_a_margin() -> None:
    rule = WindowRule(margin_s=0.05)
    # 8 Mbit/s for 50 ms of path and 50 ms of margin: 100 kB, for any number sharing it
    assert rule.follow(8_000_000, 0.050, 4) == pytest.approx(100_000)
    assert rule.follow(400_000, 0.0, 4) == 4 * rule.floor_bytes
    assert policy.window_values(100_000, 4, rule) == (25_000, 17)
    assert policy.window_values(1_000, 4, rule) == (rule.floor_bytes, 1)
    assert policy.window_values(0, 4, rule) == (0, 0)  # no evidence yet: the kernel's


def test_slowdown_drops_to_the_floor_now_and_then_and_comes_back() -> None:
    s = Slowdown(first_s=2.0, every_s=20.0, length_s=0.5)
    normal = iter(range(100, 200))
    got = [s.step(t, 5000.0, 1448.0, lambda: float(next(normal)))
           for t in (0.0, 1.0, 2.0, 2.2, 2.6, 3.0, 21.9, 22.0, 22.4, 22.5)]
    assert got == [100, 101, 1448, 1448, 5000, 102, 103, 1448, 1448, 5000]
