"""systemd as the owner of the cgroup tree: the decision (pure), the systemd-run argv
(pure), the policy as unit settings (checked by the real systemd-analyze in
tests/apply/test_install.py), and `run` through a transient scope.

This machine does not run systemd as PID 1, so the scope path cannot run end to end here:
it is exercised with a stand-in for systemd-run that does what the real one does in --scope
mode after systemd has made the scope (exec the command in place), which tests our side —
the argv, the priorities set before it starts, the exit mirroring — and nothing of systemd's.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from backburner import systemd
from backburner.base.errors import UsageError
from backburner.policy import grammar
from backburner.run import job
from backburner.systemd import Facts

BACKGROUND = grammar.BUILTIN["background"]

# --- the decision (pure) --------------------------------------------------------------------


@pytest.mark.parametrize("booted, cgroup, managed", [
    (True, "0::/init.scope\n", True),                                   # unified
    (True, "12:pids:/init.scope\n1:name=systemd:/init.scope\n0::/init.scope\n", True),  # hybrid
    (True, "10:cpu:/\n1:name=systemd:/init.scope\n", True),             # legacy v1
    (True, "0::/machine.slice/box.scope/init.scope\n", True),           # container, no cgroupns
    (False, "0::/init.scope\n", False),                                 # not booted with systemd
    (True, "0::/\n", False),                                            # another init
    (True, "9:name=systemd:/\n1:cpu:/\n0::/\n", False),                 # this VM: not ours
    (True, "0::/system.slice/init.scope.d\n", False),
    (True, "1:cpu:/init.scope\n", False),                               # a controller, not systemd
    (True, "", False),
    (True, "garbage\n0:/init.scope\n", False),
])
def test_systemd_manages_cgroups_only_when_booted_and_in_its_init_scope(
        booted: bool, cgroup: str, managed: bool) -> None:
    assert systemd.manages_cgroups(Facts(booted, cgroup)) is managed


def test_the_decision_on_this_machine_matches_who_pid_1_is() -> None:
    """An independent look: systemd as PID 1 calls itself systemd."""
    comm = Path("/proc/1/comm").read_text().strip()
    expected = Path("/run/systemd/system").is_dir() and comm == "systemd"
    assert systemd.manages_cgroups(systemd.read_facts()) is expected


# --- the argv (pure) ------------------------------------------------------------------------


def test_unit_names_are_unique_per_run() -> None:
    names = {systemd.scope_unit_name(123) for _ in range(50)}
    assert len(names) == 50
    assert all(n.startswith("backburner-run-123-") and n.endswith(".scope") for n in names)


@pytest.mark.parametrize("spec, expected", [
    ("background", {"IOSchedulingClass": "idle", "CPUSchedulingPolicy": "idle",
                    "IOWeight": "10", "CPUWeight": "10"}),
    ("gentle", {"IOSchedulingClass": "best-effort", "IOSchedulingPriority": "7",
                "CPUSchedulingPolicy": "other", "Nice": "19"}),
    ("io=rt:2,cpu=batch:5", {"IOSchedulingClass": "realtime", "IOSchedulingPriority": "2",
                             "CPUSchedulingPolicy": "batch", "Nice": "5"}),
    ("io=none,cpu=normal", {"CPUSchedulingPolicy": "other"}),
    ("default", {}),
])
def test_service_properties_of_a_policy(spec: str, expected: dict[str, str]) -> None:
    assert systemd.service_properties(grammar.parse_policy(spec)) == expected


@pytest.mark.parametrize("name, unit", [("apt-daily-upgrade", "apt-daily-upgrade.service"),
                                        ("backup@home.service", "backup@home.service")])
def test_unit_names(name: str, unit: str) -> None:
    assert systemd.check_unit_name(name) == unit


@pytest.mark.parametrize("name", ["", "../etc/passwd", "a b.service", "x.service\n[Unit]",
                                  "foo.timer", ".service", "a" * 300])
def test_bad_unit_names_are_usage_errors(name: str) -> None:
    with pytest.raises(UsageError):
        systemd.check_unit_name(name)


MANAGED = Facts(True, "0::/init.scope\n")


@pytest.mark.root
def test_without_systemd_the_job_gets_our_own_cgroup(state_dir: Path, tmp_path: Path) -> None:
    """The fallback, on the real kernel: the job reads its own cgroup membership."""
    out_file = tmp_path / "cgroup"
    out = job.run_job(["sh", "-c", f"cat /proc/self/cgroup > {out_file}"],
                      grammar.Policy("w", cpu_weight=50), facts=Facts(False, ""))
    assert out.exit_code == 0
    assert f"/backburner/run-{os.getpid()}-" in out_file.read_text()
