"""net.netcls: the job's traffic attributed by cgroup v1 where no cgroup v2 hierarchy is
mounted. Its net_cls group's class id, read by the classifier on the interface, puts the
job's ACKs (and with a shaped uplink its uploads) in their classes and nothing else's;
the undo leaves the client's link, the mounts and the work directory as before, and so
does `restore` after a SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import BB, TIMEOUT, WITHOUT_CGROUP2

from backburner import system
from backburner.base.errors import UnavailableError
from backburner.kernel import cgroups, procfs
from backburner.kernel.bpf import tc_programs
from backburner.net import background, measure, netcls, pacer, policy, testbed

pytestmark = [pytest.mark.root, pytest.mark.timeout(60)]


def _state(bed: testbed.Testbed) -> tuple[object, ...]:
    """The client's link, the cgroup mounts, the work directory, and the hierarchy
    net_cls is bound to (one mounted for a run must be gone with it, not left bound)."""
    work = system.work_root()
    return (system.qdiscs(bed.client_ns, bed.client_dev),
            system.tc_classes(bed.client_ns, bed.client_dev),
            system.tc_filters(bed.client_ns, bed.client_dev, "1:"),
            sorted(m.mountpoint for m in procfs.mounts() if m.fstype == "cgroup"),
            sorted(os.listdir(work)) if work.exists() else [],
            system.v1_groups(netcls.CONTROLLER)[0])


def _settled(bed: testbed.Testbed, before: tuple[object, ...]) -> tuple[object, ...]:
    """The state once the kernel has destroyed an unmounted hierarchy (a moment after)."""
    deadline = time.monotonic() + 5
    while (now := _state(bed)) != before and time.monotonic() < deadline:
        time.sleep(0.05)
    return now


def test_the_classifier_is_refused_out_of_range() -> None:
    with pytest.raises(ValueError):
        tc_programs.classid_program(0, policy.BULK_PRIORITY, 0)
    with pytest.raises(ValueError):
        tc_programs.classid_program(netcls.TAG, 2**32, 0)


def test_our_own_sockets_stay_ours_when_a_child_joins_the_group(bed: testbed.Testbed) -> None:
    """A task joining a net_cls group takes every socket in its descriptor table along,
    and a child holds ours until exec: an echo socket made before the job was placed
    must still send through the other class, never the job's."""
    before = _state(bed)
    with system.Transaction("net-policy") as ptx:
        group = netcls.group(ptx, "echo")
        applied = policy.background(ptx, bed.client_ns, bed.client_dev, bed.link, group,
                                    adaptive=False, attribution="net_cls")
        with pacer.icmp_socket(bed.client_netns_path) as sock:
            child = testbed.client(bed, ["sleep", "30"], (os.path.join(group, "cgroup.procs"),))
            try:
                deadline = time.monotonic() + 5
                while not cgroups.pids(group) and time.monotonic() < deadline:
                    time.sleep(0.02)
                assert cgroups.pids(group), "the child did not join the group"
                rtts = [pacer.echo(sock, testbed.SERVER_ADDR, 4242, n, 1.0) for n in range(3)]
            finally:
                child.stop(1.0)
        assert None not in rtts
        assert policy.bulk_counters(applied) == (0, 0)
        assert policy.bulk_counters(applied, policy.OTHER_CLASS)[1] >= 3
    assert _settled(bed, before) == before


def test_the_policy_by_net_cls_wants_the_ack_mechanism(state_dir: Path) -> None:
    with system.Transaction("net-policy") as tx:
        for kw in ({"mechanism": "window"}, {"mechanism": "ingress"}, {"cc": "lp"}):
            with pytest.raises(ValueError):
                policy.background(tx, None, "lo", None, "/nonexistent",
                                  attribution="net_cls", **kw)


def test_available_reads_proc_cgroups(tmp_path: Path) -> None:
    table = tmp_path / "cgroups"
    table.write_text("#subsys_name\thierarchy\tnum_cgroups\tenabled\n"
                     "cpu\t2\t1\t1\nnet_cls\t0\t1\t1\n")
    assert netcls.available(str(table))
    table.write_text("#subsys_name\thierarchy\tnum_cgroups\tenabled\nnet_cls\t0\t1\t0\n")
    assert not netcls.available(str(table))
    assert not netcls.available(str(tmp_path / "missing"))


def test_acks_and_uploads_by_class_id_and_undo_is_exact(bed: testbed.Testbed) -> None:
    before = _state(bed)
    with system.Transaction("net-policy") as ptx:
        group = netcls.group(ptx, "test")
        assert Path(group, "net_cls.classid").read_text().strip() == str(netcls.TAG)
        applied = policy.background(ptx, bed.client_ns, bed.client_dev, None, group,
                                    uplink_bit=bed.link.rate_bit, attribution="net_cls")
        assert applied.mechanism == "acks"
        try:
            measure.scenario(bed, 0, 2)  # outside the group: none of the job's classes
            assert policy.bulk_counters(applied) == (0, 0)
            assert policy.bulk_counters(applied, policy.UPLOAD_CLASS) == (0, 0)
            procs = (os.path.join(group, "cgroup.procs"),)
            down = measure.scenario(bed, 1, 0, cgroup_procs=procs, seconds=2.0)
            up = measure.scenario(bed, 0, 0, uploads=1, cgroup_procs=procs, seconds=2.0)
        finally:
            policy.stop(applied)
        # the pacer's echoes leave outside the job's classes and come back (the job's
        # processes, forked from us, did not take our echo socket into their group)
        # a step each 0.1 s and its echo's round trip, over the scenarios' ~6 s: 19 steps on
        # 2 cores busy with the suite's workers and guest
        assert applied.pacer is not None and len(applied.pacer.history) > 10
        assert sum(q is None for _, _, q in applied.pacer.history) <= 2
        ack_bytes, ack_packets = policy.bulk_counters(applied)
        up_bytes, up_packets = policy.bulk_counters(applied, policy.UPLOAD_CLASS)
        # the download's ACKs in the paced class, the upload's full frames in theirs
        assert ack_packets > 20 and ack_bytes / ack_packets <= tc_programs.ACK_MAX_FRAME
        assert up_packets > 20 and up_bytes / up_packets > 1000
        assert down.bulk_bit_s > 100_000 and up.bulk_bit_s > 100_000
    assert _settled(bed, before) == before


_KILLED = """
import os, sys, time
from backburner import system
from backburner.net import netcls, policy
ns, dev = sys.argv[1:3]
with system.Transaction("net-policy") as tx:
    group = netcls.group(tx, "killed")
    policy.background(tx, ns, dev, None, group, attribution="net_cls",
                      uplink_bit=1_000_000)
    print("applied", flush=True)
    time.sleep(60)
"""


def test_restore_after_sigkill_leaves_nothing(bed: testbed.Testbed) -> None:
    before = _state(bed)
    child = subprocess.Popen([sys.executable, "-c", _KILLED, bed.client_ns, bed.client_dev],
                             stdout=subprocess.PIPE, text=True, env=os.environ.copy())
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "applied"
        assert _state(bed) != before
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    res = subprocess.run([sys.executable, "-m", "backburner", "restore"],
                         capture_output=True, text=True, env=os.environ.copy())
    assert res.returncode == 0, res.stderr
    assert _settled(bed, before) == before


def test_run_net_without_cgroup2_paces_the_job_by_class_id(bed: testbed.Testbed) -> None:
    before = _state(bed)
    job = (f"{sys.executable} -m backburner.net.client download {testbed.SERVER_ADDR} "
           f"{testbed.PORT} 3 && grep net_cls /proc/self/cgroup && "
           f"tc -s class show dev {bed.client_dev}; exit 7")
    res = subprocess.run([*WITHOUT_CGROUP2, *BB, "run", "-v", "--net", "background",
                          "--netns", bed.client_ns, "--net-dev", bed.client_dev, "--",
                          "sh", "-c", job], capture_output=True, text=True, timeout=TIMEOUT,
                         env=os.environ.copy())
    assert res.returncode == 7, res.stderr
    assert "(cgroup v1 net_cls " in res.stderr, res.stderr
    lines = res.stdout.splitlines()
    assert any(":net_cls:/backburner-net-" in x for x in lines), lines
    # seen by the job itself, while it ran: its ACKs went through the paced class
    at = next(i for i, x in enumerate(lines) if x.startswith("class htb 1:10 "))
    sent = lines[at + 1].split()
    assert sent[0] == "Sent" and int(sent[3]) > 20, lines[at:at + 2]
    assert _settled(bed, before) == before


def test_without_cgroup2_or_net_cls_one_line_and_69(
        bed: testbed.Testbed, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cgroups, "unified_root", lambda *_a: None)
    monkeypatch.setattr(netcls, "available", lambda *_a: False)
    before = _state(bed)
    with pytest.raises(UnavailableError) as err:
        background.check("background", bed.client_dev, bed.client_ns)
    assert err.value.exit_status == 69
    assert "cgroup v2 hierarchy or the v1 net_cls controller" in str(err.value)
    assert _settled(bed, before) == before
