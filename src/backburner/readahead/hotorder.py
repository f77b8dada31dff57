"""What a recorded start touched, in order, in the terms of the hot region's plan
(`hotplan`): its files, the pieces of the files it read out of order, and the
directories it listed, searched or looked at (pure: a pack and the source tree's kinds
in, touches and pieces out).

From a pack recorded with --lookups, the steps say everything in the order it happened:
a file's pages as they came in (a run of pages that continues the one before it, with
nothing of another file in between, is one piece), each lookup at its time. A file read
in one piece from its start (most of them) is placed whole where it was first touched;
one read in several pieces, or of which at least `hotplan.SPLIT_MIN` went unread, is
scattered: each piece in its own slot, where it was read. Without steps (a pack from
before --lookups) the files come in access order and only the large ones are cut, into
their used ranges in the file's order (`hotplan.split`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .hotplan import SPLIT_MIN, Touch, split, used
from .layout import relative
from .pack import LISTED, MISSED, STATTED, Pack
from .ranges import Ranges, merge_ranges, subtract_ranges


@dataclass
class Order:
    touches: list[Touch] | None = None  # None: the hot files' access order
    pieces: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    split: frozenset[int] = frozenset()  # scattered files with no order: after the others


def _lookup_touches(pack: Pack, index: int, base: bytes, kinds: Mapping[bytes, str]
                    ) -> list[Touch]:
    lk = pack.lookups[index]
    rel = relative(lk.path, base) if lk.path != base else b""
    if rel is None:
        return []
    if lk.kind == MISSED:
        while rel and kinds.get(rel) != "dir":
            rel = os.path.dirname(rel)
        return [("dir", rel)]
    if lk.kind == LISTED and kinds.get(rel) == "dir":
        return [("dir", rel)]
    if lk.kind == STATTED and rel in kinds:
        out: list[Touch] = [("dir", os.path.dirname(rel))]
        if kinds[rel] == "dir":
            out.append(("bare", rel))
        return out
    return []


def _block_range(first: int, pages: int, page: int, size: int, block: int
                 ) -> tuple[int, int] | None:
    lo = first * page // block * block
    hi = min(-(-(first + pages) * page // block) * block, -(-size // block) * block)
    return (lo, hi - lo) if hi > lo else None


def _file(v: object) -> int:
    assert isinstance(v, tuple)
    return int(v[0])


def _piece(v: object) -> int:
    assert isinstance(v, tuple)
    return int(v[1])


def order(pack: Pack, base: bytes, kinds: Mapping[bytes, str], hot_of: Mapping[int, int],
          sizes: Sequence[int], ranges: Sequence[Ranges], block: int,
          scatter: bool = True) -> Order:
    """The plan's touches and pieces for the hot files (`sizes` and read `ranges` by hot
    index; `hot_of`: a pack entry's hot index; `kinds`: the source tree's node kinds by
    relative path); `scatter` False keeps every hot file whole."""
    used_ranges = [used(r, s, block) for r, s in zip(ranges, sizes, strict=True)]
    if not pack.steps and not pack.lookups:
        if not scatter:
            return Order()
        cut = split(list(zip(sizes, used_ranges, strict=True)))
        return Order(None, {i: list(used_ranges[i]) for i in cut}, cut)
    runs: list[tuple[int, int, int]] = []  # (hot file, first page, pages), in order
    events: list[tuple[str, int]] = []  # ("run", index into runs) or ("lookup", index)
    for st in pack.steps:
        if st.lookup is not None:
            events.append(("lookup", st.lookup))
            continue
        i = hot_of.get(st.what)
        if i is None:
            continue
        last = runs[-1] if runs and events and events[-1][0] == "run" else None
        if last is not None and last[0] == i and last[1] + last[2] == st.first:
            runs[-1] = (i, last[1], last[2] + st.pages)
            continue
        runs.append((i, st.first, st.pages))
        events.append(("run", len(runs) - 1))
    pieces: dict[int, list[tuple[int, int]]] = {}
    run_piece: dict[int, int] = {}
    for n, (i, first, pages) in enumerate(runs):
        r = _block_range(first, pages, pack.page_size, sizes[i], block)
        if r is None:
            continue
        have = pieces.setdefault(i, [])
        left = subtract_ranges([r], have)
        for off, ln in left:
            run_piece.setdefault(n, len(have))
            have.append((off, ln))
    scattered: set[int] = set()
    for i, ps in pieces.items():
        rest = subtract_ranges(used_ranges[i], ps)  # read, but not seen coming in
        ps += [r for r in rest if r[1] > 0]
        unread = sizes[i] - sum(n for _, n in merge_ranges(ps))
        whole = len(ps) == 1 and ps[0][0] == 0 and unread < SPLIT_MIN
        if scatter and not whole:
            scattered.add(i)
    touches: list[Touch] = []
    for kind, n in events:
        if kind == "lookup":
            touches += _lookup_touches(pack, n, base, kinds)
            continue
        i = runs[n][0]
        if i in scattered and n in run_piece:
            touches.append(("piece", (i, run_piece[n])))
        elif i not in scattered:
            touches.append(("file", i))
    for i in scattered:  # pieces no run brought in: right after the file's last
        mine = [t for t, (k, v) in enumerate(touches) if k == "piece" and _file(v) == i]
        seen = {_piece(touches[t][1]) for t in mine}
        extra: list[Touch] = [("piece", (i, k)) for k in range(len(pieces[i]))
                              if k not in seen]
        at = mine[-1] + 1 if mine else len(touches)
        touches[at:at] = extra
    return Order(touches, {i: pieces[i] for i in scattered})


__all__ = ["Order", "order"]
