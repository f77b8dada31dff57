"""hotorder (pure): a pack's steps and lookups made into the hot plan's touches: files
whole where first read, files read out of order or in part in pieces where each piece was
read, directories where a lookup first touched them; a pack without steps as before."""

from __future__ import annotations

from backburner.readahead import hotorder
from backburner.readahead.pack import (
    LISTED,
    MISSED,
    STATTED,
    Entry,
    FileState,
    Lookup,
    Pack,
    Step,
)

K, M = 4096, 1 << 20
ROOT = b"/mnt/app"
KINDS = {b"lib": "dir", b"lib/big.so": "file", b"lib/c.so": "file", b"data": "dir",
         b"data/f": "file", b"data/sub": "dir", b"etc": "dir"}


def _entry(rel: bytes, size: int, ranges: tuple = ()) -> Entry:
    return Entry(ROOT + b"/" + rel, FileState(1, 0, len(rel), size, 0), ranges)


def _lookup(kind: int, rel: bytes) -> Lookup:
    return Lookup(kind, ROOT + b"/" + rel, FileState(1, 0, 0, 0, 0))


def test_steps_decide_files_pieces_and_directories() -> None:
    entries = (_entry(b"lib/big.so", 2 * M, ((0, 4 * K), (M, 2 * K))),
               _entry(b"lib/c.so", 4 * K, ((0, 4 * K),)), _entry(b"data/f", 2 * K,
                                                                  ((0, 2 * K),)))
    lookups = (_lookup(MISSED, b"etc/ld.so.cache"), _lookup(LISTED, b"data"),
               _lookup(STATTED, b"data/sub"), _lookup(MISSED, b"data/none/deep"))
    steps = (Step(-1), Step(0, 0, 2), Step(1, 0, 2), Step(0, 2, 2),  # not contiguous in time
             Step(-2), Step(-3), Step(2, 0, 1), Step(2, 1, 1),  # contiguous: one run
             Step(1, 2, 2), Step(0, M // K, 2), Step(-4))
    pack = Pack(entries, K, lookups=lookups, steps=steps)
    got = hotorder.order(pack, ROOT, KINDS, {0: 0, 1: 1, 2: 2}, [2 * M, 4 * K, 2 * K],
                         [e.ranges for e in entries], K)
    assert got.touches == [
        ("dir", b"etc"), ("piece", (0, 0)), ("piece", (1, 0)), ("piece", (0, 1)),
        ("dir", b"data"), ("dir", b"data"), ("bare", b"data/sub"), ("file", 2),
        ("piece", (1, 1)), ("piece", (0, 2)), ("dir", b"data")]
    assert got.pieces == {0: [(0, 2 * K), (2 * K, 2 * K), (M, 2 * K)],
                          1: [(0, 2 * K), (2 * K, 2 * K)]}
    assert not got.split
    whole = hotorder.order(pack, ROOT, KINDS, {0: 0, 1: 1, 2: 2}, [2 * M, 4 * K, 2 * K],
                           [e.ranges for e in entries], K, scatter=False)
    assert whole.pieces == {} and ("file", 0) in (whole.touches or [])


def test_a_pack_without_steps_splits_the_large_files_only() -> None:
    entries = (_entry(b"lib/big.so", 4 * M, ((0, 64 * K), (2 * M, 128 * K))),
               _entry(b"lib/c.so", 16 * K, ((0, 16 * K),)))
    pack = Pack(entries, K)
    got = hotorder.order(pack, ROOT, KINDS, {0: 0, 1: 1}, [4 * M, 16 * K],
                         [e.ranges for e in entries], K)
    assert got.touches is None and got.split == {0}
    assert got.pieces == {0: [(0, 64 * K), (2 * M, 128 * K)]}
