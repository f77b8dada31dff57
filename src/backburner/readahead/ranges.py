"""Byte ranges of a file, as a pack holds them: (offset, length), sorted and not touching;
merged, subtracted, widened to whole pages, read from a mincore(2) vector, clipped to a
file's size (pure).

Every reader of pages (record, replay, layout, the page-cache checks) does this arithmetic;
it lives here, apart from the pack's format (`pack`), so it is one implementation tested
once.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

#: Ranges of one file, as (byte offset, byte length), sorted, not touching, page-aligned.
Ranges = tuple[tuple[int, int], ...]


def merge_ranges(ranges: Iterable[tuple[int, int]]) -> Ranges:
    """Sorted, with overlapping or touching ranges joined and empty ones dropped."""
    out: list[list[int]] = []
    for off, ln in sorted((int(o), int(n)) for o, n in ranges if n > 0):
        if off < 0:
            raise ValueError(f"negative offset {off}")
        if out and off <= out[-1][0] + out[-1][1]:
            out[-1][1] = max(out[-1][1], off + ln - out[-1][0])
        else:
            out.append([off, ln])
    return tuple((o, n) for o, n in out)


def subtract_ranges(ranges: Iterable[tuple[int, int]], minus: Iterable[tuple[int, int]]
                    ) -> Ranges:
    """The bytes of `ranges` that are in none of `minus`, merged."""
    out: list[tuple[int, int]] = []
    cut = merge_ranges(minus)
    for off, ln in merge_ranges(ranges):
        pos, end = off, off + ln
        for c_off, c_ln in cut:
            if c_off + c_ln <= pos:
                continue
            if c_off >= end:
                break
            if c_off > pos:
                out.append((pos, c_off - pos))
            pos = max(pos, c_off + c_ln)
        if pos < end:
            out.append((pos, end - pos))
    return tuple(out)


def page_align(ranges: Iterable[tuple[int, int]], page: int) -> Ranges:
    """Each range widened to whole pages (what the page cache holds), then merged."""
    return merge_ranges(((off // page) * page,
                         -(-(off + ln) // page) * page - (off // page) * page)
                        for off, ln in ranges if ln > 0)


def ranges_from_pages(resident: bytes | Sequence[int], page: int, first_page: int = 0
                      ) -> Ranges:
    """A mincore(2) vector (bit 0 of each byte: that page is resident) -> byte ranges."""
    out: list[tuple[int, int]] = []
    start = None
    for i, flag in enumerate(resident):
        if flag & 1:
            if start is None:
                start = i
        elif start is not None:
            out.append(((first_page + start) * page, (i - start) * page))
            start = None
    if start is not None:
        out.append(((first_page + start) * page, (len(resident) - start) * page))
    return tuple(out)


def clip(ranges: Ranges, size: int) -> Ranges:
    """The parts of the ranges inside a file of `size` bytes."""
    return tuple((off, min(off + ln, size) - off) for off, ln in ranges if off < size)
