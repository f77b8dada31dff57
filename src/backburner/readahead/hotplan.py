"""The order of an image's hot region: the hot files' directories and data, as a start
first needs them (pure: names in, a plan out).

A cold start does not read file data alone. To open ``a/b/c.py`` it reads the directory
blocks of ``a`` and ``a/b`` and the inode of each, and a program that lists a directory
and looks at what it holds (Python's import does both) reads the inodes of entries it
never opens. On a seeking medium each such block that is not beside the data is a trip
of the head away and back. So `layout build-ext4` puts in its first pass only what the
start touches: the *hot directories* (every ancestor of a hot file), each complete (all
its entries, so its blocks are final and a listing reads nothing else; cold entries as
empty placeholders whose inodes sit beside the hot ones), and the hot files. It gives
them to ``mke2fs -d`` as one staging directory of numbered entries in this plan's order,
so inodes and blocks are allocated in first-use order: each directory's blocks right
before the data of the first file the start opens in it, the data in access order.

A start may read only parts of a large file (a program's big shared library: the pages
it runs). Such a file is *split* (`split`): the first pass holds only its used ranges
(a sparse staged file), after the small hot files, so the small ones stay dense and the
large ones' unread parts, filled in by the second pass, land after the hot region.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from .pack import Ranges, merge_ranges, page_align, subtract_ranges

#: A hot file is split when at least this much of it goes unread by the start. What
#: leaving it in costs on the calibrated ``dvd``: a start skipping an unread part in the
#: region pays a seek (35 ms and up: the drive does not read through a gap), a replay
#: reads through it at 9-22 MB/s (0.05-0.1 s per MiB), and every file after it lies that
#: much further out. What splitting costs: two extents per unread part (an extent-tree
#: block beyond four) and the part's own seek if the start reads into it after all. At
#: 1 MiB a split saves a replay at least one seek's time.
SPLIT_MIN = 1 << 20
#: Used ranges closer than this are kept together (the gap stays in the region): a
#: drive reads whole 32 KiB ECC blocks, and fewer, longer extents keep the file's extent
#: tree in one block.
MERGE_GAP = 64 << 10


@dataclass(frozen=True)
class Item:
    """One entry of the hot region, in rank order: a hot directory (`rel`) or a hot file
    (`hot`: its index in the hot inodes' list; `rel`: its first name)."""

    rel: bytes
    hot: int | None = None

    @property
    def is_dir(self) -> bool:
        return self.hot is None


@dataclass(frozen=True)
class Plan:
    items: tuple[Item, ...]  # rank order: the order of the staging directory's names
    dirs: frozenset[bytes]  # hot directories (relative; the root b"" is always hot)

    def width(self) -> int:
        """Digits of a rank's name (all of one length: their byte order is rank order)."""
        return max(4, len(str(len(self.items))))

    def name(self, rank: int) -> bytes:
        return b"%0*d" % (self.width(), rank)


def ancestors(rel: bytes) -> list[bytes]:
    """The directories above `rel`, outermost first, the root (b"") excluded."""
    out = []
    d = os.path.dirname(rel)
    while d:
        out.append(d)
        d = os.path.dirname(d)
    return out[::-1]


def plan(hot: list[list[bytes]], split: frozenset[int] = frozenset()) -> Plan:
    """`hot`: each hot inode's hot names, in access order. Each directory comes right before
    the first file under it (its listing and lookups come then), parents before children;
    the `split` files (indices into `hot`) after all the others, in access order."""
    items: list[Item] = []
    dirs: dict[bytes, None] = {}
    order = [i for i in range(len(hot)) if i not in split] + sorted(split)
    for index in order:
        names = hot[index]
        for name in names:
            for d in ancestors(name):
                if d not in dirs:
                    dirs[d] = None
                    items.append(Item(d))
        items.append(Item(names[0], index))
    return Plan(tuple(items), frozenset(dirs) | {b""})


def used(ranges: Sequence[tuple[int, int]], size: int, block: int) -> Ranges:
    """The parts of a file of `size` bytes a start read (`ranges`), in whole blocks, with
    gaps under `MERGE_GAP` closed."""
    whole = page_align([(o, min(n, size - o)) for o, n in ranges if o < size], block)
    out: list[tuple[int, int]] = []
    for off, ln in whole:
        if out and off - (out[-1][0] + out[-1][1]) < MERGE_GAP:
            out[-1] = (out[-1][0], off + ln - out[-1][0])
        else:
            out.append((off, ln))
    return merge_ranges(out)


def unused(ranges: Ranges, size: int) -> Ranges:
    """The rest of the file: what the second pass fills in."""
    return subtract_ranges([(0, size)], ranges)


def split(files: Sequence[tuple[int, Ranges]]) -> frozenset[int]:
    """Which hot files to split: (size, used ranges) each; those whose unread part is at
    least `SPLIT_MIN`."""
    return frozenset(i for i, (size, rs) in enumerate(files)
                     if size - sum(n for _, n in rs) >= SPLIT_MIN)


__all__ = ["MERGE_GAP", "SPLIT_MIN", "Item", "Plan", "ancestors", "plan", "split", "unused",
           "used"]
