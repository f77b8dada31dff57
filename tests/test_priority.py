"""Priorities parsed, applied and read back from the kernel: ioprio, scheduler policy, nice,
the background policy's cgroups, and `run --pid` on a running multi-threaded tree."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import BB, TIMEOUT, bb, wait_for

from backburner import priority, spawn
from backburner.base.errors import SystemStateError, UnavailableError, UsageError
from backburner.kernel import procfs
from backburner.priority import CPUPolicy, IOPrio, Policy

PY = sys.executable
pytestmark = pytest.mark.timeout(60)  # a hang fails fast instead of at 300 s

# --- parsing (pure) -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, klass, level",
    [("idle", "idle", 0), ("be", "be", 4), ("be:3", "be", 3), ("rt:2", "rt", 2),
     ("best-effort:7", "be", 7), ("realtime", "rt", 4), ("none", "none", 0)],
)
def test_ioprio_parse(text: str, klass: str, level: int) -> None:
    prio = IOPrio.parse(text)
    assert (prio.klass, prio.level) == (klass, level)
    assert IOPrio.from_value(prio.value) == prio


@pytest.mark.parametrize("text", ["", "fast", "be:8", "rt:-1", "idle:1", "none:0", "be:"])
def test_ioprio_parse_rejects(text: str) -> None:
    with pytest.raises(UsageError):
        IOPrio.parse(text)


@pytest.mark.parametrize(
    "text, kind, nice",
    [("idle", "idle", None), ("batch", "batch", None), ("batch:5", "batch", 5),
     ("nice:15", "normal", 15), ("nice:-20", "normal", -20), ("normal", "normal", None)],
)
def test_cpu_parse(text: str, kind: str, nice: int | None) -> None:
    cpu = CPUPolicy.parse(text)
    assert (cpu.kind, cpu.nice) == (kind, nice)
    assert CPUPolicy.parse(str(cpu)) == cpu


@pytest.mark.parametrize("text", ["nice", "nice:20", "nice:-21", "idle:3", "fifo", "batch:x"])
def test_cpu_parse_rejects(text: str) -> None:
    with pytest.raises(UsageError):
        CPUPolicy.parse(text)


@pytest.mark.parametrize("spec", ["background", "gentle", "default", "group-idle",
                                  "low-weight", "latency-target", "iocost",
                                  "io=be:2,cpu=nice:10,io-weight=50,cpu-weight=20",
                                  "io=idle,group-io=idle,io-latency=500us,io-cost=on,"
                                  "io-weight=20"])
def test_policy_spec_round_trip(spec: str) -> None:
    policy = priority.parse_policy(spec)
    assert priority.parse_policy(policy.spec()) == policy


def test_the_group_knobs_parse_to_what_the_kernel_files_take() -> None:
    pol = priority.parse_policy("group-io=be,io-latency=25,io-cost=yes")
    assert (pol.group_io, pol.io_latency_us, pol.io_cost) == ("restrict-to-be", 25_000, True)
    assert pol.group_controls == ["group-io", "io-latency", "io-cost"] and pol.needs_cgroup
    assert pol.settings()["io-latency"] == "25ms"
    assert "group-io" not in priority.BUILTIN["background"].settings()  # older runs: as they were
    assert priority.BUILTIN["latency-target"].io_latency_us == 10_000


@pytest.mark.parametrize(("spec", "words"), [
    ("group-io=rt", "unknown group IO class"), ("io-latency=fast", "not a latency"),
    ("io-latency=0ms", "not a latency"), ("io-cost=maybe", "on or off"),
    ("io-limit=5", "group-io, io-latency, io-cost")])
def test_bad_group_knobs_are_one_line(spec: str, words: str) -> None:
    with pytest.raises(UsageError) as info:
        priority.parse_policy(spec)
    assert words in str(info.value) and "\n" not in str(info.value)


def test_background_policy_is_what_it_says() -> None:
    bg = priority.BUILTIN["background"]
    assert (bg.io, bg.cpu, bg.io_weight, bg.cpu_weight) == (
        IOPrio("idle"), CPUPolicy("idle"), 10, 10)
    assert bg.needs_cgroup and not priority.BUILTIN["gentle"].needs_cgroup


def test_policies_command_lists_builtins() -> None:
    r = bb("policies")
    assert r.returncode == 0
    names = [line.split()[0] for line in r.out.splitlines() if line and not line[0].isspace()]
    assert {"background", "gentle", "group-idle", "low-weight", "latency-target",
            "iocost"} <= set(names)
    assert re.search(r"^latency-target\s+.*io-latency=10ms", r.out, re.M)
    assert re.search(r"^background\s+io=idle\s+cpu=idle\s+io-weight=10\s+cpu-weight=10",
                     r.out, re.M)


# --- ioprio and CPU policy read back from the kernel ---------------------------------------

PROBE = r"""
import os
from backburner.priority import ioprio_get
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
    before = (priority.ioprio_get(0), priority.read_cpu(0))
    child = spawn.launch(["sleep", "5"], policy=policy)
    try:
        assert priority.ioprio_get(child.pid).klass == "idle"
        assert priority.read_cpu(child.pid) == ("batch", 7)
        assert os.sched_getscheduler(child.pid) == os.SCHED_BATCH
    finally:
        child.stop(1.0)
    assert (priority.ioprio_get(0), priority.read_cpu(0)) == before  # the parent: untouched


# --- the background policy's cgroups --------------------------------------------------------


def _v1_mount(controller: str) -> Path:
    for line in Path("/proc/self/mounts").read_text().splitlines():
        dev, mnt, fstype, opts = line.split()[:4]
        if fstype == "cgroup" and controller in opts.split(","):
            return Path(mnt)
    raise AssertionError(f"no cgroup v1 {controller} hierarchy mounted")


def _weight(text: str) -> int:
    """blkio.bfq.weight prints '10' or 'default 10' (plus per-device lines)."""
    m = re.match(r"\s*(?:default\s+)?(\d+)", text)
    assert m, text
    return int(m.group(1))


@pytest.mark.root
def test_background_policy_cgroup(state_dir: Path, tmp_path: Path) -> None:
    pidfile = tmp_path / "job.pid"
    job = ["sh", "-c", 'echo $$ > "$1.tmp" && mv "$1.tmp" "$1" && read line', "sh", str(pidfile)]
    with subprocess.Popen([*BB, "run", "--policy", "background", "--", *job],
                          stdin=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        try:
            wait_for(pidfile.exists, what="the job to start")
            jpid = int(pidfile.read_text())
            name = f"run-{procfs.owner_tag(proc.pid)}"
            groups = {c: _v1_mount(c) / "backburner" / name for c in ("blkio", "cpu")}
            cgroup = Path(f"/proc/{jpid}/cgroup").read_text()
            for ctrl, path in groups.items():
                assert re.search(rf"^\d+:{ctrl}:/backburner/{name}$", cgroup, re.M), cgroup
                assert jpid in map(int, (path / "cgroup.procs").read_text().split())
            assert _weight((groups["blkio"] / "blkio.bfq.weight").read_text()) == 10
            assert int((groups["cpu"] / "cpu.shares").read_text()) == 102
            assert priority.ioprio_get(jpid) == IOPrio("idle")
            assert os.sched_getscheduler(jpid) == os.SCHED_IDLE
            _, err = proc.communicate(b"done\n", timeout=TIMEOUT)
        finally:
            if proc.poll() is None:  # a failed check: let the job end so its cgroups go
                proc.stdin.close()
                proc.wait(TIMEOUT)
    assert proc.returncode == 0, err
    for path in groups.values():
        assert not path.exists()
    assert not list((state_dir / "journal").iterdir())


def test_weight_parser() -> None:
    assert _weight("default 10\n8:0 50\n") == 10
    assert _weight("10\n") == 10


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
                assert priority.ioprio_get(tid) == IOPrio("idle"), tid
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


# --- a missing cgroup controller ------------------------------------------------------------


def _fake_mounts(tmp_path: Path, *cgroup_lines: str) -> str:
    """A mountinfo file from /proc/mounts-style lines (source point type options)."""
    lines = ["proc /proc proc rw,nosuid,nodev,noexec,relatime",
             "tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755", *cgroup_lines]
    mounts = tmp_path / "mountinfo"
    mounts.write_text("".join(
        f"{20 + i} 1 0:{30 + i} / {point} rw,relatime shared:{i} - {fstype} {source} {opts}\n"
        for i, (source, point, fstype, opts, *_) in enumerate(ln.split() for ln in lines)))
    return str(mounts)


@pytest.mark.parametrize(
    "policy, words",
    [(Policy(io_weight=10), "blkio"), (Policy(cpu_weight=10), "cpu controller"),
     (priority.BUILTIN["background"], "blkio")],
)
def test_plan_cgroup_missing_controller_69(tmp_path: Path, policy: Policy, words: str) -> None:
    v2 = tmp_path / "unified"
    v2.mkdir()
    (v2 / "cgroup.controllers").write_text("hugetlb\n")
    mounts = _fake_mounts(
        tmp_path,
        f"cgroup2 {v2} cgroup2 rw,relatime 0 0",
        "cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0",
    )
    with pytest.raises(UnavailableError) as info:
        priority.plan_cgroup(policy, "run-1", mountinfo=mounts)
    assert info.value.exit_status == 69
    assert words in str(info.value) and "\n" not in str(info.value)


def test_plan_cgroup_v1_with_controllers(tmp_path: Path) -> None:
    mounts = _fake_mounts(
        tmp_path,
        "cgroup /x/blkio cgroup rw,relatime,blkio 0 0",
        "cgroup /x/cpu,cpuacct cgroup rw,relatime,cpu,cpuacct 0 0",
    )
    plan = priority.plan_cgroup(priority.BUILTIN["background"], "run-7", mountinfo=mounts)
    assert plan.version == 1
    assert plan.dirs == {
        "/x/blkio/backburner/run-7": {"blkio.bfq.weight": "10"},
        "/x/cpu,cpuacct/backburner/run-7": {"cpu.shares": "102"},
    }


def test_plan_cgroup_prefers_v2_with_controllers(tmp_path: Path) -> None:
    v2 = tmp_path / "unified"
    v2.mkdir()
    (v2 / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    mounts = _fake_mounts(tmp_path, f"cgroup2 {v2} cgroup2 rw 0 0",
                          "cgroup /x/blkio cgroup rw,blkio 0 0")
    plan = priority.plan_cgroup(priority.BUILTIN["background"], "run-7", mountinfo=mounts)
    assert plan.version == 2
    assert plan.dirs == {
        str(v2 / "backburner" / "run-7"): {"io.bfq.weight|io.weight": "10", "cpu.weight": "10"}
    }
    # memory with io: the job's writeback is charged to its group only with both on
    assert plan.enable == ("cpu", "io", "memory") and plan.root == str(v2)
    (v2 / "cgroup.controllers").write_text("cpu io\n")
    plan = priority.plan_cgroup(priority.BUILTIN["background"], "run-7", mountinfo=mounts)
    assert plan.enable == ("cpu", "io")  # a kernel without the memory controller


def test_v2_changes_enable_controllers_in_root_and_parent(tmp_path: Path) -> None:
    """On cgroup v2 a child gets io.weight/cpu.weight only if the controllers are on in every
    ancestor's subtree_control: the plan must switch them on, journaled, before the group."""
    from backburner import system
    from backburner.run import job

    v2 = tmp_path / "unified"
    v2.mkdir()
    (v2 / "cgroup.controllers").write_text("cpu io memory\n")
    mounts = _fake_mounts(tmp_path, f"cgroup2 {v2} cgroup2 rw 0 0")
    plan = priority.plan_cgroup(priority.BUILTIN["background"], "run-9", mountinfo=mounts)
    changes = job.cgroup_changes(plan)
    assert isinstance(changes[0], system.ControllersEnabled)
    assert changes[0].path == str(v2 / "cgroup.subtree_control")
    assert changes[0].controllers == ["cpu", "io", "memory"]
    parent, child = changes[1], changes[2]
    assert parent.path == str(v2 / "backburner") and parent.shared
    assert parent.settings == {"cgroup.subtree_control": "+cpu +io +memory"}
    assert child.path == str(v2 / "backburner" / "run-9")


def test_controllers_enabled_undo_turns_off_only_what_was_off(tmp_path: Path) -> None:
    from backburner import system

    ctl = tmp_path / "cgroup.subtree_control"
    ctl.write_text("memory\n")
    change = system.ControllersEnabled(str(ctl), ["io", "memory"])
    old = change.read()
    change.apply()
    assert ctl.read_text() == "+io +memory"  # a plain file records the last write
    change.undo(old, None)
    assert ctl.read_text() == "-io"  # memory was on before: left on


def test_cgroup_settings_take_the_first_file_that_exists(tmp_path: Path) -> None:
    """'io.bfq.weight|io.weight': BFQ's file where BFQ provides it, else the generic one."""
    from backburner import system

    group = tmp_path / "g"
    group.mkdir()
    (group / "io.weight").write_text("default 100\n")
    system.CgroupDir(str(group), {"io.bfq.weight|io.weight": "10"}).apply()
    assert (group / "io.weight").read_text() == "10"
    (group / "io.bfq.weight").write_text("100\n")
    system.CgroupDir(str(group), {"io.bfq.weight|io.weight": "20"}).apply()
    assert (group / "io.bfq.weight").read_text() == "20"
    with pytest.raises(SystemStateError):
        system.CgroupDir(str(group), {"cpu.weight": "5"}).apply()


# --- ioprio system call numbers on every Debian architecture --------------------------------

#: Debian architecture -> the platform.machine() names it reports, and the ABI's numbers.
DEBIAN_ARCHES = {
    "amd64": (["x86_64"], 64, (251, 252)),
    "i386": (["i386", "i586", "i686"], 32, (289, 290)),
    "arm64": (["aarch64"], 64, (30, 31)),
    "armel/armhf": (["armv5tel", "armv6l", "armv7l", "armv8l"], 32, (314, 315)),
    "mips64el": (["mips64"], 64, (5273, 5274)),
    "ppc64el": (["ppc64le"], 64, (273, 274)),
    "riscv64": (["riscv64"], 64, (30, 31)),
    "s390x": (["s390x"], 64, (282, 283)),
    "loong64": (["loongarch64"], 64, (30, 31)),
}


@pytest.mark.parametrize("arch", sorted(DEBIAN_ARCHES))
def test_ioprio_syscall_numbers_for_every_debian_architecture(arch: str) -> None:
    machines, bits, numbers = DEBIAN_ARCHES[arch]
    for machine in machines:
        assert priority.syscall_numbers(machine, bits) == numbers, machine


@pytest.mark.parametrize("machine, numbers", [("x86_64", (289, 290)), ("aarch64", (314, 315)),
                                              ("mips64", (4314, 4315)), ("s390x", (282, 283))])
def test_a_32_bit_userland_on_a_64_bit_kernel_uses_the_32_bit_abi(machine: str,
                                                                  numbers: tuple) -> None:
    assert priority.syscall_numbers(machine, 32) == numbers


def test_an_unknown_architecture_is_unavailable_not_a_wrong_syscall() -> None:
    with pytest.raises(UnavailableError, match="sparc64"):
        priority.syscall_numbers("sparc64", 64)


def test_the_numbers_for_this_machine_are_the_c_library_headers() -> None:
    """The running ABI's numbers as the system headers define them (the C preprocessor picks
    the header for this ABI, as a compiled program would)."""
    import platform
    import shutil
    import struct
    import warnings

    cc = shutil.which("cc") or shutil.which("gcc")
    src = b"#include <sys/syscall.h>\nioprio: __NR_ioprio_set __NR_ioprio_get\n"
    done = subprocess.run([cc, "-E", "-P", "-"], input=src, capture_output=True,
                          timeout=TIMEOUT) if cc else None
    if done is None or done.returncode != 0:
        warnings.warn("no C compiler or libc headers here: the numbers are checked only by "
                      "the ionice test", stacklevel=1)
        return
    out = done.stdout.decode()
    line = [ln for ln in out.splitlines() if ln.startswith("ioprio:")][-1]
    expected = tuple(int(n.strip("()")) for n in line.split()[1:])
    machine = platform.machine()
    assert priority.syscall_numbers(machine, struct.calcsize("P") * 8) == expected


def test_ioprio_set_and_get_agree_with_ionice_on_the_running_kernel() -> None:
    """The numbers are right if the kernel does what they say: a level set through them is
    what util-linux's ionice (built for this ABI) reads back, and vice versa."""
    child = subprocess.Popen(["sleep", "30"])
    try:
        priority.ioprio_set(child.pid, IOPrio("be", 6))
        out = subprocess.run(["ionice", "-p", str(child.pid)], capture_output=True, text=True,
                             check=True, timeout=TIMEOUT).stdout
        assert out.strip() == "best-effort: prio 6"
        subprocess.run(["ionice", "-c", "3", "-p", str(child.pid)], check=True,
                       timeout=TIMEOUT)
        assert priority.ioprio_get(child.pid).klass == "idle"
    finally:
        child.kill()
        child.wait()


def test_has_policy_tells_a_thread_that_copied_the_new_values() -> None:
    from backburner.priority import CPUPolicy, IOPrio, Policy, has_policy

    idle = {"start": 1, "io": IOPrio("idle").value, "policy": os.SCHED_IDLE, "nice": 0}
    normal = {"start": 1, "io": 0, "policy": os.SCHED_OTHER, "nice": 0}
    assert has_policy(idle, Policy(io=IOPrio("idle"), cpu=CPUPolicy("idle")))
    assert not has_policy(normal, Policy(io=IOPrio("idle")))
    assert has_policy(normal, Policy(cpu=CPUPolicy("normal")))
    assert not has_policy(dict(normal, nice=5), Policy(cpu=CPUPolicy("normal", 10)))
    assert has_policy(dict(normal, nice=10), Policy(cpu=CPUPolicy("normal", 10)))
    assert not has_policy(idle, Policy(cpu=CPUPolicy("batch")))
