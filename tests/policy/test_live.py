"""policy.live: a policy put on every thread of a running tree and its children (`run
--pid`), the old values put back by undo and by `restore`, and never on a process that
only reuses a journaled PID."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import TIMEOUT, bb

from backburner.kernel import priorities, procfs
from backburner.kernel.priorities import IOPrio

PY = sys.executable
pytestmark = pytest.mark.timeout(60)  # a hang fails fast instead of at 300 s


# --- run --pid on a running multi-threaded process and its child -----------------------------

TREE = r"""
import subprocess, sys, threading, time
for _ in range(3):
    threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
child = subprocess.Popen(["sleep", "30"])
print(child.pid, flush=True)
sys.stdin.read()
child.kill()
"""


def _tasks(pid: int) -> list[int]:
    return [int(t) for t in os.listdir(f"/proc/{pid}/task")]


@pytest.mark.root
def test_run_pid_reprioritises_every_thread_and_child(state_dir: Path) -> None:
    with subprocess.Popen([PY, "-c", TREE], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE) as target:
        try:
            kid = int(target.stdout.readline())
            tids = _tasks(target.pid) + _tasks(kid)
            assert len(tids) == 5
            assert all(os.sched_getscheduler(t) == os.SCHED_OTHER for t in tids)
            r = bb("run", "--pid", str(target.pid), "--io", "idle", "--cpu", "idle")
            assert r.returncode == 0, r.err
            assert "5 threads re-prioritised" in r.err
            for tid in tids:
                assert priorities.ioprio_get(tid) == IOPrio("idle"), tid
                assert os.sched_getscheduler(tid) == os.SCHED_IDLE, tid
                sched = Path(f"/proc/{tid}/sched").read_text()
                assert re.search(r"^policy\s+:\s+5$", sched, re.M), tid
        finally:
            target.stdin.close()
            target.wait(timeout=TIMEOUT)
    assert target.returncode == 0


@pytest.mark.root
def test_run_pid_with_weights_hands_its_cgroup_to_the_job(state_dir: Path) -> None:
    """`run --pid` with cgroup weights: the process and its child are in backburner/pid-PID
    with the policy's weight; after the job ends, `restore` removes the group."""
    with subprocess.Popen([PY, "-c", TREE], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE) as target:
        try:
            kid = int(target.stdout.readline())
            r = bb("run", "--pid", str(target.pid), "--policy", "background")
            assert r.returncode == 0, r.err
            tag = procfs.owner_tag(target.pid)
            group = Path(f"/sys/fs/cgroup/blkio/backburner/pid-{tag}")
            procs = {int(p) for p in (group / "cgroup.procs").read_text().split()}
            assert {target.pid, kid} <= procs
            weight = (group / "blkio.bfq.weight").read_text().split()[-1]
            assert weight == "10"
            assert list((state_dir / "journal").glob("*.jsonl")), "journal handed to the job"
            assert bb("restore").returncode == 0
            assert group.is_dir(), "the job still runs: its group must stay"
        finally:
            target.stdin.close()
            target.wait(timeout=TIMEOUT)
    r = bb("restore")
    assert r.returncode == 0, r.err
    assert not group.exists()
    assert not list((state_dir / "journal").glob("*.jsonl"))


#: Runs as the first process of a new PID namespace (its own /proc): nothing else forks
#: there, so a new process can be given the PID of one that exited, as a busy machine
#: eventually does.
REUSED_PID = r"""
import json, os, subprocess, sys
BB = [sys.executable, "-m", "backburner"]
user = subprocess.Popen(["sleep", "60"], preexec_fn=lambda: os.nice(19))
r = subprocess.run(BB + ["run", "--pid", str(user.pid), "--cpu", "nice:0", "--io", "idle"],
                   capture_output=True, text=True)
assert r.returncode == 0, r.stderr
assert os.getpriority(os.PRIO_PROCESS, user.pid) == 0
user.kill()
user.wait()
for _ in range(20):
    with open("/proc/sys/kernel/ns_last_pid", "w") as f:
        f.write(str(user.pid - 1))
    other = subprocess.Popen(["sleep", "60"])
    if other.pid == user.pid:
        break
    other.kill()
    other.wait()
assert other.pid == user.pid, "the PID was not reused"
r = subprocess.run(BB + ["restore"], capture_output=True, text=True)
print(json.dumps({"status": r.returncode, "out": r.stdout, "err": r.stderr,
                  "nice": os.getpriority(os.PRIO_PROCESS, other.pid)}))
other.kill()
"""


@pytest.mark.root
def test_restore_leaves_alone_a_new_process_with_a_journaled_pid(state_dir: Path) -> None:
    """A process re-prioritised by `run --pid` exits and its PID goes to another process:
    `restore` must not put the old process's priorities (nice 19) on the new one."""
    r = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", PY, "-c", REUSED_PID],
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["status"] == 0, got["err"]
    assert got["nice"] == 0, "restore reniced a process that was never re-prioritised"
    assert "the PID now belongs to another one" in got["out"]


@pytest.mark.root
def test_restore_pid_puts_back_a_live_process_and_a_rerun_replaces_the_first(
        state_dir: Path) -> None:
    with subprocess.Popen(["sleep", "60"], preexec_fn=lambda: os.nice(7)) as target:
        try:
            for cpu in ("normal", "batch:3", "idle"):
                r = bb("run", "--pid", str(target.pid), "--cpu", cpu)
                assert r.returncode == 0, r.err
            assert len(list((state_dir / "journal").glob("*.jsonl"))) == 1
            assert os.sched_getscheduler(target.pid) == os.SCHED_IDLE
            r = bb("restore")
            assert r.returncode == 0 and f"restore --pid {target.pid}" in r.out, r.out
            assert os.sched_getscheduler(target.pid) == os.SCHED_IDLE, "a live one stays"
            r = bb("restore", "--pid", str(target.pid))
            assert r.returncode == 0, r.err
            assert os.sched_getscheduler(target.pid) == os.SCHED_OTHER
            assert os.getpriority(os.PRIO_PROCESS, target.pid) == 7
            assert not list((state_dir / "journal").glob("*.jsonl"))
            r = bb("restore", "--pid", str(target.pid))
            assert r.returncode == 66 and len(r.err.strip().splitlines()) == 1, r.err
        finally:
            target.kill()



def test_has_policy_tells_a_thread_that_copied_the_new_values() -> None:
    from backburner.kernel.priorities import CPUPolicy, IOPrio
    from backburner.policy.grammar import Policy
    from backburner.policy.live import has_policy

    idle = {"start": 1, "io": IOPrio("idle").value, "policy": os.SCHED_IDLE, "nice": 0}
    normal = {"start": 1, "io": 0, "policy": os.SCHED_OTHER, "nice": 0}
    assert has_policy(idle, Policy(io=IOPrio("idle"), cpu=CPUPolicy("idle")))
    assert not has_policy(normal, Policy(io=IOPrio("idle")))
    assert has_policy(normal, Policy(cpu=CPUPolicy("normal")))
    assert not has_policy(dict(normal, nice=5), Policy(cpu=CPUPolicy("normal", 10)))
    assert has_policy(dict(normal, nice=10), Policy(cpu=CPUPolicy("normal", 10)))
    assert not has_policy(idle, Policy(cpu=CPUPolicy("batch")))
