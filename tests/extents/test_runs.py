"""extents.runs: merging FIEMAP extents into runs exactly once, segments, totals (pure).

The property tests build a known layout block by block, cut it into the pieces a filesystem
and FIEMAP paging could report (splits at arbitrary blocks, repeated and overlapping pieces,
extents past EOF), and check the merge against the truth: every byte mapped where the truth
says, none twice, none left out, holes stay holes, and no two runs that should be one.
"""

from __future__ import annotations

import random

import pytest

from backburner.base.errors import DataError
from backburner.extents import runs as R
from backburner.extents.runs import Extent, Run

B = 4096


def truth_layout(rng: random.Random, nblocks: int) -> list[tuple[int, int] | None]:
    """Per block: (device byte, flags) or None for a hole. Neighbours are often physically
    contiguous, sometimes with other flags (written next to unwritten: must not merge)."""
    out: list[tuple[int, int] | None] = []
    phys = rng.randrange(1, 1000) * B
    flags = 0
    for _ in range(nblocks):
        if rng.random() < 0.2:
            out.append(None)
            continue
        r = rng.random()
        if r < 0.2:
            phys = rng.randrange(1, 100000) * B  # a jump
        if r > 0.85:
            flags = rng.choice([0, R.UNWRITTEN, R.SHARED, R.UNWRITTEN | R.SHARED])
        out.append((phys, flags))
        phys += B
    return out


def expected_runs(blocks: list[tuple[int, int] | None], size: int) -> list[tuple[int, int, int,
                                                                                  int]]:
    """Maximal runs of the truth, clipped to size: (logical, physical, length, flags)."""
    out: list[list[int]] = []
    for i, b in enumerate(blocks):
        if b is None:
            continue
        phys, flags = b
        last = out[-1] if out else None
        if last and last[0] + last[2] == i * B and last[1] + last[2] == phys and last[3] == flags:
            last[2] += B
        else:
            out.append([i * B, phys, B, flags])
    clipped = []
    for lo, phys, n, flags in out:
        if lo >= size:
            continue
        clipped.append((lo, phys, min(n, size - lo), flags))
    return clipped


def _groups(blocks: list[tuple[int, int] | None]) -> list[tuple[int, int, int, int]]:
    """Maximal spans contiguous in file and device with one set of flags:
    (first block, blocks, device byte, flags)."""
    out: list[list[int]] = []
    for i, b in enumerate(blocks):
        if b is None:
            continue
        last = out[-1] if out else None
        if last and last[0] + last[1] == i and last[2] + last[1] * B == b[0] and last[3] == b[1]:
            last[1] += 1
        else:
            out.append([i, 1, b[0], b[1]])
    return [tuple(g) for g in out]  # type: ignore[misc]


def _split(rng: random.Random, group: tuple[int, int, int, int]) -> list[Extent]:
    """One way a filesystem could report a span: cut at random blocks."""
    first, n, phys, flags = group
    cuts = sorted(rng.sample(range(1, n), rng.randint(0, min(n - 1, 4)))) if n > 1 else []
    out = []
    for a, b in zip([0, *cuts], [*cuts, n], strict=True):
        extra = R.MERGED if rng.random() < 0.1 else 0
        out.append(Extent((first + a) * B, phys + a * B, (b - a) * B, flags | extra))
    return out


def fiemap_like(rng: random.Random, blocks: list[tuple[int, int] | None]) -> list[Extent]:
    """The truth as FIEMAP might report it: each span cut into pieces one way, plus pieces
    of another cut (paging repeats and overlaps: inside, straddling, identical), shuffled."""
    exts: list[Extent] = []
    for group in _groups(blocks):
        exts += _split(rng, group)
        exts += [e for e in _split(rng, group) if rng.random() < 0.3]
    if exts:
        last = max(exts, key=lambda e: e.logical + e.length)
        exts[exts.index(last)] = last._replace(flags=last.flags | R.LAST)
    rng.shuffle(exts)
    return exts


def blocks_of(runs: list[Run]) -> dict[int, tuple[int, int]]:
    """Byte-exact expansion at block granularity: file block -> (device byte, flags)."""
    out: dict[int, tuple[int, int]] = {}
    for r in runs:
        for off in range(0, r.length, B):
            key = (r.logical + off) // B
            assert key not in out, f"file block {key} mapped twice"
            out[key] = (r.physical + off, r.flags & ~R.NEUTRAL)
    return out


@pytest.mark.parametrize("seed", range(300))
def test_merge_matches_the_truth(seed: int) -> None:
    rng = random.Random(seed)
    blocks = truth_layout(rng, rng.randint(0, 60))
    size = rng.randint(0, len(blocks) * B)
    got = R.merge(fiemap_like(rng, blocks), size)
    want = expected_runs(blocks, size)
    assert [(r.logical, r.physical, r.length, r.flags & ~R.NEUTRAL) for r in got] == want
    # nothing twice, nothing outside [0, size), in order, maximal
    assert all(a.end <= b.logical for a, b in zip(got, got[1:], strict=False))
    assert all(r.logical >= 0 and r.end <= size and r.length > 0 for r in got)
    for a, b in zip(got, got[1:], strict=False):
        assert not (a.end == b.logical and a.physical_end == b.physical
                    and (a.flags & ~R.NEUTRAL) == (b.flags & ~R.NEUTRAL))
    # holes are holes, and segments cut [0, size) exactly
    segs = R.segments(got, size)
    assert sum(s.length for s in segs) == size
    assert all(a.end == b.logical for a, b in zip(segs, segs[1:], strict=False))
    mapped = blocks_of(got)
    inside = -(-size // B)  # blocks that hold file bytes (the last one maybe partly)
    assert all(i < inside for i in mapped)
    for i, b in enumerate(blocks[:inside]):
        assert mapped.get(i) == b, i


def test_adjacent_written_and_unwritten_stay_apart() -> None:
    exts = [Extent(0, 8192, 4096, 0), Extent(4096, 12288, 4096, R.UNWRITTEN | R.LAST)]
    assert R.merge(exts) == [Run(0, 8192, 4096, 0, 1), Run(4096, 12288, 4096, R.UNWRITTEN, 1)]


def test_split_extents_merge_once() -> None:
    """ext4 splits a contiguous allocation at 128 MiB: one run, counting both extents."""
    big = 128 << 20
    exts = [Extent(0, 1 << 30, big), Extent(big, (1 << 30) + big, 4096, R.LAST)]
    assert R.merge(exts) == [Run(0, 1 << 30, big + 4096, 0, 2)]


def test_page_overlap_is_dropped_when_consistent() -> None:
    exts = [Extent(0, 1000 * B, 10 * B), Extent(5 * B, 1005 * B, 10 * B)]
    assert R.merge(exts) == [Run(0, 1000 * B, 15 * B, 0, 2)]
    assert R.merge(exts + [Extent(2 * B, 1002 * B, 3 * B)]) == R.merge(exts)


@pytest.mark.parametrize("other", [
    Extent(5 * B, 2005 * B, 10 * B),  # the same file bytes somewhere else
    Extent(5 * B, 1005 * B, 10 * B, R.UNWRITTEN),  # the same place, read differently
])
def test_contradictions_are_refused(other: Extent) -> None:
    with pytest.raises(DataError, match="conflicting extents for file offset 20480"):
        R.merge([Extent(0, 1000 * B, 10 * B), other])


def test_extents_past_eof_are_clipped() -> None:
    """fallocate --keep-size: allocation past the end is not the file's."""
    exts = [Extent(0, 40960, 8192), Extent(8192, 49152, 8192, R.UNWRITTEN | R.LAST)]
    assert R.merge(exts, 5000) == [Run(0, 40960, 5000, 0, 1)]
    assert R.merge(exts, 0) == []


def test_select_returns_pieces_in_request_order() -> None:
    runs = [Run(0, 100 * B, 4 * B), Run(8 * B, 50 * B, 4 * B)]
    got = R.select(runs, [(9 * B, B), (2 * B, 8 * B), (4 * B, 4 * B), (0, 0)])
    assert got == [Run(9 * B, 51 * B, B), Run(2 * B, 102 * B, 2 * B), Run(8 * B, 50 * B, 2 * B)]


@pytest.mark.parametrize("seed", range(50))
def test_select_matches_bytewise(seed: int) -> None:
    rng = random.Random(seed)
    blocks = truth_layout(rng, 40)
    runs = R.merge(fiemap_like(rng, blocks))
    truth = blocks_of(runs)
    for _ in range(10):
        off, n = rng.randrange(0, 45 * B, 512), rng.randrange(0, 12 * B, 512)
        got = R.select(runs, [(off, n)])
        covered = {}
        for r in got:
            assert off <= r.logical and r.end <= off + n
            for x in range(r.logical, r.end, 512):
                covered[x] = r.physical + x - r.logical
        for x in range(off, off + n, 512):
            b = truth.get(x // B)
            assert covered.get(x) == (None if b is None else b[0] + x % B)


def test_totals() -> None:
    runs = [Run(0, 100 * B, 2 * B, 0, 3), Run(2 * B, 102 * B, B, R.UNWRITTEN),
            Run(5 * B, 10 * B, B, R.SHARED), Run(6 * B, 11 * B, B, R.ENCODED)]
    t = R.totals(runs, 9 * B, extents=6)
    assert (t.extents, t.runs, t.holes, t.hole_bytes) == (6, 4, 2, 4 * B)
    assert (t.data_bytes, t.unwritten_bytes, t.unmappable_bytes, t.shared_bytes) == \
        (3 * B, B, B, B)
    assert t.jumps == 1  # 102..103 -> 10: one move; 10 -> 11 is contiguous across the hole
    assert t.largest_run == 2 * B
    assert R.flag_names(t.flags) == ["encoded", "unwritten", "shared"]


def test_flag_names_round_trip() -> None:
    for flags in (0, R.UNWRITTEN | R.SHARED, R.ENCODED | R.LAST | 0x40000):
        assert R.parse_flags(R.flag_names(flags)) == flags
    with pytest.raises(DataError):
        R.parse_flags(["sparkly"])
