"""kernel.levers: what each lever of a policy does on one disk, on made-up disks and
groups (every answer of the model), read from made-up sysfs and cgroupfs trees, and on a
real loop device switched through each scheduler (this host: cgroup v1; cgroup v2 in the
guest, tests/vm/test_guest_levers.py)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from backburner.kernel import block, cgroups, levers
from backburner.kernel.levers import Disk, Effect, GroupIO

from .sysfs import disk

TIMEOUT = 30
V2 = GroupIO("v2", writeback=True, prio_class=True, latency=False, cost=True)
V1 = GroupIO("v1")


def _disk(scheduler: str, classes: bool | None, iocost: bool = False) -> Disk:
    return Disk("nvme0n1", "259:0", block.NVME, scheduler, block.SCHEDULERS, classes, iocost)


@pytest.mark.parametrize("scheduler, classes, iocost, groups, weight", [
    ("bfq", True, False, V2, "io.bfq.weight"),
    ("bfq", True, False, V1, "blkio.bfq.weight"),
    ("bfq", True, False, GroupIO("none"), None),
    ("mq-deadline", True, False, V2, None),
    ("none", False, False, V2, None),
    ("kyber", False, False, V1, None),
    ("none", False, True, V2, "io.weight"),  # io.cost: weights whatever the scheduler
    ("none", False, True, V1, None),  # io.cost is cgroup v2's
    ("bfq", True, True, V2, "io.weight"),
])
def test_which_weight_acts(scheduler: str, classes: bool, iocost: bool, groups: GroupIO,
                           weight: str | None) -> None:
    effect = Effect(_disk(scheduler, classes, iocost), groups)
    assert effect.weight == weight
    assert effect.acts(levers.IO_WEIGHT) is (weight is not None)
    assert effect.writeback is (weight is not None and groups.writeback)


def test_what_none_ignores_of_the_background_policy() -> None:
    effect = Effect(_disk("none", False), V1)
    assert effect.ignored([levers.IO_CLASS, levers.IO_WEIGHT]) == (levers.IO_CLASS,
                                                                    levers.IO_WEIGHT)
    assert Effect(_disk("bfq", True), V1).ignored([levers.IO_CLASS, levers.IO_WEIGHT]) == ()
    # mq-deadline with priorities: the class acts, a weight does not
    assert Effect(_disk("mq-deadline", True), V1).ignored(
        [levers.IO_CLASS, levers.IO_WEIGHT]) == (levers.IO_WEIGHT,)


def test_group_files_act_where_they_exist_and_the_class_is_honoured() -> None:
    assert Effect(_disk("bfq", True), V2).acts(levers.GROUP_IO)
    assert not Effect(_disk("none", False), V2).acts(levers.GROUP_IO)
    assert not Effect(_disk("bfq", True), GroupIO("v2", prio_class=False)).acts(levers.GROUP_IO)
    assert not Effect(_disk("bfq", True), V2).acts(levers.IO_LATENCY)
    assert Effect(_disk("none", False), V2).acts(levers.IO_COST)


def test_writeback_is_held_back_only_when_charged_and_weighted() -> None:
    assert Effect(_disk("bfq", True), V2).writeback
    assert not Effect(_disk("bfq", True), GroupIO("v2", writeback=False)).writeback
    assert not Effect(_disk("bfq", True), V1).writeback  # v1: the flusher's, the root's
    assert not Effect(_disk("none", False), V2).writeback


@pytest.mark.parametrize("scheduler, iosched, classes", [
    ("[bfq]", {"low_latency": "1"}, True),
    ("[mq-deadline]", {"prio_aging_expire": "10000"}, True),
    ("[mq-deadline]", {"prio_aging_expire": "0"}, False),  # 0 turns priorities off
    ("[mq-deadline]", {"read_expire": "500"}, False),  # a kernel without them
    ("[none] bfq", {}, False),
    ("[kyber]", {"read_lat_nsec": "2000000"}, False),
    ("[vendor]", {}, None),  # outside mainline: cannot tell
])
def test_whether_the_scheduler_honours_classes_is_read_from_what_it_exposes(
        tmp_path: Path, scheduler: str, iosched: dict[str, str], classes: bool | None
        ) -> None:
    disk(tmp_path, "sda", scheduler=scheduler, iosched=iosched, devno="8:0")
    assert levers.read_disk("sda", str(tmp_path / "block")).classes is classes


def test_io_cost_on_a_disk_is_its_line_in_the_roots_qos(tmp_path: Path) -> None:
    disk(tmp_path, "sda", devno="8:0")
    disk(tmp_path, "sdb", devno="8:16")
    root = tmp_path / "cgroup"
    root.mkdir()
    (root / "io.cost.qos").write_text(
        "8:0 enable=1 ctrl=auto rpct=0.00 rlat=250000 wpct=0.00 wlat=250000 min=1.00 "
        "max=10000.00\n8:16 enable=0 ctrl=auto rpct=0.00 rlat=250000 wpct=0.00 "
        "wlat=250000 min=1.00 max=10000.00\n")
    sys_block = str(tmp_path / "block")
    assert levers.read_disk("sda", sys_block, str(root)).iocost
    assert not levers.read_disk("sdb", sys_block, str(root)).iocost
    assert not levers.read_disk("sda", sys_block, None).iocost


def _cgroup2(tmp_path: Path, controllers: str, subtree: str, child: list[str]) -> Path:
    root = tmp_path / "cg2"
    (root / "system.slice").mkdir(parents=True)
    (root / "cgroup.controllers").write_text(controllers + "\n")
    (root / "cgroup.subtree_control").write_text(subtree + "\n")
    (root / "system.slice" / "cgroup.controllers").write_text(subtree + "\n")
    for name in child:
        (root / "system.slice" / name).write_text("")
    (tmp_path / "mountinfo").write_text(
        f"30 1 0:26 / {root} rw,nosuid - cgroup2 cgroup2 rw\n")
    return root


def test_groups_on_cgroup_v2_with_io_and_memory(tmp_path: Path) -> None:
    root = _cgroup2(tmp_path, "cpu io memory pids", "cpu io memory", ["io.weight"])
    (root / "io.cost.qos").write_text("")
    g = levers.read_groups(mountinfo=str(tmp_path / "mountinfo"))
    assert g == GroupIO("v2", writeback=True, prio_class=False, latency=False, cost=True)


def test_writeback_needs_memory_on_the_path(tmp_path: Path) -> None:
    _cgroup2(tmp_path, "cpu io memory", "cpu io", ["io.prio.class", "io.latency"])
    mountinfo = str(tmp_path / "mountinfo")
    g = levers.read_groups(mountinfo=mountinfo)
    assert (g.hierarchy, g.writeback, g.prio_class, g.latency) == ("v2", False, True, True)
    assert levers.read_groups(["memory"], mountinfo=mountinfo).writeback  # the plan turns it on


def test_groups_on_cgroup_v1_and_without_any(tmp_path: Path) -> None:
    v1 = tmp_path / "mountinfo"
    v1.write_text("38 31 0:35 / /sys/fs/cgroup/blkio rw,relatime - cgroup cgroup rw,blkio\n"
                  f"41 31 0:38 / {tmp_path} rw,relatime - cgroup2 cgroup2 rw\n")
    assert levers.read_groups(mountinfo=str(v1)) == GroupIO("v1")  # an empty cgroup2 mount
    none = tmp_path / "none"
    none.write_text("")
    assert levers.read_groups(mountinfo=str(none)) == GroupIO("none")


# --- on the machine ----------------------------------------------------------------------------


@pytest.fixture
def loop(tmp_path: Path) -> Iterator[str]:
    image = tmp_path / "disk.img"
    with open(image, "wb") as f:
        f.truncate(64 << 20)
    dev = subprocess.run(["losetup", "--find", "--show", str(image)], capture_output=True,
                         text=True, timeout=TIMEOUT, check=True).stdout.strip()
    name = os.path.basename(dev)
    before = block.in_force(name)
    try:
        yield name
    finally:
        if before and block.in_force(name) != before:
            Path("/sys/block", name, "queue", "scheduler").write_text(before)
        subprocess.run(["losetup", "-d", dev], timeout=TIMEOUT, check=True)


@pytest.mark.root
def test_each_scheduler_on_a_loop_device_here(loop: str) -> None:
    """This host: cgroup v1 (blkio), an empty cgroup2 mount; mq-deadline with priorities."""
    groups = levers.read_groups()
    assert groups.hierarchy == "v1" and not groups.writeback
    found = {}
    for name in block.offered(loop):
        Path("/sys/block", loop, "queue", "scheduler").write_text(name)
        effect = levers.effect(loop, groups, cgroup2=cgroups.unified_root())
        assert effect.disk.scheduler == name
        found[name] = (effect.io_class, effect.weight)
    assert found["bfq"] == (True, "blkio.bfq.weight")
    assert found["none"] == (False, None) and found["kyber"] == (False, None)
    aging = Path("/sys/block", loop, "queue", "iosched", "prio_aging_expire")
    Path("/sys/block", loop, "queue", "scheduler").write_text("mq-deadline")
    assert found["mq-deadline"] == (aging.exists(), None)
    if aging.exists():  # 0 turns mq-deadline's priorities off
        old = aging.read_text().strip()
        aging.write_text("0")
        try:
            assert not levers.read_disk(loop).classes
        finally:
            aging.write_text(old)
