"""IO attribution: the pure rules on hand-made events, then for real on a loop device of
our own with a direct-IO reader as the probe and a buffered writer (+ sync) as the load."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from backburner import system
from backburner.base.errors import NotFoundError, UsageError
from backburner.kernel import procfs
from backburner.trace import attribution, engines
from backburner.trace.attribution import Event

PERF_SCRIPT = """\
    bash 15539/15539  sched:sched_process_fork: comm=bash pid=15539 child_comm=bash child_pid=15547
              dd 15547/15547     block:block_bio_queue: 7,0 RS 0 + 128 [dd]
              dd 15547/15547      block:block_rq_issue: 7,0 RS 65536 () 0 + 128 0x2,0,4 [dd]
 kworker/u8:1-ev    32/32    writeback:writeback_start: bdi 7:0: sb_dev 0:0 nr_pages=6764
 kworker/u8:1-ev    32/32        block:block_bio_queue: 7,0 W 20482 + 4096 [kworker/u8:1]
 kworker/u8:1-ev    32/32        block:block_split: 7,0 W 20482 / 23042 [kworker/u8:1]
 kworker/u8:1-ev    32/32         block:block_rq_issue: 7,0 W 1310720 () 20482 + 2560 [kworker/u8:1]
 kworker/0:0H-kb    10/10         block:block_rq_issue: 7,0 W 786432 () 23042 + 1536 0x2,0,4 [kw]
    jbd2/loop0-8 15743/15743     block:block_bio_queue: 7,0 FWFSM 32790 + 2 [jbd2/loop0-8]
 kworker/1:1H-kb    44/44         block:block_rq_issue: 7,0 FF 0 () 0 + 0 0x0,0,0 [kworker/1:1H]
 kworker/1:1H-kb    44/44         block:block_rq_issue: 7,0 WSM 1024 () 32790 + 2 0x2,0,3 [kw]
 kworker/1:1H-kb    44/44         block:block_rq_issue: 7,0 R 4096 () 999 + 8 0x2,0,3 [kw]
            perf 77/77  unrelated garbage line
"""


def test_parse_events() -> None:
    events = attribution.parse_events(PERF_SCRIPT.splitlines())
    kinds = [e.kind for e in events]
    assert kinds == ["fork", "queue", "issue", "writeback", "queue", "split", "issue", "issue",
                     "queue", "issue", "issue", "issue"]
    assert events[0] == Event("fork", 15539, 15539, "bash", child=15547)
    assert events[2].nbytes == 65536 and events[2].sector == 0 and events[2].rwbs == "RS"
    assert events[5].new_sector == 23042 and events[7].comm == "kworker/0:0H-kb"
    assert events[7].nbytes == 786432  # an issue line without the ioprio field (older kernels)


def test_attribution_rules() -> None:
    result = attribution.attribute(attribution.parse_events(PERF_SCRIPT.splitlines()),
                                   probe=[15539], load=[4242])
    g = result["groups"]
    assert g["probe"] == {"requests": 1, "bytes": 65536, "read_bytes": 65536, "write_bytes": 0,
                          "queued_bytes": 65536}  # dd: a child of the probe's shell
    # both halves of the split bio go to the flusher that queued it, though kblockd issued one
    assert g["writeback"]["requests"] == 2 and g["writeback"]["write_bytes"] == 2097152
    assert g["writeback"]["queued_bytes"] == 4096 * 512
    # jbd2's flush (empty request) and its write
    assert g["journal"]["requests"] == 2 and g["journal"]["bytes"] == 1024
    assert result["unattributed"] == {"requests": 1, "bytes": 4096}  # queued before the window
    assert g["load"]["requests"] == 0 and g["other"]["requests"] == 0
    assert result["flusher_tids"] == [32]
    assert sum(v["requests"] for v in g.values()) + 1 == 6  # every issued request


def test_attribution_edges_partitions_and_kernel_log_writers() -> None:
    events = [Event("queue", 9, 9, "kworker/u8:3", rwbs="WFS", sector=100, nr_sector=8),
              Event("issue", 9, 9, "kworker/u8:3", rwbs="WFS", sector=100, nr_sector=8,
                    nbytes=4096),
              Event("queue", 51, 51, "tar", rwbs="W", sector=5000, nr_sector=8),
              Event("issue", 51, 51, "tar", rwbs="W", sector=5000, nr_sector=8, nbytes=4096),
              Event("queue", 60, 60, "cat", rwbs="R", sector=20, nr_sector=8),
              Event("issue", 60, 60, "cat", rwbs="R", sector=20, nr_sector=8, nbytes=4096)]
    r = attribution.attribute(events, load=[50], known_edges={50: {51}}, sectors=(0, 1000))
    assert r["groups"]["journal"]["requests"] == 1  # a kworker writing with FUA: a log commit
    assert r["groups"]["load"]["requests"] == 0  # sector 5000 is outside the partition
    assert r["groups"]["load"]["queued_bytes"] == 4096  # but it asked for it
    assert r["groups"]["other"]["read_bytes"] == 4096
    assert attribution.tree([1], {1: {2}, 2: {3}, 7: {8}}) == {1, 2, 3}


def test_proc_io_attribution_is_pure() -> None:
    before = {10: (0, 0, "probe"), 20: (100, 0, "load"), 30: (0, 0, "jbd2/sda1-8")}
    after = {10: (4096, 0, "probe"), 20: (100, 8192, "load"), 21: (0, 4096, "cp"),
             30: (0, 512, "jbd2/sda1-8"), 40: (7, 7, "idle")}
    r = attribution.attribute_proc_io(before, after, {21: 20}, probe=[10], load=[20])
    g = r["groups"]
    assert g["probe"]["read_bytes"] == 4096 and g["load"]["write_bytes"] == 12288
    assert g["journal"]["write_bytes"] == 512 and g["other"]["bytes"] == 14


def test_device_resolution() -> None:
    with pytest.raises(NotFoundError):
        attribution.resolve_device("no-such-disk-bb")
    assert attribution.kernel_dev(7, 3) == 7 * 2**20 + 3
    with pytest.raises(UsageError):
        attribution.IOAttribution("no-such-disk-bb", method="bogus")
    loopish = next((d.name for d in Path("/sys/class/block").iterdir()), None)
    if loopish:
        with pytest.raises(RuntimeError):
            attribution.IOAttribution(loopish).stop()


# --- for real ------------------------------------------------------------------------------


@pytest.fixture
def ext4_loop(tmp_path: Path, state_dir: Path) -> Iterator[tuple[str, Path]]:
    img = tmp_path / "disk.img"
    with open(img, "wb") as f:
        f.truncate(96 << 20)
    with system.Transaction("test-trace") as tx:
        loop = tx.apply(system.LoopDevice(str(img)))
        subprocess.run(["mkfs.ext4", "-q", "-F", loop], check=True, timeout=60)
        mnt = tmp_path / "mnt"
        tx.apply(system.MadeDir(str(mnt)))
        tx.apply(system.Mount(loop, str(mnt), "ext4"))
        yield loop, mnt


READ = "dd if={dev} of=/dev/null bs=64k count=64 iflag=direct status=none"
WRITE = "dd if=/dev/zero of={mnt}/big bs=1M count=16 status=none; sync"


@pytest.mark.root
@pytest.mark.timeout(120)
def test_perf_attributes_a_real_probe_and_load(ext4_loop) -> None:
    if engines.PerfEngine().missing():
        pytest.fail(f"perf cannot run here: {engines.PerfEngine().missing()}")
    loop, mnt = ext4_loop
    tracefs_before = system.tracefs_mount()
    with attribution.IOAttribution(loop) as io:
        io.start()
        load = subprocess.Popen(["sh", "-c", WRITE.format(mnt=mnt)])
        probe = subprocess.Popen(["sh", "-c", READ.format(dev=loop)])
        assert probe.wait(60) == 0 and load.wait(60) == 0
        r = io.stop(probe_pids=[probe.pid], load_pids=[load.pid])
    assert r["method"] == "perf" and r["device"] == os.path.basename(loop)
    g = r["groups"]
    assert g["probe"]["read_bytes"] == 64 * 65536 and g["probe"]["requests"] >= 64
    assert g["probe"]["write_bytes"] == 0
    written = g["writeback"]["write_bytes"] + g["load"]["write_bytes"]
    assert written >= 16 << 20 and g["writeback"]["requests"] > 0
    assert g["journal"]["requests"] > 0  # the commit sync forced
    for task in r["tasks"]:
        if task["group"] == "probe":
            assert task["comm"] == "dd"
        if task["group"] == "writeback":
            assert task["tid"] in r["flusher_tids"]
    assert system.tracefs_mount() == tracefs_before  # our own tracefs mount is gone


@pytest.mark.root
@pytest.mark.timeout(120)
def test_proc_io_fallback_on_a_real_reader(ext4_loop) -> None:
    loop, _ = ext4_loop
    io = attribution.IOAttribution(loop, method="proc-io")
    io.start()
    with subprocess.Popen(["sh", "-c", READ.format(dev=loop) + "; echo read; read x"],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE) as probe:
        # dd has ended and been reaped by the shell once it says so (not merely "no dd
        # child", which is also the moment before the shell forks it): its IO is added to
        # the shell's /proc/PID/io
        assert probe.stdout is not None and probe.stdout.readline() == b"read\n"
        r = io.stop(probe_pids=[probe.pid])
        probe.communicate(b"\n", timeout=30)
    assert r["method"] == "proc-io" and "all devices" in r["detail"]
    assert r["groups"]["probe"]["read_bytes"] >= 64 * 65536


@pytest.mark.root
@pytest.mark.timeout(120)
def test_perf_records_into_a_journaled_tmpfs_not_dev_shm(ext4_loop, state_dir) -> None:
    """perf's data goes to a private directory under the work root with a tmpfs on it
    (off the device under test, and known to the journal), removed at the end."""
    if engines.PerfEngine().missing():
        pytest.fail(f"perf cannot run here: {engines.PerfEngine().missing()}")
    loop, _ = ext4_loop
    with attribution.IOAttribution(loop, method="perf") as io:
        io.start()
        scratch = io._perf._dir
        assert os.path.dirname(scratch) == str(system.work_root())
        fstype = {m.mountpoint: m.fstype for m in procfs.mounts()}
        assert fstype[os.path.realpath(scratch)] == "tmpfs"
        assert os.path.exists(os.path.join(scratch, "perf.data"))
        io.stop()
    assert not os.path.exists(scratch)


ATTRIBUTE_AND_WAIT = """
import sys, time
from backburner.trace import attribution
io = attribution.IOAttribution(sys.argv[1], method="perf")
io.start()
print(io._perf.pid, flush=True)
time.sleep(60)
"""


@pytest.mark.root
@pytest.mark.timeout(120)
def test_a_recorder_killed_takes_its_perf_along_and_restore_leaves_nothing(
        ext4_loop, state_dir) -> None:
    """SIGKILL to the process attributing IO: its system-wide `perf record` ends too (it
    would record every CPU's block IO until the disk filled), and `restore` removes its
    scratch tmpfs and directory."""
    if engines.PerfEngine().missing():
        pytest.fail(f"perf cannot run here: {engines.PerfEngine().missing()}")
    loop, _ = ext4_loop
    with subprocess.Popen([sys.executable, "-c", ATTRIBUTE_AND_WAIT, loop],
                          stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None
        perf = int(proc.stdout.readline())
        start = procfs.start_time(perf)
        assert start is not None
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    deadline = time.monotonic() + 10
    while procfs.start_time(perf) == start and time.monotonic() < deadline:
        time.sleep(0.05)
    assert procfs.start_time(perf) != start, "perf outlived the process that started it"
    system.restore_stale()
    assert list(system.work_root().iterdir()) == []
    real = os.path.realpath(state_dir)
    assert [m.mountpoint for m in procfs.mounts() if m.mountpoint.startswith(real + "/")] == []
