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
"""

from __future__ import annotations

import os
from dataclasses import dataclass


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


def plan(hot: list[list[bytes]]) -> Plan:
    """`hot`: each hot inode's hot names, in access order. Each directory comes right before
    the first file under it (its listing and lookups come then), parents before children."""
    items: list[Item] = []
    dirs: dict[bytes, None] = {}
    for index, names in enumerate(hot):
        for name in names:
            for d in ancestors(name):
                if d not in dirs:
                    dirs[d] = None
                    items.append(Item(d))
        items.append(Item(names[0], index))
    return Plan(tuple(items), frozenset(dirs) | {b""})


__all__ = ["Item", "Plan", "ancestors", "plan"]
