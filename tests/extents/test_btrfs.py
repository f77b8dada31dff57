"""extents.btrfs: chunk items parsed and btrfs addresses translated (pure), and the chunk
tree search against `btrfs inspect-internal dump-tree` on a real btrfs."""

from __future__ import annotations

import os
import re
import struct
import subprocess

import pytest

from backburner.base.errors import DataError, UnavailableError
from backburner.extents import btrfs
from backburner.extents import runs as R
from backburner.extents.btrfs import Chunk
from backburner.extents.runs import Extent

MiB = 1 << 20
TABLE = [Chunk(100 * MiB, 8 * MiB, 1, ((1, 20 * MiB),)),
         Chunk(108 * MiB, 8 * MiB, 1 | btrfs.BLOCK_GROUP_DUP, ((1, 50 * MiB), (1, 70 * MiB))),
         Chunk(200 * MiB, 8 * MiB, 1 | 0x10, ((1, 90 * MiB), (2, 90 * MiB)))]  # RAID1


def test_parse_chunk_item() -> None:
    item = struct.pack("<QQQQIIIHH", 8 * MiB, 2, 65536, 0x21, 65536, 65536, 4096, 2, 1)
    item += struct.pack("<QQ16s", 1, 50 * MiB, b"u" * 16) + struct.pack("<QQ16s", 1, 70 * MiB,
                                                                          b"u" * 16)
    assert btrfs.parse_chunk(108 * MiB, item) == Chunk(108 * MiB, 8 * MiB, 0x21,
                                                       ((1, 50 * MiB), (1, 70 * MiB)))


def test_translate() -> None:
    got = btrfs.translate([Extent(0, 101 * MiB, MiB), Extent(MiB, 109 * MiB, MiB, R.SHARED)],
                          TABLE)
    assert got == [Extent(0, 21 * MiB, MiB), Extent(MiB, 51 * MiB, MiB, R.SHARED)]


def test_an_extent_across_chunks_is_split() -> None:
    got = btrfs.translate([Extent(0, 107 * MiB, 2 * MiB)], TABLE)
    assert got == [Extent(0, 27 * MiB, MiB), Extent(MiB, 50 * MiB, MiB)]


def test_places_without_a_device_offset_pass_unchanged() -> None:
    inline = Extent(0, 0, 4096, R.INLINE | R.NOT_ALIGNED | R.LAST)
    assert btrfs.translate([inline], TABLE) == [inline]
    encoded = Extent(0, 107 * MiB + 4096, 128 * 1024 * 64, R.ENCODED)  # decoded length
    assert btrfs.translate([encoded], TABLE) == [encoded._replace(physical=27 * MiB + 4096)]


def test_refusals() -> None:
    with pytest.raises(DataError, match="in no chunk"):
        btrfs.translate([Extent(0, 150 * MiB, 4096)], TABLE)
    with pytest.raises(UnavailableError, match="striped or spread"):
        btrfs.translate([Extent(0, 201 * MiB, 4096)], TABLE)


@pytest.mark.root
def test_chunk_tree_search_matches_dump_tree(make_bed) -> None:
    bed = make_bed("btrfs")
    (bed.mnt / "f").write_bytes(os.urandom(MiB))
    fd = os.open(bed.mnt / "f", os.O_RDONLY)
    try:
        got = btrfs.chunks(fd)
    finally:
        os.close(fd)
    dump = subprocess.run(["btrfs", "inspect-internal", "dump-tree", "-t", "chunk",
                           bed.device], capture_output=True, text=True, check=True).stdout
    want = [(int(m[1]), int(m[2]), int(m[3])) for m in re.finditer(
        r"CHUNK_ITEM (\d+)\).*?\n\s+length (\d+).*?stripe 0 devid \d+ offset (\d+)", dump,
        re.S)]
    assert [(c.logical, c.length, c.stripes[0][1]) for c in got] == want
    assert len(want) >= 3
