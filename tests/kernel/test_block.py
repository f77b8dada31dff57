"""kernel.block: scheduler names and their check, what a disk offers and runs, the whole
disk beneath a partition or a device-mapper device, the class of a disk; on made-up sysfs
trees, then on a real loop device switched through each scheduler."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from backburner.base.errors import UsageError
from backburner.kernel import block

from .sysfs import disk, mapped

TIMEOUT = 30


@pytest.mark.parametrize("text, offered, active", [
    ("none [mq-deadline] kyber bfq\n", ("none", "mq-deadline", "kyber", "bfq"), "mq-deadline"),
    ("[none] mq-deadline\n", ("none", "mq-deadline"), "none"),
    ("none\n", ("none",), "none"),  # one choice is shown bare
    ("", (), None),
])
def test_the_scheduler_line_says_what_is_offered_and_in_force(
        text: str, offered: tuple[str, ...], active: str | None) -> None:
    assert block.parse_schedulers(text) == (offered, active)


def test_offered_and_in_force_come_from_the_disks_queue(tmp_path: Path) -> None:
    disk(tmp_path, "sda", scheduler="mq-deadline kyber [bfq]")
    sys_block = str(tmp_path / "block")
    assert block.offered("sda", sys_block) == ("mq-deadline", "kyber", "bfq")
    assert block.in_force("sda", sys_block) == "bfq"
    assert block.offered("sdz", sys_block) == ()
    assert block.in_force("sdz", sys_block) is None


def test_a_name_is_checked_against_mainline_and_what_disks_here_offer(tmp_path: Path) -> None:
    disk(tmp_path, "sda", scheduler="[none] mq-deadline bfq vendor-sched")
    sys_block = str(tmp_path / "block")
    assert block.check_scheduler("bfq", sys_block) == "bfq"
    assert block.check_scheduler("kyber", sys_block) == "kyber"  # mainline's, not offered here
    assert block.check_scheduler("vendor-sched", sys_block) == "vendor-sched"
    assert block.check_scheduler("deadline", sys_block) == "mq-deadline"  # the kernel's alias
    with pytest.raises(UsageError, match="unknown IO scheduler 'cfq'") as err:
        block.check_scheduler("cfq", sys_block)
    assert "vendor-sched" in (err.value.hint or "")
    with pytest.raises(UsageError) as err:
        block.check_scheduler("mqdeadline", sys_block)
    assert err.value.hint == "did you mean mq-deadline?"


def test_the_disks_beneath_a_mapped_device_are_followed_through_partitions(
        tmp_path: Path) -> None:
    sda = disk(tmp_path, "sda", partitions=("sda2",))
    nvme = disk(tmp_path, "nvme0n1", devno="259:1", partitions=("nvme0n1p3",))
    crypt = mapped(tmp_path, "dm-0", [sda / "sda2"])
    mapped_over_crypt = mapped(tmp_path, "dm-1", [crypt, nvme / "nvme0n1p3"])
    sys_block = str(tmp_path / "block")
    assert block.disks_beneath("sda", sys_block) == ("sda",)
    assert block.disks_beneath("dm-0", sys_block) == ("sda",)
    assert block.disks_beneath(mapped_over_crypt.name, sys_block) == ("sda", "nvme0n1")


@pytest.mark.parametrize("name, rotational, kind", [
    ("sda", "1", block.ROTATIONAL), ("sdb", "0", block.NON_ROTATIONAL),
    ("nvme0n1", "0", block.NVME), ("mmcblk0", "0", block.NON_ROTATIONAL)])
def test_the_class_of_a_disk(tmp_path: Path, name: str, rotational: str, kind: str) -> None:
    disk(tmp_path, name, rotational=rotational)
    assert block.disk_class(name, str(tmp_path / "block")) == kind


def test_a_disk_without_a_queue_has_no_class(tmp_path: Path) -> None:
    (tmp_path / "block").mkdir()
    assert block.disk_class("sdq", str(tmp_path / "block")) is None


# --- on the machine ----------------------------------------------------------------------------


@pytest.fixture
def loop(tmp_path: Path) -> Iterator[str]:
    """A loop device over a small sparse file (its name), queue put back and detached."""
    image = tmp_path / "disk.img"
    with open(image, "wb") as f:
        f.truncate(64 << 20)
    dev = subprocess.run(["losetup", "--find", "--show", str(image)], capture_output=True,
                         text=True, timeout=TIMEOUT, check=True).stdout.strip()
    queue = Path("/sys/block", os.path.basename(dev), "queue")
    before = (queue / "scheduler").read_text()
    try:
        yield os.path.basename(dev)
    finally:
        active = block.parse_schedulers(before)[1]
        if active and block.in_force(os.path.basename(dev)) != active:
            (queue / "scheduler").write_text(active)
        subprocess.run(["losetup", "-d", dev], timeout=TIMEOUT, check=True)


@pytest.mark.root
def test_a_loop_device_switched_through_each_scheduler(loop: str) -> None:
    scheduler = Path("/sys/block", loop, "queue", "scheduler")
    for name in block.offered(loop):
        scheduler.write_text(name)
        assert block.in_force(loop) == name
    assert set(block.SCHEDULERS) <= block.offered_anywhere()
    assert loop in block.disks()


@pytest.mark.root
def test_the_disk_of_a_file_on_a_mounted_loop_device(loop: str, tmp_path: Path) -> None:
    subprocess.run(["mkfs.ext4", "-q", "-F", f"/dev/{loop}"], check=True, timeout=60)
    where = tmp_path / "mnt"
    where.mkdir()
    subprocess.run(["mount", f"/dev/{loop}", str(where)], check=True, timeout=TIMEOUT)
    try:
        (where / "f").write_text("x")
        dev = os.stat(where / "f").st_dev
        assert block.whole_disk(dev) == loop
        assert block.node_of(dev) == f"/dev/{loop}"
        assert block.disks_of(where / "f") == (loop,)
        assert block.disk_class(loop) in (block.ROTATIONAL, block.NON_ROTATIONAL)
    finally:
        subprocess.run(["umount", str(where)], check=True, timeout=TIMEOUT)
    assert block.disks_of("/proc/self") == ()  # no block device holds procfs
