"""Real filesystems on loop devices for the extents tests (see `make_bed` in conftest.py),
and ways to lay files out on them on purpose: fragmented, sparse, fallocated over stale
data. Tests may use subprocess and ctypes freely."""

from __future__ import annotations

import ctypes
import mmap
import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

TIMEOUT = 60
MiB = 1 << 20
FALLOC_FL_KEEP_SIZE = 0x1
FALLOC_FL_PUNCH_HOLE = 0x2
_libc = ctypes.CDLL(None, use_errno=True)
_libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]

MKFS = {
    "ext4": ["mkfs.ext4", "-q", "-F", "-b", "4096", "-E", "nodiscard"],
    "xfs": ["mkfs.xfs", "-q", "-f", "-K"],
    "btrfs": ["mkfs.btrfs", "-q", "-f", "--nodiscard"],
}
MIN_SIZE = {"ext4": 32 * MiB, "xfs": 320 * MiB, "btrfs": 128 * MiB}


def sh(*argv: str) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True,
                          timeout=TIMEOUT).stdout


def fallocate(fd: int, mode: int, offset: int, length: int) -> None:
    if _libc.fallocate(fd, mode, offset, length) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def kernel_has(fstype: str) -> bool:
    return any(line.split()[-1] == fstype
               for line in Path("/proc/filesystems").read_text().splitlines())


@dataclass
class Bed:
    """A filesystem on a loop device (maybe on its first partition), mounted at ``mnt``."""

    fstype: str
    image: Path
    loop: str
    device: str  # what the filesystem is on: the loop device or its partition
    mnt: Path
    mounted: bool = False
    extra_loops: list[str] = field(default_factory=list)

    def path(self, name: str) -> Path:
        return self.mnt / name

    def sync(self) -> None:
        os.sync()

    def attach(self, backing: str, offset: int, size: int) -> str:
        """A read-only loop device over ``size`` bytes of ``backing`` from ``offset``."""
        dev = sh("losetup", "--find", "--show", "--read-only", "--offset", str(offset),
                 "--sizelimit", str(size), backing).strip()
        self.extra_loops.append(dev)
        return dev

    def detach(self, dev: str) -> None:
        sh("losetup", "-d", dev)
        self.extra_loops.remove(dev)


def add_partition(loop: str, start_sector: int) -> str:
    """Partition 1 of ``loop`` from ``start_sector`` to its end, added with BLKPG (addpart):
    a real kernel partition without a partition table, which this kernel cannot parse."""
    sectors = int(sh("blockdev", "--getsz", loop)) - start_sector
    sh("addpart", loop, "1", str(start_sector), str(sectors))
    return loop + "p1"


def _wait_for(path: str) -> None:
    deadline = time.monotonic() + 10
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} did not appear")
        time.sleep(0.02)


# --- laying files out on purpose ---------------------------------------------------------


def write_random(path: Path, size: int, seed: int = 0, chunk: int = MiB) -> bytes:
    """Write ``size`` seeded random bytes; returns them."""
    data = random_bytes(size, seed)
    with open(path, "wb") as f:
        for off in range(0, size, chunk):
            f.write(data[off:off + chunk])
    return data


def random_bytes(size: int, seed: int) -> bytes:
    import random

    return random.Random(seed).randbytes(size)


def fragment_free_space(bed: Bed, gap: int = 64 * 1024) -> Path:
    """Fill the free space with one fallocated file, then punch every other ``gap`` out of
    it: what is free afterwards is ``gap``-sized pieces, so the next file written is
    fragmented. Returns the filler (delete it to make room for a defragmenter)."""
    filler = bed.path(".filler")
    fd = os.open(filler, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        pos = 0
        for step in (4 * MiB, MiB, 64 * 1024):
            while True:
                try:
                    fallocate(fd, 0, pos, step)
                except OSError:
                    break
                pos += step
        for off in range(0, pos, 2 * gap):
            fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, gap)
        os.fsync(fd)
    finally:
        os.close(fd)
    bed.sync()
    return filler


def write_interleaved(bed: Bed, path: Path, size: int, seed: int = 0,
                      piece: int = 64 * 1024) -> bytes:
    """Write ``path`` in ``piece``s with O_DIRECT, each followed by a piece of a spacer
    file: allocators that place data as it is written (xfs, btrfs) interleave the two, so
    ``path`` is fragmented. ext4 keeps a per-file reservation: use fragment_free_space."""
    data = random_bytes(size, seed)
    buf = mmap.mmap(-1, piece)  # page-aligned, as O_DIRECT needs
    fa = os.open(path, os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o644)
    fb = os.open(bed.path(".spacer"), os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o600)
    try:
        for off in range(0, size, piece):
            buf[:] = data[off:off + piece]
            os.pwrite(fa, buf, off)
            os.fsync(fa)
            os.pwrite(fb, buf, off)
            os.fsync(fb)
    finally:
        os.close(fa)
        os.close(fb)
        buf.close()
    return data


def write_fragmented(bed: Bed, path: Path, size: int, seed: int = 0) -> bytes:
    """A fragmented file, written the way that works on ``bed``'s filesystem."""
    if bed.fstype == "ext4":
        fragment_free_space(bed)
        return write_random(path, size, seed)
    return write_interleaved(bed, path, size, seed)


def stale_data_then_fallocate(bed: Bed, path: Path, size: int) -> None:
    """Fill the filesystem with random bytes, delete them, then fallocate ``path``: its
    unwritten extents sit on old data (what the filesystem reads is zeros)."""
    junk = bed.path(".junk")
    with open(junk, "wb") as f:
        try:
            while True:
                f.write(os.urandom(MiB))
        except OSError:
            pass
    junk.unlink()
    bed.sync()
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.posix_fallocate(fd, 0, size)
        os.fsync(fd)
    finally:
        os.close(fd)


def read_device(dev: str, offset: int, length: int) -> bytes:
    with open(dev, "rb", buffering=0) as f:
        f.seek(offset)
        return f.read(length)


def read_through_table(bed: Bed, table: str, size: int) -> bytes:
    """What a dm device built from ``table`` would read, built without device-mapper: one
    read-only loop device per linear line (its offset and size), zeros for zero lines."""
    out = bytearray()
    for line in table.splitlines():
        f = line.split()
        start, sectors = int(f[0]), int(f[1])
        assert start * 512 == len(out), f"table line starts at sector {start}: a gap/overlap"
        if f[2] == "zero":
            out += bytes(sectors * 512)
            continue
        assert f[2] == "linear" and len(f) == 5
        loop = bed.attach(f[3], int(f[4]) * 512, sectors * 512)
        try:
            with open(loop, "rb", buffering=0) as dev:
                part = dev.read(sectors * 512)
            assert len(part) == sectors * 512
            out += part
        finally:
            bed.detach(loop)
    assert len(out) == size
    return bytes(out)
