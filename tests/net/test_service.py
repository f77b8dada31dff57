"""net.service, the network service for systemd units, on this host's testbed: the
programs pinned for BPFProgram=, attached to a group as systemd attaches them (with
BPF_F_ALLOW_MULTI, from the pins), a download in that group has its ACKs in the paced
class and its window in the pinned map set by the pacer, which found the group by
asking the kernel; when the service stops, nothing of it is left (pins, qdiscs,
classes) and the program a "unit" still holds has its map released. A missing bpffs is
one line and 69 before anything changes.

systemd is not PID 1 here: the guest proves the same with a real unit and apply's
drop-in (tests/vm/test_guest_netsd.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from helpers import BB, TIMEOUT, WITHOUT_CGROUP2, bb

from backburner import system
from backburner.kernel.bpf import calls as bpf
from backburner.kernel.bpf import cgroup_programs
from backburner.net import measure, policy, service, testbed
from backburner.system.bpf import (
    PIN_DIR,
    PIN_EGRESS,
    PIN_SOCK_OPS,
    RELEASE_CLAMP,
    bpf_program_settings,
)

pytestmark = [pytest.mark.root, pytest.mark.timeout(60)]


def _client_state(bed: testbed.Testbed) -> tuple[object, ...]:
    return (system.qdiscs(bed.client_ns, bed.client_dev),
            system.tc_classes(bed.client_ns, bed.client_dev))


def test_units_groups_are_paced_and_nothing_is_left(bed: testbed.Testbed, bpffs: str,
                                                    cgroup2_group: Path) -> None:
    plan = service.check(bed.client_dev, bed.client_ns, root=bpffs)
    before = _client_state(bed)
    up, done = threading.Event(), threading.Event()
    got: dict[str, object] = {}

    def ready(applied: policy.Applied) -> None:
        got["applied"] = applied
        up.set()

    runner = threading.Thread(target=lambda: got.setdefault(
        "how", service.serve(plan, ready, until=done.is_set)))
    runner.start()
    group = os.open(cgroup2_group, os.O_RDONLY | os.O_DIRECTORY)
    progs: list[int] = []
    try:
        assert up.wait(10)
        assert bpf_program_settings(bpffs) == [
            f"egress:{bpffs}/{PIN_DIR}/{PIN_EGRESS}",
            f"sock_ops:{bpffs}/{PIN_DIR}/{PIN_SOCK_OPS}"]
        for spec, kind in zip(bpf_program_settings(bpffs),
                              (bpf.BPF_CGROUP_INET_EGRESS, bpf.BPF_CGROUP_SOCK_OPS),
                              strict=True):
            prog = bpf.pinned(spec.split(":", 1)[1])  # as systemd does
            progs.append(bpf.program_id(prog))
            bpf.attach(group, prog, kind)
            os.close(prog)
        assert service.attached_groups(set(progs), str(cgroup2_group.parent)) == \
            [str(cgroup2_group)]
        applied = got["applied"]
        assert isinstance(applied, policy.Applied) and applied.window_map is not None
        f = measure.scenario(bed, 2, 0, cgroup_procs=(str(cgroup2_group / "cgroup.procs"),),
                             seconds=3.0)
        packets = policy.bulk_counters(applied)[1]
        clamp, initial = cgroup_programs.window(applied.window_map)
        assert packets > 20 and f.bulk_bit_s > 100_000, (packets, f)
        assert clamp >= 1448 and initial >= 1, (clamp, initial)  # the pacer set the window
        assert applied.pacer is not None and len(applied.pacer.history) > 5
    finally:
        done.set()
        runner.join(15)
        try:
            assert got.get("how") == "stopped"
            assert not Path(bpffs, PIN_DIR).exists()
            assert _client_state(bed) == before
            # the "unit" still holds the sock_ops program: its map is released
            held = bpf.program_fd(progs[1])
            assert held is not None
            try:
                (window,) = bpf.program_maps(held)
                fd = bpf.map_fd(window)
                assert fd is not None
                assert cgroup_programs.window(fd) == (RELEASE_CLAMP, 0)
                os.close(fd)
            finally:
                os.close(held)
        finally:
            for prog_id, kind in zip(progs, (bpf.BPF_CGROUP_INET_EGRESS,
                                             bpf.BPF_CGROUP_SOCK_OPS), strict=False):
                fd = bpf.program_fd(prog_id)
                if fd is not None:
                    bpf.detach(group, fd, kind)
                    os.close(fd)
            os.close(group)


def test_no_bpffs_is_one_line_and_69(bed: testbed.Testbed, state_dir: Path) -> None:
    before = _client_state(bed)
    r = bb("govern", "net", "--dev", bed.client_dev, "--netns", bed.client_ns)
    if not bpf.bpffs_mounted(bpf.BPFFS):  # this host mounts none
        assert r.returncode == 69, r.err
        assert r.err.count("\n") == 1 and "needs a BPF filesystem" in r.err, r.err
    r = bb("govern", "net", "--dev", "nosuchdev", "--netns", bed.client_ns)
    assert r.returncode != 0 and r.err.count("\n") == 1, r.err
    assert _client_state(bed) == before


@pytest.mark.parametrize("option", ["--dev", "--netns", "--uplink"])
@pytest.mark.parametrize("empty", ["", " "])
def test_an_empty_value_is_refused_not_taken_as_the_default(
        bed: testbed.Testbed, state_dir: Path, option: str, empty: str) -> None:
    """`govern net --dev ''` shaped the default route's interface: an empty value is one
    line and 64, before anything else is asked (the namespace given is the testbed's, so
    the old behaviour could not reach a host interface)."""
    given = {"--dev": bed.client_dev, "--netns": bed.client_ns, option: empty}
    r = bb("govern", "net", *(x for kv in given.items() for x in kv))
    assert r.returncode == 64, r.err
    assert r.err.count("\n") == 1 and f"{option} is empty" in r.err, r.err


def test_a_slow_uplink_is_refused_before_anything_changes(bed: testbed.Testbed,
                                                          state_dir: Path) -> None:
    r = bb("govern", "net", "--dev", bed.client_dev, "--netns", bed.client_ns,
           "--uplink", "8400bit")
    assert r.returncode == 64 and "is below 20kbit" in r.err, r.err


SERVE = """
import sys
from backburner.net import service
plan = service.check(sys.argv[1], sys.argv[2], root=sys.argv[3])
service.serve(plan, lambda _a: print("ready", flush=True))
"""


def test_sigkill_then_restore_leaves_nothing(bed: testbed.Testbed, bpffs: str) -> None:
    before = _client_state(bed)
    proc = subprocess.Popen([sys.executable, "-c", SERVE, bed.client_dev, bed.client_ns,
                             bpffs], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"ready\n"
    assert Path(bpffs, PIN_DIR).is_dir() and _client_state(bed) != before
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    r = bb("restore")
    assert r.returncode == 0, r.err
    assert not Path(bpffs, PIN_DIR).exists()
    assert _client_state(bed) == before


def test_the_groups_below_an_attached_one_are_found(cgroup2_group: Path) -> None:
    made = [cgroup2_group / d for d in ("a", "a/x", "a/x/y", "a/z", "b")]
    for d in made:
        d.mkdir()
    prog = cgroup_programs.load_priority_program(policy.BULK_PRIORITY)
    group = os.open(cgroup2_group / "a", os.O_RDONLY | os.O_DIRECTORY)
    try:
        bpf.attach(group, prog)
        found = service.attached_groups({bpf.program_id(prog)}, str(cgroup2_group))
        assert sorted(found) == [str(cgroup2_group / d) for d in ("a", "a/x", "a/x/y", "a/z")]
        assert service.attached_groups({0}, str(cgroup2_group)) == []
        bpf.detach(group, prog)
    finally:
        os.close(group)
        os.close(prog)
        for d in reversed(made):
            d.rmdir()


def test_on_cgroup_v1_alone_the_service_is_one_line_and_69(bed: testbed.Testbed) -> None:
    """The service hands its programs to systemd's BPFProgram=, which needs a cgroup2 tree:
    where none is mounted it refuses before anything changes."""
    before = _client_state(bed)
    res = subprocess.run([*WITHOUT_CGROUP2, *BB, "govern", "net", "--dev", bed.client_dev,
                          "--netns", bed.client_ns], capture_output=True,
                         text=True, timeout=TIMEOUT, env=os.environ.copy())
    assert res.returncode == 69, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "only on a cgroup2 tree" in lines[0], res.stderr
    assert _client_state(bed) == before
