"""Where ext4 keeps the inodes a path lookup reads, and how much the kernel reads with one.

`layout check` predicts what a cold start reads besides file data: for each component of
each path, the directory blocks of its parent and the inode-table block of the component.
Directory blocks FIEMAP places (a directory is a file of blocks); an inode's block takes
the superblock and the group descriptors, parsed here. The kernel reads an inode-table
block with a read-ahead around it (``__ext4_get_inode_loc``): the aligned window of
``inode_readahead_blks`` blocks (32 unless mounted otherwise) that holds it, cut to the
group's table and, where group descriptors carry checksums, to its inodes in use. One such
window read on a seeking medium is a trip of the head; the hot set's inodes packed in the
first windows make it a few.

A file of more than four extents (a large file split by `layout build-ext4` into the
ranges a start reads and the rest) keeps them in extent-tree blocks, which the kernel
reads before it can read the data they map: `tree_blocks` finds those a start needs from
the inode's own bytes.

`parse` and `tree_blocks` are pure (bytes in); `read` takes the geometry from a block
device or an image file.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass

SUPERBLOCK_AT = 1024
MAGIC = 0xEF53
INODE_READAHEAD_BLKS = 32  # the kernel's default (mount option inode_readahead_blks)
_INCOMPAT_64BIT = 0x80
_RO_COMPAT_GDT_CSUM = 0x10
_RO_COMPAT_METADATA_CSUM = 0x400
_EXTENTS_FL = 0x80000
_EXTENT_MAGIC = 0xF30A
_I_FLAGS, _I_BLOCK = 0x20, 0x28  # in the inode


@dataclass(frozen=True)
class Geometry:
    block: int  # bytes
    inodes_per_group: int
    inode_size: int
    tables: tuple[int, ...]  # each group's inode table: its first block
    in_use: tuple[int, ...]  # inodes of each group the kernel counts as in use

    def inode_block(self, ino: int) -> int:
        """The inode-table block (a block number) that holds inode `ino`."""
        group, index = divmod(ino - 1, self.inodes_per_group)
        return self.tables[group] + index * self.inode_size // self.block

    def window(self, ino: int, ra_blocks: int = INODE_READAHEAD_BLKS) -> range:
        """The blocks the kernel reads to get inode `ino` when its block is not cached:
        the aligned read-ahead window around it, within the group's table in use (the
        kernel's own `b <= end`: one block past the window's end too)."""
        group = (ino - 1) // self.inodes_per_group
        block = self.inode_block(ino)
        table = self.tables[group]
        start = max(block & ~(ra_blocks - 1), table)
        per_block = self.block // self.inode_size
        end = min(start + ra_blocks, table + self.in_use[group] // per_block)
        return range(min(start, block), max(end, block) + 1)

    def inode_at(self, ino: int) -> int:
        """The byte of the device where inode `ino` starts."""
        index = (ino - 1) % self.inodes_per_group
        return self.inode_block(ino) * self.block + index * self.inode_size % self.block


def tree_blocks(inode: bytes, read_block: Callable[[int], bytes],
                wanted: Sequence[tuple[int, int]]) -> list[int]:
    """The extent-tree blocks (index and leaf nodes, by block number, in logical order) the
    kernel reads to map the logical blocks `wanted` ((first, count) each) of the file whose
    inode's bytes are `inode`; none for a file whose extents fit in the inode.
    `read_block` gives a block's bytes."""
    if len(inode) < _I_BLOCK + 60:
        return []
    (flags,) = struct.unpack_from("<I", inode, _I_FLAGS)
    if not flags & _EXTENTS_FL:
        return []
    out: list[int] = []

    def walk(node: bytes, lo: int, hi: int) -> None:
        magic, entries, _, depth = struct.unpack_from("<HHHH", node, 0)
        if magic != _EXTENT_MAGIC or depth == 0:
            return
        starts = [struct.unpack_from("<I", node, 12 + 12 * i)[0] for i in range(entries)]
        for i in range(entries):
            first = starts[i]
            end = starts[i + 1] if i + 1 < entries else hi
            if not any(w_first < end and first < w_first + n for w_first, n in wanted):
                continue
            leaf_lo, leaf_hi = struct.unpack_from("<IH", node, 12 + 12 * i + 4)
            child = leaf_lo | leaf_hi << 32
            out.append(child)
            walk(read_block(child), first, end)

    walk(inode[_I_BLOCK:_I_BLOCK + 60], 0, 1 << 32)
    return out


def parse(sb: bytes, descriptors: bytes) -> Geometry:
    """The geometry from the superblock (1024 bytes) and the group descriptor table."""
    (magic,) = struct.unpack_from("<H", sb, 56)
    if magic != MAGIC:
        raise ValueError("not an ext2/3/4 superblock")
    blocks_lo, log_block, blocks_per_group, ipg = (struct.unpack_from("<I", sb, o)[0]
                                                   for o in (4, 24, 32, 40))
    (first_data,) = struct.unpack_from("<I", sb, 20)
    (inode_size,) = struct.unpack_from("<H", sb, 88)
    incompat, ro_compat = struct.unpack_from("<II", sb, 96)
    (blocks_hi,) = struct.unpack_from("<I", sb, 0x150)
    is64 = bool(incompat & _INCOMPAT_64BIT)
    (desc_size,) = struct.unpack_from("<H", sb, 254)
    desc = desc_size if is64 and desc_size else 32
    blocks = blocks_lo | ((blocks_hi << 32) if is64 else 0)
    groups = -(-(blocks - first_data) // blocks_per_group)
    csum = bool(ro_compat & (_RO_COMPAT_GDT_CSUM | _RO_COMPAT_METADATA_CSUM))
    tables, in_use = [], []
    for g in range(groups):
        d = descriptors[g * desc:(g + 1) * desc]
        table = struct.unpack_from("<I", d, 8)[0]
        unused = struct.unpack_from("<H", d, 0x1C)[0]
        if desc >= 64:
            table |= struct.unpack_from("<I", d, 0x28)[0] << 32
            unused |= struct.unpack_from("<H", d, 0x32)[0] << 16
        tables.append(table)
        in_use.append(ipg - unused if csum else ipg)
    return Geometry(1024 << log_block, ipg, inode_size or 128, tuple(tables), tuple(in_use))


def read(path: str) -> Geometry:
    """The geometry of the ext4 on a block device or in an image file (ValueError when
    it holds none)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        sb = os.pread(fd, 1024, SUPERBLOCK_AT)
        if len(sb) < 1024:
            raise ValueError("too small for an ext4")
        (log_block,) = struct.unpack_from("<I", sb, 24)
        block = 1024 << min(log_block, 6)
        (first_data,) = struct.unpack_from("<I", sb, 20)
        (blocks_per_group,) = struct.unpack_from("<I", sb, 32)
        blocks_lo, (blocks_hi,) = struct.unpack_from("<I", sb, 4)[0], struct.unpack_from(
            "<I", sb, 0x150)
        groups = -(-((blocks_lo | blocks_hi << 32) - first_data) // max(blocks_per_group, 1))
        descriptors = os.pread(fd, groups * 64, (first_data + 1) * block)
    finally:
        os.close(fd)
    return parse(sb, descriptors)


__all__ = ["INODE_READAHEAD_BLKS", "Geometry", "parse", "read", "tree_blocks"]
