"""policy.cgroup_plan: the groups and files a policy's weights and group knobs need (v1
or v2, on fake trees), the refusals naming the missing file or controller in one line
(on fake trees and on this host), what run, govern and apply refuse, and the background
policy's groups made, checked and removed by `run`."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from helpers import BB, TIMEOUT, bb, wait_for

from backburner.base.errors import SystemStateError, UnavailableError, UsageError
from backburner.kernel import cgroups, priorities, procfs
from backburner.kernel.priorities import IOPrio
from backburner.policy import cgroup_plan, grammar
from backburner.policy.grammar import Policy

B = grammar.BUILTIN


# --- the background policy's cgroups --------------------------------------------------------


def _v1_mount(controller: str) -> Path:
    mnt = cgroups.v1_mount(controller)
    assert mnt is not None, f"no cgroup v1 {controller} hierarchy mounted"
    return Path(mnt)


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
            assert priorities.ioprio_get(jpid) == IOPrio("idle")
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
     (grammar.BUILTIN["background"], "blkio")],
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
        cgroup_plan.plan_cgroup(policy, "run-1", mountinfo=mounts)
    assert info.value.exit_status == 69
    assert words in str(info.value) and "\n" not in str(info.value)


def test_plan_cgroup_v1_with_controllers(tmp_path: Path) -> None:
    mounts = _fake_mounts(
        tmp_path,
        "cgroup /x/blkio cgroup rw,relatime,blkio 0 0",
        "cgroup /x/cpu,cpuacct cgroup rw,relatime,cpu,cpuacct 0 0",
    )
    plan = cgroup_plan.plan_cgroup(grammar.BUILTIN["background"], "run-7", mountinfo=mounts)
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
    plan = cgroup_plan.plan_cgroup(grammar.BUILTIN["background"], "run-7", mountinfo=mounts)
    assert plan.version == 2
    assert plan.dirs == {
        str(v2 / "backburner" / "run-7"): {"io.bfq.weight|io.weight": "10", "cpu.weight": "10"}
    }
    # memory with io: the job's writeback is charged to its group only with both on
    assert plan.enable == ("cpu", "io", "memory") and plan.root == str(v2)
    (v2 / "cgroup.controllers").write_text("cpu io\n")
    plan = cgroup_plan.plan_cgroup(grammar.BUILTIN["background"], "run-7", mountinfo=mounts)
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
    plan = cgroup_plan.plan_cgroup(grammar.BUILTIN["background"], "run-9", mountinfo=mounts)
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



def _tree(tmp_path: Path, controllers: str = "cpu io memory", child: str | None = "a.slice",
          files: tuple[str, ...] = ("io.prio.class", "io.latency"), qos: bool = True) -> Path:
    root = tmp_path / "cg"
    root.mkdir()
    (root / "cgroup.controllers").write_text(controllers + "\n")
    if qos:
        (root / "io.cost.qos").write_text("")
    if child:
        (root / child).mkdir()
        (root / child / "cgroup.controllers").write_text("io memory\n")
        for name in files:
            (root / child / name).write_text("")
    return root


@pytest.mark.parametrize("name", ["group-idle", "latency-target", "iocost"])
def test_a_complete_tree_lacks_nothing(tmp_path: Path, name: str) -> None:
    assert cgroup_plan.missing(B[name], str(_tree(tmp_path))) is None


def test_a_policy_without_group_knobs_needs_nothing() -> None:
    assert cgroup_plan.missing(B["background"], None) is None
    assert cgroup_plan.missing(B["low-weight"], None) is None


@pytest.mark.parametrize(("name", "kw", "file"), [
    ("group-idle", {"files": ("io.latency",)}, "a.slice/io.prio.class"),
    ("latency-target", {"files": ("io.prio.class",)}, "a.slice/io.latency"),
    ("iocost", {"qos": False}, "cg/io.cost.qos"),
    ("group-idle", {"controllers": "cpu memory"}, "cg/cgroup.controllers"),
])
def test_the_missing_file_is_named_in_one_line(tmp_path: Path, name: str, kw: dict,
                                               file: str) -> None:
    why = cgroup_plan.missing(B[name], str(_tree(tmp_path, **kw)))
    assert why is not None and file in why and "\n" not in why, why
    assert why.startswith(f"policy {name} needs cgroup v2's")


def test_no_group_with_io_yet_defers_to_the_first_group(tmp_path: Path) -> None:
    """At boot systemd has io on for no group: the root cannot tell, the command's own
    first group does (bench asks its probe group before any load group)."""
    root = _tree(tmp_path, child=None)
    assert cgroup_plan.missing(B["group-idle"], str(root)) is None
    probe = root / "probe"
    probe.mkdir()
    why = cgroup_plan.missing_in(str(probe), B["latency-target"])
    assert why is not None and f"{probe}/io.latency is missing" in why


def test_this_host_has_no_cgroup_v2_io_controller() -> None:
    """The development machine: v1 controllers, an empty cgroup2 mount."""
    root = cgroups.unified_root()
    why = cgroup_plan.missing(B["group-idle"], root)
    if root is not None and "io" in Path(root, "cgroup.controllers").read_text().split():
        pytest.skip("this machine has cgroup v2's io controller")
    assert why is not None and ("cgroup.controllers" in why or "no cgroup2" in why), why


def test_group_files_write_both_weights_and_the_class() -> None:
    pol = B["iocost"].with_overrides(group_io="idle", cpu_weight=20)
    assert cgroup_plan.group_files(pol) == {"io.weight": "10", "io.bfq.weight?": "10",
                                        "cpu.weight": "20", "io.prio.class": "idle"}


@pytest.mark.parametrize("name", ["latency-target", "iocost"])
def test_bench_only_knobs_are_refused_for_a_job(name: str) -> None:
    with pytest.raises(UsageError) as info:
        cgroup_plan.refuse_for_job(B[name], "run")
    assert info.value.exit_status == 64 and "only in bench" in str(info.value)


def test_group_io_is_refused_only_where_systemd_owns_the_groups() -> None:
    cgroup_plan.refuse_for_job(B["group-idle"], "run")  # our own groups: written there
    with pytest.raises(UnavailableError) as info:
        cgroup_plan.refuse_for_job(B["group-idle"], "run", under_systemd=True)
    assert "no systemd unit property" in str(info.value)
    cgroup_plan.refuse_for_job(B["background"], "apply", under_systemd=True)


# --- the commands, on this host (no cgroup v2 io controller) --------------------------------

def test_run_refuses_a_bench_only_policy_in_one_line() -> None:
    r = bb("run", "--policy", "latency-target", "--", "true")
    assert r.returncode == 125, r.err  # run's own failure, as for every refusal of run
    assert r.err.strip().count("\n") == 0 and "only in bench" in r.err, r.err


@pytest.mark.root
def test_run_refuses_group_io_here_naming_the_file() -> None:
    r = bb("run", "--policy", "group-idle", "--", "true")
    assert r.returncode == 125, r.err
    assert r.err.strip().count("\n") == 0 and "io.prio.class" in r.err, r.err


def test_apply_refuses_group_io_for_a_unit() -> None:
    r = bb("apply", "--unit", "updater.service", "--policy", "group-idle", "--dry-run")
    assert r.returncode == 69, r.err
    assert "io.prio.class" in r.err and r.err.strip().count("\n") == 0, r.err


def test_no_cgroup_refuses_group_knobs() -> None:
    r = bb("run", "--no-cgroup", "--policy", "group-idle", "--", "true")
    assert r.returncode == 125 and "--no-cgroup" in r.err, r.err


def test_plan_cgroup_puts_the_class_in_the_v2_group(tmp_path: Path) -> None:
    v2 = tmp_path / "unified"
    v2.mkdir()
    (v2 / "cgroup.controllers").write_text("cpu io memory\n")
    mounts = tmp_path / "mountinfo"
    mounts.write_text(f"1 0 0:1 / {v2} rw - cgroup2 cgroup2 rw\n")
    plan = cgroup_plan.plan_cgroup(Policy(group_io="idle"), "run-1", mountinfo=str(mounts))
    assert plan.dirs == {str(v2 / "backburner" / "run-1"): {"io.prio.class": "idle"}}
    assert plan.enable == ("io", "memory")  # memory too: the class reaches its writeback
    (v2 / "cgroup.controllers").write_text("cpu memory\n")
    with pytest.raises(UnavailableError, match="cgroup.controllers does not list io"):
        cgroup_plan.plan_cgroup(Policy(group_io="idle"), "run-1", mountinfo=str(mounts))
