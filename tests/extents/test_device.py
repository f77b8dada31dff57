"""extents.device: mountinfo parsing (pure), and the device of files on this machine."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from backburner.base.errors import UnavailableError
from backburner.extents import device as D

MOUNTINFO = """\
22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
40 22 0:39 / /mnt/my\\040disk rw,relatime shared:20 - btrfs /dev/loop3 rw,subvolid=5,subvol=/
41 40 0:40 /sub /mnt/my\\040disk/sub rw - btrfs /dev/loop3 rw,subvolid=256
50 22 0:50 / /dev/shm rw,nosuid,nodev shared:3 - tmpfs tmpfs rw
"""


def test_parse_mountinfo() -> None:
    got = D.parse_mountinfo(MOUNTINFO)
    assert [(os.major(m.devno), os.minor(m.devno), m.mountpoint, m.fstype, m.source)
            for m in got] == [
        (254, 0, "/", "ext4", "/dev/vda"),
        (0, 39, "/mnt/my disk", "btrfs", "/dev/loop3"),
        (0, 40, "/mnt/my disk/sub", "btrfs", "/dev/loop3"),
        (0, 50, "/dev/shm", "tmpfs", "tmpfs"),
    ]
    assert got[2].root == "/sub"


def test_a_file_on_this_machine(tmp_path: Path) -> None:
    """tmp_path is on a block-device filesystem here (FIEMAP works on it)."""
    f = tmp_path / "f"
    f.write_bytes(b"x")
    dev = D.device_of(f)
    st = os.stat(dev.path)
    assert st.st_rdev == os.stat(f).st_dev == dev.devno
    assert dev.size > 0 and dev.logical_block_size in (512, 1024, 2048, 4096)
    assert dev.fstype in {"ext4", "xfs", "btrfs", "ext3", "ext2", "f2fs"}
    assert dev.is_partition == (dev.start > 0 or dev.path != dev.disk)


def test_not_on_a_block_device() -> None:
    with pytest.raises(UnavailableError, match="on proc, which is not on a block device"):
        D.device_of("/proc/version")


@pytest.mark.parametrize("euid", [0, 1000])
def test_a_claim_refused_says_needs_root_only_to_another_user(
        monkeypatch: pytest.MonkeyPatch, euid: int) -> None:
    """EPERM on the exclusive open means "not root" only when we are not: as root it is a
    device cgroup or a security module, and "(needs root)" would send the user in circles."""
    def refuse(*_a: object, **_k: object) -> int:
        raise PermissionError(errno.EPERM, "Operation not permitted")

    dev = D.BlockDevice("/dev/sdz1", 0, "/dev/sdz", 0, 0, 512, "ext4", "/")
    monkeypatch.setattr(D.os, "geteuid", lambda: euid)
    monkeypatch.setattr(D.os, "open", refuse)
    claim = D.claim_of(dev)
    assert claim.free is None
    assert ("needs root" in claim.why) == (euid != 0)
    if euid == 0:
        assert "even as root" in claim.why and "Operation not permitted" in claim.why
