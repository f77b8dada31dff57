"""net.pacer's rules, pure: the window's delay rule and its floor and ceiling, the window
that follows the ACK class's rate, and LEDBAT++'s slowdown schedule; and the controller
on the testbed, when the path to the peer goes and comes back."""

from __future__ import annotations

import logging
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import TIMEOUT, wait_for

from backburner import system
from backburner.net import policy, testbed
from backburner.net.pacer import Pacer, Rule, Slowdown, WindowRule


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


def _ip(bed: testbed.Testbed, *args: str) -> None:
    subprocess.run(["ip", "-n", bed.client_ns, *args], check=True, timeout=TIMEOUT)


def _answered_since(pacer: Pacer, since: float) -> int:
    return sum(1 for t, _v, queue in list(pacer.history) if t > since and queue is not None)


@pytest.mark.root
@pytest.mark.timeout(90)
def test_the_pacer_survives_its_path_going_and_adapts_again_when_it_returns(
        bed: testbed.Testbed, cgroup2_group: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The client's address removed under a running download (no route to the peer: the
    echo's send fails with ENETUNREACH) and put back, then its link set down and up: the
    pacer says so in one line (the same reason twice is said once), its thread lives on,
    and once the path is back its echoes are answered and the budgets move again."""
    caplog.set_level(logging.WARNING, logger="backburner.net.pacer")
    address = f"{testbed.CLIENT_ADDR}/24"
    with system.Transaction("net-pacer") as tx:
        applied = policy.background(tx, bed.client_ns, bed.client_dev, None,
                                    str(cgroup2_group))
        pacer = applied.pacer
        assert pacer is not None
        load = testbed.client(bed, [sys.executable, "-m", "backburner.net.client", "download",
                                    testbed.SERVER_ADDR, str(testbed.PORT), "60"],
                              cgroup_procs=(str(cgroup2_group / "cgroup.procs"),))
        try:
            wait_for(lambda: _answered_since(pacer, 0.0) >= 5, what="the first echoes")
            _ip(bed, "addr", "del", address, "dev", bed.client_dev)
            gone = time.monotonic()
            wait_for(lambda: caplog.records, what="the pacer's word")
            time.sleep(1.0)
            assert pacer.alive and _answered_since(pacer, gone) == 0
            _ip(bed, "addr", "add", address, "dev", bed.client_dev)
            back = time.monotonic()
            wait_for(lambda: _answered_since(pacer, back) >= 10, what="echoes again")
            moved = {round(v) for t, v in list(pacer.knobs[0].history) if t > back}
            assert pacer.alive and len(moved) > 1  # the budget adapts again
            _ip(bed, "link", "set", bed.client_dev, "down")  # the link goes, and comes back
            down = time.monotonic()
            time.sleep(1.5)
            assert pacer.alive and _answered_since(pacer, down) == 0
            _ip(bed, "link", "set", bed.client_dev, "up")
            up = time.monotonic()
            wait_for(lambda: _answered_since(pacer, up) >= 5, what="echoes after the link")
        finally:
            load.stop()
            policy.stop(applied)
    [said] = [r.getMessage() for r in caplog.records]
    assert f"could not reach {testbed.SERVER_ADDR} (Network is unreachable)" in said, said
