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

A start also looks at what it does not read (`record --lookups`): it lists directories,
stats what they hold, looks for names that are not there (a dynamic loader tries each
directory of its search path). Each directory it lists or searches is a hot directory
too (its blocks in the region, its entries' inodes beside the hot ones), a directory it
only stats is made empty in the first pass (its inode among the hot ones, its one block
in the region; the second pass fills it), and everything comes in the order the start
first touched it (`touches`), not the order it opened its files in.

A start may read only parts of a large file (a program's big shared library: the pages
it runs), and read them out of order (it faults the pages of a mapped library in as it
runs them). Such a file is *scattered*: the hot region holds only the pieces it read,
each in its own slot, in the order they were read (`ext4move` puts them together in the
second pass), and the rest of the file lands after the hot region. Without the order of
reads (a pack recorded without --lookups) a large file with at least `SPLIT_MIN` unread
is *split* (`split`): its used ranges, in the file's order, after the small hot files.
A scattered file of more than four extents gets a one-block reservation before its first
piece, for its extent-tree block (`extents`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from .ranges import Ranges, merge_ranges, page_align, subtract_ranges

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
    """One entry of the hot region, in rank order: a hot directory (`rel`), a directory
    the start only looked at (`bare`: made empty), or a hot file (`hot`: its index in the
    hot inodes' list; `rel`: its first name)."""

    rel: bytes
    hot: int | None = None
    bare: bool = False
    piece: tuple[int, int] | None = None  # a scattered file's piece: (byte offset, length)
    reserve: bool = False  # a scattered file's block kept for its extent tree

    @property
    def is_dir(self) -> bool:
        return self.hot is None


#: What the start touched, in order: ("file", index into the hot inodes' list), ("piece",
#: (file index, piece index) of a scattered file), ("dir", a directory it listed or looked
#: a name up in), ("bare", a directory it only stat'd).
Touch = tuple[str, "int | bytes | tuple[int, int]"]
#: A file's extents that fit in its inode; more need an extent-tree block.
IN_INODE_EXTENTS = 4


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


def extents(pieces: Sequence[tuple[int, int]], size: int) -> int:
    """How many extents a scattered file of `size` bytes has once its `pieces` lie in
    slots of their own: one per piece, one per stretch between them (pure)."""
    out, pos = 0, 0
    for off, ln in sorted(pieces):
        out += 1 + (off > pos)
        pos = max(pos, off + ln)
    return out + (pos < size)


def _index(v: int | bytes | tuple[int, int]) -> int:
    """The hot file a "file" or "piece" touch names."""
    if isinstance(v, tuple):
        return v[0]
    assert isinstance(v, int)
    return v


def plan(hot: list[list[bytes]], split: frozenset[int] = frozenset(),
         touches: Sequence[Touch] | None = None,
         pieces: dict[int, list[tuple[int, int]]] | None = None,
         sizes: Sequence[int] = ()) -> Plan:
    """`hot`: each hot inode's hot names, in access order; `touches`: what the start
    touched, in order (default: the hot files in access order). Each directory comes
    right before what first touches it (parents before children): a file under it, a
    lookup in it, a listing. `pieces`: the scattered files' pieces, in the order they
    are read (a "file" touch of one places all of them; a "piece" touch one); `sizes`
    the files' sizes (for `extents`). The `split` files (indices into `hot`) come after
    all the others, in the order they were touched. A file no touch names comes after
    those that are."""
    pieces = pieces or {}
    order = list(touches) if touches is not None else [("file", i) for i in range(len(hot))]
    named = {_index(v) for k, v in order if k in ("file", "piece")}
    order += [("file", i) for i in range(len(hot)) if i not in named]
    full: set[bytes] = set()  # directories the start reads the entries of
    for kind, v in order:
        if kind in ("file", "piece"):
            full.update(d for name in hot[_index(v)] for d in ancestors(name))
        else:
            assert isinstance(v, bytes)
            full.update(ancestors(v))
            if kind == "dir":
                full.add(v)
    items: list[Item] = []
    placed: set[bytes] = {b""}
    reserved: set[int] = set()

    def place(d: bytes) -> None:
        for a in [*ancestors(d), d]:
            if a not in placed:
                placed.add(a)
                items.append(Item(a, bare=a not in full))

    def put(index: int, k: int | None) -> None:
        for name in hot[index]:
            parent = os.path.dirname(name)
            if parent:
                place(parent)
        if index not in pieces:
            items.append(Item(hot[index][0], index))
            return
        if index not in reserved:
            reserved.add(index)
            size = sizes[index] if index < len(sizes) else 0
            if extents(pieces[index], size) > IN_INODE_EXTENTS:
                items.append(Item(hot[index][0], index, reserve=True))
        for p in pieces[index] if k is None else [pieces[index][k]]:
            items.append(Item(hot[index][0], index, piece=p))

    done: set[tuple[int, int | None]] = set()
    later: list[int] = []
    for kind, v in order:
        if kind == "file":
            assert isinstance(v, int)
            if (v, None) in done:
                continue
            done.add((v, None))
            if v in split:
                later.append(v)
            else:
                put(v, None)
        elif kind == "piece":
            assert isinstance(v, tuple)
            if (v[0], v[1]) not in done:
                done.add((v[0], v[1]))
                put(v[0], v[1])
        else:
            assert isinstance(v, bytes)
            if v:
                place(v)
    for v in later:
        put(v, None)
    return Plan(tuple(items), frozenset(full) | {b""})


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


__all__ = ["IN_INODE_EXTENTS", "MERGE_GAP", "SPLIT_MIN", "Item", "Plan", "Touch", "ancestors",
           "extents", "plan", "split", "unused", "used"]
