"""kernel.priorities: IO classes and CPU policies set through the kernel and read back (by
our own calls, by util-linux's ionice, and by a job `run` started with them)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import TIMEOUT, bb

from backburner import spawn
from backburner.kernel import priorities
from backburner.kernel.priorities import CPUPolicy, IOPrio
from backburner.policy.grammar import Policy

PY = sys.executable
pytestmark = pytest.mark.timeout(60)  # a hang fails fast instead of at 300 s


# --- ioprio and CPU policy read back from the kernel ---------------------------------------

PROBE = r"""
import os
from backburner.kernel.priorities import ioprio_get
sched = [l for l in open("/proc/self/sched") if l.startswith("policy")][0].split(":")[1].strip()
print(ioprio_get(0), sched, os.sched_getscheduler(0), os.getpriority(os.PRIO_PROCESS, 0))
"""


def _probe(*options: str) -> list[str]:
    r = bb("run", *options, "--", PY, "-c", PROBE)
    assert r.returncode == 0, r.err
    return r.out.split()


@pytest.mark.root
@pytest.mark.parametrize("io", ["idle", "be:3", "rt:2", "be:7"])
def test_run_io_class_read_back(state_dir: Path, io: str) -> None:
    assert _probe("--io", io)[0] == io


@pytest.mark.root
@pytest.mark.parametrize("cpu, policy", [("idle", 5), ("batch", 3), ("nice:15", 0)])
def test_run_cpu_policy_read_back(state_dir: Path, cpu: str, policy: int) -> None:
    _, sched, getscheduler, nice = _probe("--cpu", cpu)
    assert int(sched) == int(getscheduler) == policy
    if cpu.startswith("nice:"):
        assert int(nice) == 15


def test_gentle_policy_read_back(state_dir: Path) -> None:
    io, sched, _, nice = _probe("--policy", "gentle")
    assert (io, int(sched), int(nice)) == ("be:7", 0, 19)


@pytest.mark.root
def test_launch_applies_policy_before_exec_seen_from_parent() -> None:
    policy = Policy(io=IOPrio("idle"), cpu=CPUPolicy("batch", 7))
    before = (priorities.ioprio_get(0), priorities.read_cpu(0))
    child = spawn.launch(["sleep", "5"], policy=policy)
    try:
        assert priorities.ioprio_get(child.pid).klass == "idle"
        assert priorities.read_cpu(child.pid) == ("batch", 7)
        assert os.sched_getscheduler(child.pid) == os.SCHED_BATCH
    finally:
        child.stop(1.0)
    assert (priorities.ioprio_get(0), priorities.read_cpu(0)) == before  # the parent: untouched



def test_ioprio_set_and_get_agree_with_ionice_on_the_running_kernel() -> None:
    """The numbers are right if the kernel does what they say: a level set through them is
    what util-linux's ionice (built for this ABI) reads back, and vice versa."""
    child = subprocess.Popen(["sleep", "30"])
    try:
        priorities.ioprio_set(child.pid, IOPrio("be", 6))
        out = subprocess.run(["ionice", "-p", str(child.pid)], capture_output=True, text=True,
                             check=True, timeout=TIMEOUT).stdout
        assert out.strip() == "best-effort: prio 6"
        subprocess.run(["ionice", "-c", "3", "-p", str(child.pid)], check=True,
                       timeout=TIMEOUT)
        assert priorities.ioprio_get(child.pid).klass == "idle"
    finally:
        child.kill()
        child.wait()


