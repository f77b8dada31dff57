"""net.ingress: the job's downloads shaped on the way in, on an IFB device. The job's
segments (found by their socket, marked by the group) move the IFB's job class and
nothing else does; the job's downloads are held to the class's rate; the undo leaves the
client's links, qdiscs, filters and the group exactly as before, and so does `restore`
after a SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from backburner import system
from backburner.kernel.bpf import calls as bpf
from backburner.kernel.bpf import cgroup_programs, tc_programs
from backburner.net import ingress, measure, policy, testbed

pytestmark = [pytest.mark.root, pytest.mark.timeout(60)]


def _state(bed: testbed.Testbed) -> tuple[object, ...]:
    links = [(x["ifindex"], x["ifname"], tuple(x.get("flags", [])), x.get("qdisc"))
             for x in system.net.links(bed.client_ns)]
    return (links, system.qdiscs(bed.client_ns, bed.client_dev),
            system.tc_filters(bed.client_ns, bed.client_dev, "ffff:"))


def _sock_create(group: Path) -> list[int]:
    fd = os.open(group, os.O_RDONLY | os.O_DIRECTORY)
    try:
        return bpf.attached(fd, bpf.BPF_CGROUP_INET_SOCK_CREATE)
    finally:
        os.close(fd)


def test_the_classifier_is_refused_out_of_range() -> None:
    with pytest.raises(ValueError):
        tc_programs.classifier_program(0, ingress.JOB_CLASSID)
    with pytest.raises(ValueError):
        cgroup_programs.socket_priority_program(2**31)


def test_the_jobs_segments_go_through_its_class_held_to_its_rate_and_undo_is_exact(
        bed: testbed.Testbed, cgroup2_group: Path) -> None:
    before = _state(bed)
    procs = (str(cgroup2_group / "cgroup.procs"),)
    with system.Transaction("net-policy") as ptx:
        applied = policy.background(ptx, bed.client_ns, bed.client_dev, bed.link,
                                    str(cgroup2_group), adaptive=False, mechanism="ingress")
        assert applied.ifb == ingress.ifb_name(bed.client_dev)
        assert len(_sock_create(cgroup2_group)) == 1
        measure.scenario(bed, 0, 2)  # outside the group: the other class
        assert policy.bulk_counters(applied) == (0, 0)
        other = policy.bulk_counters(applied, ingress.OTHER_CLASS, applied.ifb)[1]
        assert other > 10  # the page's segments crossed the IFB
        f = measure.scenario(bed, 2, 0, cgroup_procs=procs, seconds=3.0)
        got_bytes, packets = policy.bulk_counters(applied)
        assert packets > 50 and got_bytes > 100_000
        # held to the class's rate (90% of the link), not the link's
        assert 0.5 * bed.link.rate_bit < f.bulk_bit_s < 0.97 * bed.link.rate_bit
        # the classifier is on the IFB, the redirect on the client's ingress
        assert [x.get("kind") for x in system.tc_filters(bed.client_ns, applied.ifb, "1:")
                if x.get("options")] == ["bpf"]
    assert _sock_create(cgroup2_group) == []
    assert _state(bed) == before


def test_restore_after_sigkill_leaves_nothing(bed: testbed.Testbed, cgroup2_group: Path,
                                              state_dir: Path) -> None:
    before = _state(bed)
    code = (
        "import os, sys\n"
        "from backburner import system\n"
        "from backburner.net import link, policy\n"
        "tx = system.Transaction('net-policy').__enter__()\n"
        f"policy.background(tx, {bed.client_ns!r}, {bed.client_dev!r}, "
        f"link.parse({bed.link.spec()!r}), {str(cgroup2_group)!r}, adaptive=False, "
        "mechanism='ingress')\n"
        "print('on', flush=True)\n"
        "sys.stdin.read()\n")
    env = {**os.environ, "BACKBURNER_STATE_DIR": str(state_dir)}
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, env=env, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "on\n"
        assert _state(bed) != before
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait()
    assert system.restore_stale()
    assert _sock_create(cgroup2_group) == []
    assert _state(bed) == before
