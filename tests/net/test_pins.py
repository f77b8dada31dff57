"""system.PinnedPrograms: the network policy's programs and map pinned in bpffs, as
systemd's BPFProgram= takes them; the undo, also `restore`'s after a SIGKILL, unpins them
and the kernel frees them; a pin directory already holding pins, or a path that is not
bpffs, is refused before anything changes.

This host's systemd is not PID 1 and nothing mounts /sys/fs/bpf: each test mounts a bpffs
of its own on a private directory, through the undo core, and it goes with the test."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import bb

from backburner import system
from backburner.base.errors import ExistsError, UnavailableError
from backburner.kernel.bpf import calls as bpf
from backburner.kernel.bpf import cgroup_programs
from backburner.system.bpf import PIN_DIR, PIN_EGRESS, PIN_SOCK_OPS, PIN_WINDOW

pytestmark = [pytest.mark.root, pytest.mark.timeout(60)]


def _gone(ids: dict[str, int]) -> bool:
    """Every pinned object freed (the kernel frees them a moment after the last holder)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        fds = [bpf.map_fd(i) if n == PIN_WINDOW else bpf.program_fd(i)
               for n, i in ids.items()]
        for fd in fds:
            if fd is not None:
                os.close(fd)
        if all(fd is None for fd in fds):
            return True
        time.sleep(0.1)
    return False


def test_pin_and_unpin(bpffs: str) -> None:
    pins = Path(bpffs, PIN_DIR)
    with system.Transaction("pins") as tx:
        result = tx.apply(system.PinnedPrograms(bpffs, 0x10010, 0x10030, None))
        assert sorted(os.listdir(pins)) == sorted([PIN_EGRESS, PIN_SOCK_OPS, PIN_WINDOW])
        assert pins.stat().st_mode & 0o777 == 0o700
        assert system.pinned_ids(bpffs) == result["ids"]
        window = bpf.pinned(str(pins / PIN_WINDOW))
        try:
            assert cgroup_programs.window(window) == (0, 0)  # nothing clamped at first
            sock_ops = bpf.pinned(str(pins / PIN_SOCK_OPS))
            try:  # the program uses the pinned map
                assert bpf.program_maps(sock_ops) == [result["ids"][PIN_WINDOW]]
            finally:
                os.close(sock_ops)
            with pytest.raises(ExistsError) as err:  # a second service: refused
                tx.apply(system.PinnedPrograms(bpffs, 0x10010))
            assert "already holds" in str(err.value) and "\n" not in str(err.value)
        finally:
            os.close(window)
    assert not pins.exists()
    assert _gone(result["ids"])


def test_not_bpffs_is_one_line_and_69(state_dir: Path, tmp_path: Path) -> None:
    with system.Transaction("pins") as tx, pytest.raises(UnavailableError) as err:
        tx.apply(system.PinnedPrograms(str(tmp_path), 0x10010))
    assert err.value.exit_status == 69 and "no BPF filesystem" in str(err.value)
    assert not (tmp_path / PIN_DIR).exists()


PIN_AND_WAIT = """
import json, sys, time
from backburner import system
with system.Transaction("pins-kill") as tx:
    r = tx.apply(system.PinnedPrograms(sys.argv[1], 0x10010, 0, None))
    print(json.dumps(r["ids"]), flush=True)
    time.sleep(60)
"""


def test_sigkill_then_restore_unpins(bpffs: str) -> None:
    import json

    proc = subprocess.Popen([sys.executable, "-c", PIN_AND_WAIT, bpffs],
                            stdout=subprocess.PIPE)
    assert proc.stdout is not None
    ids = json.loads(proc.stdout.readline())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert system.pinned_ids(bpffs) == ids  # the pins outlive the process
    r = bb("restore")
    assert r.returncode == 0, r.err
    assert not Path(bpffs, PIN_DIR).exists()
    assert _gone(ids)
