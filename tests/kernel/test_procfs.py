"""procfs: the one mount-table reader (every octal escape the kernel writes, per-mount and
per-filesystem options apart), checked on text and against this machine's own table."""

from __future__ import annotations

import os

from backburner.kernel import procfs

MOUNTINFO = (
    "22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw,errors=remount-ro\n"
    "40 22 7:3 / /mnt/a\\040b\\011c\\012d\\134e ro,nosuid,nodev - ext4 /dev/loop3 rw\n"
    "41 22 0:33 / /sys/fs/cgroup/blkio rw,nosuid shared:9 - cgroup cgroup rw,blkio\n"
    "short line\n"
)


def test_parse_mountinfo_unescapes_and_splits_options() -> None:
    root, odd, cg = procfs.parse_mountinfo(MOUNTINFO)
    assert (root.mountpoint, root.fstype, root.source) == ("/", "ext4", "/dev/vda")
    assert odd.mountpoint == "/mnt/a b\tc\nd\\e"
    assert odd.options == {"ro", "nosuid", "nodev"} and odd.super_options == {"rw"}
    assert (os.major(odd.devno), os.minor(odd.devno)) == (7, 3)
    assert "blkio" in cg.all_options and "blkio" not in cg.options


def test_this_machines_table_has_its_root_and_proc() -> None:
    table = procfs.mounts()
    assert any(m.mountpoint == "/" for m in table)
    assert any(m.fstype == "proc" and m.mountpoint == "/proc" for m in table)
    assert procfs.mounts("/nonexistent/mountinfo") == []


def test_pending_signals_read_from_a_real_process() -> None:
    """A process with SIGUSR1 blocked and sent: its pending set shows it. SIGKILL, whose
    bit the same mask holds, cannot be blocked, so this is how the reading is proven."""
    import signal
    import subprocess
    import sys
    import time

    code = ("import signal, sys, time; signal.pthread_sigmask(signal.SIG_BLOCK, "
            "{signal.SIGUSR1}); print('ready', flush=True); time.sleep(30)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
        assert procfs.pending_signals(proc.pid) == 0
        assert not procfs.on_its_way_out(proc.pid)  # sleeping, nothing pending
        proc.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + 5
        while procfs.pending_signals(proc.pid) == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert procfs.pending_signals(proc.pid) == 1 << (signal.SIGUSR1 - 1)
        assert not procfs.on_its_way_out(proc.pid)  # only SIGKILL pending is a death
    finally:
        proc.kill()
        proc.wait()
    assert procfs.pending_signals(proc.pid) is None and procfs.on_its_way_out(proc.pid)


def test_a_user_namespace_is_told_from_the_machines_own() -> None:
    """Root in a user namespace (`unshare -U`, a rootless container) cannot mount tracefs:
    perf is not offered there."""
    import subprocess
    import sys

    code = ("from backburner.kernel import procfs; "
            "print(procfs.in_initial_user_namespace())")
    inside = subprocess.run(["unshare", "--user", "--map-root-user", sys.executable, "-c",
                             code], capture_output=True, text=True, timeout=60)
    assert inside.stdout == "False\n", inside.stderr
    outside = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             timeout=60)
    assert outside.stdout == "True\n", outside.stderr
