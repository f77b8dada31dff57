"""The window clamp (system.CgroupSockOps, the sock_ops program of
kernel.bpf.cgroup_programs) on the
testbed: the job's sockets get the map's clamp, a change of the map reaches an established
socket (read back in the job with getsockopt, and at the sender as the window it is
offered), and the undo, also `restore`'s after a SIGKILL, leaves no program, no map and
the group's programs as before. A kernel that refuses the program or lacks the
congestion control asked for is one line and 69, before anything changes."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import bb

from backburner import system
from backburner.base.errors import UnavailableError
from backburner.kernel.bpf import calls as bpf
from backburner.kernel.bpf import cgroup_programs
from backburner.net import tcpopts, testbed

from .conftest import net_groups

pytestmark = [pytest.mark.root, pytest.mark.timeout(60)]

#: The job: a download that reports its socket's clamp (every read's, the last 20) after
#: 1 s, then again 1.5 s after the flag file appears.
JOB = r"""
import json, os, socket, sys, time
from backburner.net.tcpopts import socket_options
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10)
s.sendall(b"GET /bulk HTTP/1.0\r\n\r\n")
def drain(seconds):
    seen, end = [], time.monotonic() + seconds
    while time.monotonic() < end:
        s.recv(65536)
        seen.append(socket_options(s)["window_clamp"])
    print(json.dumps(seen[-20:]), flush=True)
drain(1.0)
while not os.path.exists(sys.argv[3]):
    s.recv(65536)
drain(1.5)
while s.recv(65536):  # until stopped
    pass
"""


def _offered(bed: testbed.Testbed) -> int:
    """The window the server is offered by the client (its snd_wnd), one connection."""
    out = system.change.run_tool(["ss", "-N", bed.server_ns, "-tni", "state",
                                  "established"]).stdout
    found = re.findall(r"snd_wnd:(\d+)", out)
    assert len(found) == 1, out
    return int(found[0])


def _gone(prog: int, window: int) -> bool:
    """The program and its map are unloaded (the kernel frees them a moment after the
    last holder goes)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        p, m = bpf.program_fd(prog), bpf.map_fd(window)
        for fd in (p, m):
            if fd is not None:
                os.close(fd)
        if p is None and m is None:
            return True
        time.sleep(0.1)
    return False


def test_clamp_reaches_established_sockets_and_undo_is_exact(
        bed: testbed.Testbed, cgroup2_group: Path, tmp_path: Path) -> None:
    group = os.open(cgroup2_group, os.O_RDONLY | os.O_DIRECTORY)
    flag = tmp_path / "flag"
    try:
        before = bpf.attached(group, bpf.BPF_CGROUP_SOCK_OPS)
        with system.Transaction("net-window") as wtx:
            result = wtx.apply(system.CgroupSockOps(str(cgroup2_group), None, 60000, 40))
            assert bpf.attached(group, bpf.BPF_CGROUP_SOCK_OPS) == \
                [*before, result["prog"]]
            job = testbed.client(bed, [sys.executable, "-c", JOB, testbed.SERVER_ADDR,
                                       str(testbed.PORT), str(flag)],
                                 (str(cgroup2_group / "cgroup.procs"),))
            first = json.loads(job.popen.stdout.readline())
            assert _offered(bed) > 30000
            window = system.window_map(result)
            assert window is not None
            cgroup_programs.set_window(window, 4000, 2)
            assert cgroup_programs.window(window) == (4000, 2)
            os.close(window)
            flag.touch()
            then = json.loads(job.popen.stdout.readline())
            offered = _offered(bed)
            job.stop()
            # the receive-buffer autotuning may raise the clamp between two segments;
            # the program puts it back with the next one
            assert first.count(60000) > len(first) // 2, first
            assert then.count(4000) > len(then) // 2, then
            assert offered <= 4096  # rounded up to the window scale's unit
        assert bpf.attached(group, bpf.BPF_CGROUP_SOCK_OPS) == before
        assert _gone(result["prog"], result["map"])
    finally:
        os.close(group)


APPLY_AND_WAIT = """
import sys, time
from backburner import system
with system.Transaction("net-window-kill") as tx:
    r = tx.apply(system.CgroupSockOps(sys.argv[1], None, 3000, 2))
    print(r["prog"], r["map"], flush=True)
    time.sleep(60)
"""


def test_sigkill_then_restore_removes_program_and_map(state_dir: Path,
                                                      cgroup2_group: Path) -> None:
    group = os.open(cgroup2_group, os.O_RDONLY | os.O_DIRECTORY)
    try:
        proc = subprocess.Popen([sys.executable, "-c", APPLY_AND_WAIT, str(cgroup2_group)],
                                stdout=subprocess.PIPE)
        assert proc.stdout is not None
        prog, window = (int(x) for x in proc.stdout.readline().split())
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert bpf.attached(group, bpf.BPF_CGROUP_SOCK_OPS) == [prog]
        r = bb("restore")
        assert r.returncode == 0, r.err
        assert bpf.attached(group, bpf.BPF_CGROUP_SOCK_OPS) == []
        assert _gone(prog, window)
    finally:
        os.close(group)


def test_check_passes_here_and_refuses_a_missing_cc_before_any_change(
        state_dir: Path) -> None:
    before = net_groups()
    tcpopts.check()  # this kernel clamps: nothing raised, nothing left
    assert net_groups() == before
    with pytest.raises(UnavailableError) as err:
        tcpopts.check("nosuchcc")
    assert err.value.exit_status == 69 and "no congestion control 'nosuchcc'" in str(err.value)
    assert "\n" not in str(err.value)
    assert net_groups() == before


def test_a_refused_program_is_one_line_and_69() -> None:
    with pytest.raises(UnavailableError) as err:
        bpf.load_program(9999, bpf.BPF_CGROUP_SOCK_OPS, cgroup_programs.priority_program(1),
                        "bb_bad", "made-up")
    assert err.value.exit_status == 69 and "refused a made-up BPF program" in str(err.value)
