"""disks: which levers a policy pulls, the fix and the one warning line (from made-up
disks), and on this machine a loop device set to `none` holding the working directory:
`run -v --policy background` there warns in one line naming it and the fix, `-q` silences
it, and the exit status stays the job's."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import BB, TIMEOUT

from backburner.kernel import block, levers
from backburner.kernel.levers import Disk, Effect, GroupIO
from backburner.policy import disks
from backburner.policy.disks import DiskReport
from backburner.policy.grammar import BUILTIN, parse_policy

V1 = GroupIO("v1")
BACKGROUND = BUILTIN["background"]


@pytest.mark.parametrize("policy, wanted", [
    ("background", (levers.IO_CLASS, levers.IO_WEIGHT)),
    ("gentle", (levers.IO_CLASS,)),
    ("default", ()),
    ("io=none", ()),  # "no class": nothing to honour
    ("group-idle", (levers.GROUP_IO,)),
    ("iocost", (levers.IO_WEIGHT, levers.IO_COST)),
    ("latency-target", (levers.IO_LATENCY,)),
    ("cpu=idle,cpu-weight=10", ()),  # the CPU acts on any disk
])
def test_the_levers_a_policy_pulls(policy: str, wanted: tuple[str, ...]) -> None:
    assert disks.asked([parse_policy(policy)]) == wanted


def _report(name: str, kind: str | None, scheduler: str, classes: bool,
            holds: tuple[str, ...]) -> DiskReport:
    effect = Effect(Disk(name, "8:0", kind, scheduler, block.SCHEDULERS, classes), V1)
    ignored = effect.ignored(disks.asked([BACKGROUND]))
    return DiskReport(effect, holds, holds, ignored, disks.cure_for(effect, ignored))


def test_one_line_names_each_disk_what_it_runs_and_the_fix() -> None:
    nvme = _report("nvme0n1", block.NVME, "none", False, ("/", "/var"))
    assert disks.warning_of([nvme]) == (
        "nvme0n1 (/, /var) runs none: the IO class and the IO weight do nothing there; "
        "backburner apply --scheduler bfq --devices nvme")
    assert disks.warning_of([nvme], skip=["nvme0n1"]) is None  # a rule about to change it
    bfq = _report("sda", block.ROTATIONAL, "bfq", True, ("/",))
    assert bfq.ignored == () and bfq.fix is None and disks.warning_of([bfq]) is None
    home = _report("sdb", block.ROTATIONAL, "kyber", False, ("/home",))
    assert disks.warning_of([home]) is None  # /home is said by doctor, not by a job's line


def test_two_classes_get_the_one_command_that_installs_a_rule_for_each() -> None:
    line = disks.warning_of([
        _report("nvme0n1", block.NVME, "none", False, ("/",)),
        _report("sda", block.NON_ROTATIONAL, "mq-deadline", True, (disks.WORKDIR,))])
    assert line == ("nvme0n1 (/) runs none: the IO class and the IO weight do nothing there; "
                    "sda (the working directory) runs mq-deadline: the IO weight does nothing "
                    "there; backburner apply --scheduler recommended")


def test_a_loop_device_is_fixed_through_sysfs_no_udev_rule_matches_it() -> None:
    loop = _report("loop7", block.NON_ROTATIONAL, "none", False, (disks.WORKDIR,))
    assert loop.fix == "echo bfq > /sys/block/loop7/queue/scheduler"


def test_a_lever_the_kernel_lacks_has_no_scheduler_fix() -> None:
    effect = Effect(Disk("sda", "8:0", block.ROTATIONAL, "bfq", block.SCHEDULERS, True),
                    GroupIO("v2", latency=False))
    ignored = effect.ignored(disks.asked([BUILTIN["latency-target"]]))
    assert ignored == (levers.IO_LATENCY,) and disks.cure_for(effect, ignored) is None


# --- on this machine -------------------------------------------------------------------------


@pytest.fixture
def none_disk(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """An ext4 on a loop device flagged non-rotational, its scheduler `none`, mounted."""
    image = tmp_path / "disk.img"
    with open(image, "wb") as f:
        f.truncate(64 << 20)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], check=True, timeout=60)
    dev = subprocess.run(["losetup", "--find", "--show", str(image)], capture_output=True,
                         text=True, timeout=TIMEOUT, check=True).stdout.strip()
    name = os.path.basename(dev)
    queue = Path("/sys/block", name, "queue")
    before = {f: block.parse_schedulers((queue / f).read_text())[1]
              for f in ("scheduler", "rotational")}
    where = tmp_path / "mnt"
    where.mkdir()
    try:
        (queue / "scheduler").write_text("none")
        (queue / "rotational").write_text("0")
        subprocess.run(["mount", dev, str(where)], check=True, timeout=TIMEOUT)
        try:
            yield name, where
        finally:
            subprocess.run(["umount", str(where)], check=True, timeout=TIMEOUT)
    finally:
        for f, value in before.items():
            if value:
                (queue / f).write_text(value)
        subprocess.run(["losetup", "-d", dev], timeout=TIMEOUT, check=True)


@pytest.mark.root
def test_the_disk_of_the_working_directory_is_reported_with_its_facts(
        none_disk: tuple[str, Path]) -> None:
    name, where = none_disk
    found = {r.name: r for r in disks.reports(cwd=str(where))}
    r = found[name]
    assert r.holds == (disks.WORKDIR,) and str(where) in r.mounts
    assert r.effect.disk.kind == block.NON_ROTATIONAL and r.effect.disk.scheduler == "none"
    assert r.ignored == (levers.IO_CLASS, levers.IO_WEIGHT)
    assert r.as_dict()["fix"] == f"echo bfq > /sys/block/{name}/queue/scheduler"
    assert name not in {r.name for r in disks.reports(cwd="/")}  # a loop device: only
    # when it holds a path that matters


@pytest.mark.root
def test_run_warns_once_from_a_directory_on_a_disk_running_none(
        none_disk: tuple[str, Path], state_dir: Path) -> None:
    name, where = none_disk
    argv = [*BB, "run", "-v", "--policy", "background", "--", sys.executable, "-c",
            "raise SystemExit(3)"]
    r = subprocess.run(argv, cwd=where, capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 3, r.stderr  # the job's status, warning or not
    warned = [ln for ln in r.stderr.splitlines() if ln.startswith("backburner: warning:")]
    assert len(warned) == 1, r.stderr
    assert f"{name} (the working directory) runs none: the IO class and the IO weight do " \
           f"nothing there" in warned[0]
    assert f"echo bfq > /sys/block/{name}/queue/scheduler" in warned[0]
    quiet = subprocess.run([*BB, "run", "-q", *argv[len(BB) + 1:]], cwd=where,
                           capture_output=True, text=True, timeout=TIMEOUT)
    assert quiet.returncode == 3 and "warning" not in quiet.stderr, quiet.stderr
    # run's own failures stay one line: no warning beside them
    missing = subprocess.run([*BB, "run", "--policy", "background", "--", "bb-no-such-cmd"],
                             cwd=where, capture_output=True, text=True, timeout=TIMEOUT)
    assert missing.returncode == 127 and len(missing.stderr.splitlines()) == 1, missing.stderr
    Path("/sys/block", name, "queue", "scheduler").write_text("bfq")
    cured = subprocess.run(argv, cwd=where, capture_output=True, text=True, timeout=TIMEOUT)
    assert name not in cured.stderr.partition("applying")[0], cured.stderr
