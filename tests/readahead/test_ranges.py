"""Byte-range arithmetic (pure): merging, subtracting and page-aligning checked against
seeded models of page and byte sets, and a mincore vector read back as ranges.
"""

from __future__ import annotations

import random

from backburner.readahead import ranges as R

PAGE = 4096


def test_merge_and_align() -> None:
    assert R.merge_ranges([(10, 5), (0, 3), (3, 2), (20, 0), (12, 10)]) == ((0, 5), (10, 12))
    assert R.page_align([(100, 10), (4095, 2), (9000, 1)], PAGE) == ((0, 3 * PAGE),)
    assert R.page_align([(100, 10), (9000, 1)], PAGE) == ((0, PAGE), (2 * PAGE, PAGE))
    assert R.page_align([(0, PAGE), (2 * PAGE, PAGE)], PAGE) == ((0, PAGE), (2 * PAGE, PAGE))


def test_merge_matches_a_page_set_model() -> None:
    rng = random.Random(5)
    for _ in range(200):
        ranges = [(rng.randint(0, 50), rng.randint(0, 10)) for _ in range(rng.randint(0, 8))]
        covered = {x for o, n in ranges for x in range(o, o + n)}
        merged = R.merge_ranges(ranges)
        assert {x for o, n in merged for x in range(o, o + n)} == covered
        assert all(a[0] + a[1] < b[0] for a, b in zip(merged, merged[1:], strict=False))


def test_subtract_matches_a_byte_set_model() -> None:
    assert R.subtract_ranges([(0, 10)], [(3, 2), (8, 5)]) == ((0, 3), (5, 3))
    rng = random.Random(6)
    for _ in range(300):
        a = [(rng.randint(0, 50), rng.randint(0, 10)) for _ in range(rng.randint(0, 6))]
        b = [(rng.randint(0, 50), rng.randint(0, 10)) for _ in range(rng.randint(0, 6))]
        left = R.subtract_ranges(a, b)
        want = ({x for o, n in a for x in range(o, o + n)}
                - {x for o, n in b for x in range(o, o + n)})
        assert {x for o, n in left for x in range(o, o + n)} == want
        assert left == R.merge_ranges(left)


def test_ranges_from_a_mincore_vector() -> None:
    vec = bytes([1, 1, 0, 0, 1, 0, 0x81, 1])  # only bit 0 counts
    assert R.ranges_from_pages(vec, PAGE) == ((0, 2 * PAGE), (4 * PAGE, PAGE),
                                              (6 * PAGE, 2 * PAGE))
    assert R.ranges_from_pages(bytes([2, 0]), PAGE) == ()
    assert R.ranges_from_pages(bytes([1]), PAGE, first_page=10) == ((10 * PAGE, PAGE),)
