"""The `make_bed` fixture: real filesystems on loop devices under the test's tmp_path,
unmounted and detached at teardown."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from .beds import MIN_SIZE, MKFS, TIMEOUT, Bed, _wait_for, add_partition, kernel_has, sh


@pytest.fixture
def make_bed(tmp_path: Path) -> Iterator:
    """make_bed("ext4", size=..., partition_at=SECTOR, mount_options="...") -> Bed."""
    beds: list[Bed] = []

    def make(fstype: str, size: int = 0, *, partition_at: int = 0,
             mount_options: str = "", where: Path | None = None) -> Bed:
        if not kernel_has(fstype):
            pytest.skip(f"the kernel has no {fstype}")  # btrfs: "where the kernel has it"
        work = (where or tmp_path) / f"bed{len(beds)}"
        work.mkdir()
        image = work / "disk.img"
        with open(image, "wb") as f:
            f.truncate(max(size, MIN_SIZE[fstype]))
        loop = sh("losetup", "--find", "--show", *(["-P"] if partition_at else []),
                  str(image)).strip()
        bed = Bed(fstype, image, loop, loop, work / "mnt")
        beds.append(bed)
        if partition_at:
            bed.device = add_partition(loop, partition_at)
        _wait_for(bed.device)
        sh(*MKFS[fstype], bed.device)
        bed.mnt.mkdir()
        sh("mount", "-t", fstype, *(["-o", mount_options] if mount_options else []),
           bed.device, str(bed.mnt))
        bed.mounted = True
        return bed

    try:
        yield make
    finally:
        for bed in reversed(beds):
            for dev in list(bed.extra_loops):
                subprocess.run(["losetup", "-d", dev], timeout=TIMEOUT)
            if bed.mounted:
                subprocess.run(["umount", str(bed.mnt)], timeout=TIMEOUT)
            subprocess.run(["losetup", "-d", bed.loop], timeout=TIMEOUT)


@pytest.fixture
def public_dir() -> Iterator[Path]:
    """A folder of our own that other users may enter (tmp_path's parents are 0700):
    request it before make_bed, so it is removed after the beds in it are unmounted."""
    path = Path(tempfile.mkdtemp(prefix="bb-extents-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
