"""Pass 2 of `layout build-ext4` for the files a start reads piece by piece, out of
order: each piece moved into its slot of the hot region with ext4's own online
defragmentation call, EXT4_IOC_MOVE_EXT.

A program maps its libraries and faults their pages in the order it runs them; a file's
blocks lie in the file's order whatever the layout, so on a seeking medium every fault
out of that order is a seek. ext4 maps a file's logical blocks to any physical ones,
though: pass 1 stages each such piece as a *donor* file in the order the start read the
pieces (among the other hot files and directories, `hotplan`), so mke2fs puts it where
the start will want it next. Here the file is written whole (its blocks land after the
hot region) and EXT4_IOC_MOVE_EXT swaps each piece's blocks with its donor's: the
kernel copies the piece's bytes into the donor's blocks and maps them into the file,
and the donor, which now holds the file's old blocks, is removed.

A file of more than four extents keeps them in an extent-tree block, read before its
data; the kernel allocates it while the pieces move, at the first free block after a
goal near the file's data. So a one-block reservation is staged right before such a
file's first piece, and while the pieces move every other free block of the filesystem
is taken by a *filler* (fallocate, with the filesystem's reserved clusters set to 0
for the while, through `system`): the tree block can only go into the reservation,
freed just before. Should the tree need more (over 340 extents), the filler gives up a
little room and the move is tried again; the tree block then lies elsewhere.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from .. import system
from ..base.errors import SystemStateError

log = logging.getLogger(__name__)

EXT4_IOC_MOVE_EXT = 0xC028660F  # _IOWR('f', 15, struct move_extent)
_MOVE = struct.Struct("<IIQQQQ")  # reserved, donor_fd, orig_start, donor_start, len, moved
_RETRIES = 8
_GIVE = 1 << 20  # what the filler gives up when the kernel wants more than the reservation


@dataclass(frozen=True)
class Piece:
    donor: bytes  # the staged donor file (its data starts at block 0)
    block: int  # the piece's first block in the file
    blocks: int


@dataclass(frozen=True)
class Scattered:
    """A file to put together from its donors, in this order; `reserve`: the staged
    block kept for its extent tree, if it needs one."""

    path: bytes
    pieces: tuple[Piece, ...]
    reserve: bytes | None = None


def _settle(*fds: int) -> None:
    """Nothing of either file in the page cache: the move reads and writes its own."""
    for fd in fds:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)


def move_range(orig: int, donor: int, orig_block: int, donor_block: int, blocks: int) -> int:
    """EXT4_IOC_MOVE_EXT: `blocks` blocks of `orig` from `orig_block` swapped with the
    donor's from `donor_block`, the data kept in `orig`; the blocks moved. A page busy
    with writeback (EBUSY) is synced and tried again."""
    done = 0
    tries = 0
    while done < blocks:
        _settle(orig, donor)
        buf = bytearray(_MOVE.pack(0, donor, orig_block + done, donor_block + done,
                                   blocks - done, 0))
        try:
            fcntl.ioctl(orig, EXT4_IOC_MOVE_EXT, buf)
        except OSError as err:
            moved = _MOVE.unpack(buf)[5]
            if err.errno not in (errno.EBUSY, errno.EAGAIN) or tries >= _RETRIES:
                if moved:
                    done += moved
                raise
            tries += 1
            done += moved
            continue
        moved = _MOVE.unpack(buf)[5]
        if moved == 0:
            break
        done += moved
    return done


class _Filler:
    """Every free block of the filesystem at `mnt` taken, in one preallocated file."""

    def __init__(self, path: bytes) -> None:
        self.path = path
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        self.size = 0
        st = os.fstatvfs(self.fd)
        step = st.f_bfree * st.f_frsize
        while step >= st.f_frsize:
            try:
                os.posix_fallocate(self.fd, self.size, step)
                self.size += step
            except OSError as err:
                if err.errno != errno.ENOSPC:
                    raise
                step //= 2

    def give(self) -> bool:
        """Free its last `_GIVE` bytes; False when it has nothing left to give."""
        if self.size <= 0:
            return False
        self.size = max(0, self.size - _GIVE)
        os.ftruncate(self.fd, self.size)
        return True

    def remove(self) -> None:
        os.close(self.fd)
        os.unlink(self.path)


def _assemble(f: Scattered, filler: _Filler) -> None:
    if f.reserve is not None:
        os.unlink(f.reserve)  # the one free block: the extent tree's
    fd = os.open(f.path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        for p in f.pieces:
            donor = os.open(p.donor, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
            try:
                while True:
                    try:
                        moved = move_range(fd, donor, p.block, 0, p.blocks)
                        break
                    except OSError as err:
                        if err.errno != errno.ENOSPC or not filler.give():
                            raise SystemStateError(
                                f"moving a piece of {os.fsdecode(f.path)} into the hot "
                                f"region failed: {err.strerror}") from None
                if moved != p.blocks:
                    raise SystemStateError(f"moving a piece of {os.fsdecode(f.path)} into "
                                           f"the hot region moved {moved} of {p.blocks} "
                                           "blocks")
            finally:
                os.close(donor)
            os.unlink(p.donor)  # it holds the file's old blocks now
        _settle(fd)
    finally:
        os.close(fd)


def reserved_clusters(device: str) -> str:
    """The sysfs file of the clusters ext4 keeps back for its metadata on `device`."""
    return f"/sys/fs/ext4/{os.path.basename(device)}/reserved_clusters"


def assemble(tx: system.Transaction, mnt: bytes, device: str, files: Sequence[Scattered],
             scratch: bytes) -> None:
    """Put every scattered file together (see the module docstring). `files` are written
    whole and synced; `device` is the filesystem's block device (its reserved clusters
    are set to 0 while the filler holds the rest); `scratch` a directory on it."""
    if not files:
        return
    clusters = reserved_clusters(device)
    if os.path.exists(clusters):
        tx.apply(system.SysfsValue(clusters, "0"))
    os.sync()
    filler = _Filler(os.path.join(scratch, b"filler"))
    try:
        for f in files:
            _assemble(f, filler)
    finally:
        filler.remove()


__all__ = ["EXT4_IOC_MOVE_EXT", "Piece", "Scattered", "assemble", "move_range"]
