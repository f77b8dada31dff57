"""cgroup v2's group-level IO controls: which file a policy needs and this machine lacks
(one line naming it, on fake trees and on this host's own, which has no v2 io controller),
the files and per-device lines written, and what run, govern and apply refuse."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import bb

from backburner import cgroup2, priority
from backburner.base.errors import UnavailableError, UsageError
from backburner.priority import Policy

B = priority.BUILTIN


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
    assert cgroup2.missing(B[name], str(_tree(tmp_path))) is None


def test_a_policy_without_group_knobs_needs_nothing() -> None:
    assert cgroup2.missing(B["background"], None) is None
    assert cgroup2.missing(B["low-weight"], None) is None


@pytest.mark.parametrize(("name", "kw", "file"), [
    ("group-idle", {"files": ("io.latency",)}, "a.slice/io.prio.class"),
    ("latency-target", {"files": ("io.prio.class",)}, "a.slice/io.latency"),
    ("iocost", {"qos": False}, "cg/io.cost.qos"),
    ("group-idle", {"controllers": "cpu memory"}, "cg/cgroup.controllers"),
])
def test_the_missing_file_is_named_in_one_line(tmp_path: Path, name: str, kw: dict,
                                               file: str) -> None:
    why = cgroup2.missing(B[name], str(_tree(tmp_path, **kw)))
    assert why is not None and file in why and "\n" not in why, why
    assert why.startswith(f"policy {name} needs cgroup v2's")


def test_no_group_with_io_yet_defers_to_the_first_group(tmp_path: Path) -> None:
    """At boot systemd has io on for no group: the root cannot tell, the command's own
    first group does (bench asks its probe group before any load group)."""
    root = _tree(tmp_path, child=None)
    assert cgroup2.missing(B["group-idle"], str(root)) is None
    probe = root / "probe"
    probe.mkdir()
    why = cgroup2.missing_in(str(probe), B["latency-target"])
    assert why is not None and f"{probe}/io.latency is missing" in why


def test_this_host_has_no_cgroup_v2_io_controller() -> None:
    """The development machine: v1 controllers, an empty cgroup2 mount."""
    root = cgroup2.unified_root()
    why = cgroup2.missing(B["group-idle"], root)
    if root is not None and "io" in Path(root, "cgroup.controllers").read_text().split():
        pytest.skip("this machine has cgroup v2's io controller")
    assert why is not None and ("cgroup.controllers" in why or "no cgroup2" in why), why


def test_group_files_write_both_weights_and_the_class() -> None:
    pol = B["iocost"].with_overrides(group_io="idle", cpu_weight=20)
    assert cgroup2.group_files(pol) == {"io.weight": "10", "io.bfq.weight?": "10",
                                        "cpu.weight": "20", "io.prio.class": "idle"}


def test_device_lines() -> None:
    assert cgroup2.latency_line("8:16", 10_000) == "8:16 target=10000"
    assert cgroup2.latency_line("8:16", None) == "8:16 target=max"
    assert cgroup2.qos_line("254:0", True) == "254:0 enable=1"
    text = "8:0 enable=0 ctrl=auto\n8:16 enable=1 ctrl=user rpct=95.00\n"
    assert cgroup2.device_line(text, "8:16") == "8:16 enable=1 ctrl=user rpct=95.00"
    assert cgroup2.device_line(text, "8:1") is None


def test_io_stat_of_one_device(tmp_path: Path) -> None:
    (tmp_path / "io.stat").write_text("254:0 rbytes=4096 wbytes=25165824 rios=1 wios=24 "
                                      "dbytes=0 dios=0\n7:0 rbytes=1\n")
    assert cgroup2.io_stat(str(tmp_path), "254:0")["wbytes"] == 25165824
    assert cgroup2.io_stat(str(tmp_path), "8:0") == {}
    assert cgroup2.io_stat(str(tmp_path / "gone"), "254:0") == {}


@pytest.mark.parametrize("name", ["latency-target", "iocost"])
def test_bench_only_knobs_are_refused_for_a_job(name: str) -> None:
    with pytest.raises(UsageError) as info:
        cgroup2.refuse_for_job(B[name], "run")
    assert info.value.exit_status == 64 and "only in bench" in str(info.value)


def test_group_io_is_refused_only_where_systemd_owns_the_groups() -> None:
    cgroup2.refuse_for_job(B["group-idle"], "run")  # our own groups: written there
    with pytest.raises(UnavailableError) as info:
        cgroup2.refuse_for_job(B["group-idle"], "run", under_systemd=True)
    assert "no systemd unit property" in str(info.value)
    cgroup2.refuse_for_job(B["background"], "apply", under_systemd=True)


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
    plan = priority.plan_cgroup(Policy(group_io="idle"), "run-1", mountinfo=str(mounts))
    assert plan.dirs == {str(v2 / "backburner" / "run-1"): {"io.prio.class": "idle"}}
    assert plan.enable == ("io", "memory")  # memory too: the class reaches its writeback
    (v2 / "cgroup.controllers").write_text("cpu memory\n")
    with pytest.raises(UnavailableError, match="cgroup.controllers does not list io"):
        priority.plan_cgroup(Policy(group_io="idle"), "run-1", mountinfo=str(mounts))
