"""status.inforce: what the kernel has for a process, and the differences named."""

from __future__ import annotations

import os

from backburner.kernel import priorities
from backburner.kernel.priorities import CPUPolicy, IOPrio
from backburner.policy.grammar import Policy
from backburner.status import inforce


def test_what_is_read_is_the_kernels() -> None:
    me = os.getpid()
    now = inforce.read(me)
    assert now is not None
    assert now.io == str(priorities.ioprio_get(me))
    assert (now.cpu, now.nice) == priorities.read_cpu(me)
    assert now.threads == len(os.listdir(f"/proc/{me}/task"))
    assert inforce.read(2 ** 22 + 1) is None  # above pid_max: no such process


def test_differences_name_each_lever() -> None:
    now = inforce.InForce("be:4", "normal", 5, threads=3, threads_off=1)
    want = Policy("p", io=IOPrio("idle"), cpu=CPUPolicy("batch", 10))
    assert inforce.differences(os.getpid(), now, want) == [
        "io: set idle, in force be:4", "cpu: set batch:10, in force normal (nice 5)",
        "1 of its 2 other threads are off what was set (changed since, from inside?)"]
    same = inforce.InForce("idle", "batch", 10)
    assert inforce.differences(os.getpid(), same, want) == []
    # a CPU policy without nice asks nothing of nice
    assert inforce.differences(os.getpid(), inforce.InForce("idle", "idle", 3),
                               Policy("p", cpu=CPUPolicy("idle"))) == []
    assert inforce.differences(os.getpid(), same, None) == []


def test_a_group_the_process_left_is_named(tmp_path: os.PathLike) -> None:
    group = os.path.join(str(tmp_path), "g")
    os.mkdir(group)
    with open(os.path.join(group, "cgroup.procs"), "w") as f:
        f.write(f"{os.getpid()}\n")
    now = inforce.InForce("none", "normal", 0)
    assert inforce.differences(os.getpid(), now, None, [group]) == []
    assert inforce.differences(1, now, None, [group]) == [f"cgroup: not in {group}"]
    gone = os.path.join(str(tmp_path), "gone")
    assert inforce.differences(1, now, None, [gone]) == [
        f"cgroup: not in {gone} (the group is gone)"]
    assert now.describe() == "io none; cpu normal, nice 0; cgroup / (root)"
