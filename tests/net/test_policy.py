"""net.policy: the background policy on the client's link takes effect (the job's packets,
attributed by its cgroup, move the background class's counters; nothing else does), and
its undo leaves the client's links, qdiscs and the group exactly as before."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from backburner import system
from backburner.base.errors import UsageError
from backburner.kernel.bpf import calls as bpf
from backburner.kernel.bpf import cgroup_programs
from backburner.net import measure, policy, testbed
from backburner.net.pacer import WindowRule

pytestmark = [pytest.mark.root, pytest.mark.timeout(60)]


def _state(bed: testbed.Testbed) -> tuple[object, ...]:
    links = [(x["ifindex"], x["ifname"], tuple(x.get("flags", [])), x.get("qdisc"))
             for x in system.net.links(bed.client_ns)]
    return (links, system.qdiscs(bed.client_ns, bed.client_dev),
            system.tc_classes(bed.client_ns, bed.client_dev))


def _programs(group: Path) -> tuple[list[int], list[int]]:
    fd = os.open(group, os.O_RDONLY | os.O_DIRECTORY)
    try:
        return (bpf.attached(fd),
                bpf.attached(fd, bpf.BPF_CGROUP_SOCK_OPS))
    finally:
        os.close(fd)


def test_background_class_counts_the_jobs_packets_and_undo_is_exact(
        bed: testbed.Testbed, cgroup2_group: Path) -> None:
    before = _state(bed)
    with system.Transaction("net-policy") as ptx:
        applied = policy.background(ptx, bed.client_ns, bed.client_dev, bed.link,
                                    str(cgroup2_group), adaptive=False)
        assert [len(x) for x in _programs(cgroup2_group)] == [1, 0]
        measure.scenario(bed, 0, 2)  # outside the group: not the bulk's class
        assert policy.bulk_counters(applied) == (0, 0)
        f = measure.scenario(bed, 1, 0, cgroup_procs=(str(cgroup2_group / "cgroup.procs"),),
                             seconds=2.0)
        got_bytes, packets = policy.bulk_counters(applied)
        assert packets > 20 and f.bulk_bit_s > 100_000
    assert _programs(cgroup2_group) == ([], [])
    assert _state(bed) == before


def _bulk_rate(bed: testbed.Testbed) -> int:
    out = system.change.run_tool(["tc", "-n", bed.client_ns, "class", "show", "dev",
                                  bed.client_dev]).stdout
    line = next(x for x in out.splitlines() if x.startswith(f"class htb {policy.BULK_CLASS} "))
    rate = line.split(" rate ")[1].split()[0]
    units = {"Kbit": 1_000, "Mbit": 1_000_000, "bit": 1}
    unit = next(u for u in units if rate.endswith(u))
    return int(float(rate.removesuffix(unit)) * units[unit])


def test_adaptive_budgets_move_the_class_rate_and_the_window_and_undo_is_exact(
        bed: testbed.Testbed, cgroup2_group: Path) -> None:
    before = _state(bed)
    with system.Transaction("net-policy") as ptx:
        applied = policy.background(ptx, bed.client_ns, bed.client_dev, None,
                                    str(cgroup2_group))
        assert applied.mechanism == "both"
        assert [len(x) for x in _programs(cgroup2_group)] == [1, 1]
        try:
            start = _bulk_rate(bed)
            assert start == policy.START_BIT
            measure.scenario(bed, 2, 0, cgroup_procs=(str(cgroup2_group / "cgroup.procs"),),
                             seconds=3.0)
            assert applied.window_map is not None
            clamp, initial = cgroup_programs.window(applied.window_map)
        finally:
            policy.stop(applied)
        assert applied.pacer is not None
        steps = applied.pacer.history
        # the echoes reached the job's peer and measured a queue, and the rate moved
        assert len(steps) > 10 and any(q is not None for _, _, q in steps)
        assert _bulk_rate(bed) != start
        assert policy.bulk_counters(applied)[1] > 20
        # the window followed the ACK class's rate, shared by the two downloads
        acks, window = applied.pacer.knobs
        assert window.name == "window" and len(window.history) == len(steps)
        # (the map holds the last value that moved by 2%, after the two connected)
        assert (clamp, initial) in {policy.window_values(v, 2, WindowRule())
                                    for _, v in window.history}
    assert _programs(cgroup2_group) == ([], [])
    assert _state(bed) == before


def test_uploads_go_behind_everything_else_on_a_shaped_uplink(
        bed: testbed.Testbed, cgroup2_group: Path) -> None:
    before = _state(bed)
    with system.Transaction("net-policy") as ptx:
        applied = policy.background(ptx, bed.client_ns, bed.client_dev, None,
                                    str(cgroup2_group), uplink_bit=bed.link.rate_bit)
        try:
            f = measure.scenario(bed, 0, 2, uploads=1, seconds=2.0,
                                 cgroup_procs=(str(cgroup2_group / "cgroup.procs"),))
        finally:
            policy.stop(applied)
        up_bytes, up_packets = policy.bulk_counters(applied, policy.UPLOAD_CLASS)
        ack_bytes, ack_packets = policy.bulk_counters(applied)
        other_bytes, other_packets = policy.bulk_counters(applied, policy.OTHER_CLASS)
        # the upload's data in its class, full frames; only packets without data in
        # the ACK class; the probe's request and ACKs in the other class
        assert up_packets > 20 and up_bytes / up_packets > 1000
        assert ack_packets > 0 and ack_bytes / ack_packets < 120
        assert other_packets > 10
        assert f.bulk_bit_s > 100_000 and len(f.fetch_s) == 2
        shaped = system.change.run_tool(["tc", "-n", bed.client_ns, "class", "show",
                                         "dev", bed.client_dev]).stdout
        assert "class htb 1:2 root rate 950Kbit ceil 950Kbit" in shaped, shaped
    assert _programs(cgroup2_group) == ([], [])
    assert _state(bed) == before


def test_every_uplink_taken_gives_every_class_a_rate_within_its_parent() -> None:
    """An uplink of 8000-8421 bit made "everything else" -400bit or 0; the least taken
    now leaves each class MIN_CLASS_BIT or more, and the two within the interface's."""
    for bit in (policy.MIN_UPLINK_BIT, policy.MIN_UPLINK_BIT + 1, 168_421, 1_000_000,
                10_000_000_000):
        up, rest, mine = policy.uplink_rates(bit)
        assert min(rest, mine) >= policy.MIN_CLASS_BIT and rest + mine == up <= bit
    for bit in (8000, 8421, policy.MIN_UPLINK_BIT - 1):
        with pytest.raises(UsageError, match="below 20kbit"):
            policy.check_uplink(bit, f"'{bit}bit'")
        with pytest.raises(ValueError):
            policy.uplink_rates(bit)
