"""hotplan: the hot region's order (pure): each directory right before the first file
under it, parents before children, every name of a hot inode placed."""

from __future__ import annotations

from backburner.readahead import hotplan


def test_directories_come_right_before_their_first_file() -> None:
    hot = [[b"py/lib/os.py"], [b"site/rich/__init__.py"], [b"py/lib/json/__init__.py"],
           [b"top"], [b"site/rich/console.py", b"py/lib/alias.py"]]
    p = hotplan.plan(hot)
    assert [(i.rel, i.hot) for i in p.items] == [
        (b"py", None), (b"py/lib", None), (b"py/lib/os.py", 0),
        (b"site", None), (b"site/rich", None), (b"site/rich/__init__.py", 1),
        (b"py/lib/json", None), (b"py/lib/json/__init__.py", 2),
        (b"top", 3),
        (b"site/rich/console.py", 4)]
    assert p.dirs == {b"", b"py", b"py/lib", b"site", b"site/rich", b"py/lib/json"}
    assert [i.is_dir for i in p.items].count(True) == 5


def test_rank_names_sort_in_rank_order() -> None:
    p = hotplan.plan([[b"d%d/f" % i] for i in range(6000)])
    names = [p.name(r) for r in range(len(p.items))]
    assert len(names) == 12000 and sorted(names) == names and len(set(names)) == 12000
    assert hotplan.ancestors(b"a/b/c") == [b"a", b"a/b"] and hotplan.ancestors(b"x") == []


def test_split_files_come_after_all_the_others_in_access_order() -> None:
    hot = [[b"program/soffice.bin"], [b"program/libmerged.so"], [b"share/a.xcd"],
           [b"program/libsw.so"], [b"share/b.xcd"], [b"big/only.so"]]
    p = hotplan.plan(hot, frozenset({1, 3, 5}))
    assert [(i.rel, i.hot) for i in p.items] == [
        (b"program", None), (b"program/soffice.bin", 0),
        (b"share", None), (b"share/a.xcd", 2), (b"share/b.xcd", 4),
        (b"program/libmerged.so", 1), (b"program/libsw.so", 3),
        (b"big", None), (b"big/only.so", 5)]


K, M = 4096, 1 << 20


def test_used_ranges_are_whole_blocks_with_small_gaps_closed() -> None:
    assert hotplan.MERGE_GAP == 64 * 1024
    ranges = [(100, 10), (5000, 4000),  # blocks 0-2, one gap of a block: closed
              (200 * K, K),  # 197 blocks later: kept apart
              (200 * K + hotplan.MERGE_GAP + K, 1)]  # a gap of exactly MERGE_GAP: kept apart
    assert hotplan.used(ranges, 10 * M, K) == (
        (0, 3 * K), (200 * K, K), (200 * K + hotplan.MERGE_GAP + K, K))
    assert hotplan.used([(0, 3 * K), (3 * K + hotplan.MERGE_GAP - K, K)], M, K) == (
        (0, 3 * K + hotplan.MERGE_GAP),)
    # ranges past the end (the last page of a recording) are cut to the file
    assert hotplan.used([(M - 10, 8 * K), (2 * M, K)], M, K) == ((M - K, K),)


def test_unused_is_the_rest_of_the_file() -> None:
    assert hotplan.unused(((0, K), (3 * K, K)), 5 * K + 7) == ((K, 2 * K), (4 * K, K + 7))
    assert hotplan.unused((), 10) == ((0, 10),)
    assert hotplan.unused(((0, 2 * K),), 2 * K) == ()


def test_split_takes_files_with_at_least_split_min_unread() -> None:
    assert hotplan.SPLIT_MIN == M
    files = [(8 * M, ((0, 7 * M),)),  # 1 MiB unread: split
             (8 * M, ((0, 7 * M + K),)),  # 1 MiB - 4 KiB unread: whole
             (3 * M, ()),  # opened, nothing read: all of it after the region
             (100 * K, ())]  # small: whole
    assert hotplan.split(files) == {0, 2}


def test_touches_place_directories_where_first_touched() -> None:
    """A directory listed or searched before any file under it is read comes at that
    point (complete); one only stat'd is bare; a file never touched comes last."""
    hot = [[b"data/d1/a"], [b"data/d2/b"], [b"etc/x"]]
    touches = [("dir", b"etc"), ("dir", b"data/d2"), ("bare", b"data/d9"), ("file", 0),
               ("file", 1)]
    p = hotplan.plan(hot, touches=touches)
    assert [(i.rel, i.hot, i.bare) for i in p.items] == [
        (b"etc", None, False), (b"data", None, False), (b"data/d2", None, False),
        (b"data/d9", None, True), (b"data/d1", None, False), (b"data/d1/a", 0, False),
        (b"data/d2/b", 1, False), (b"etc/x", 2, False)]
    assert p.dirs == {b"", b"etc", b"data", b"data/d1", b"data/d2"}


def test_pieces_come_where_they_were_read_with_a_reservation_when_needed() -> None:
    """A scattered file's pieces in their own slots, interleaved with the other files;
    before its first piece, a block for its extent tree if it will have more than four
    extents."""
    hot = [[b"lib/big.so"], [b"lib/small.so"], [b"data/f"]]
    pieces = {0: [(8 * K, 4 * K), (0, 4 * K), (40 * K, 4 * K)],
              1: [(4 * K, 4 * K)]}
    touches = [("piece", (0, 0)), ("piece", (1, 0)), ("file", 2), ("piece", (0, 1)),
               ("piece", (0, 2))]
    p = hotplan.plan(hot, touches=touches, pieces=pieces, sizes=[M, 12 * K, K])
    assert [(i.rel, i.reserve, i.piece) for i in p.items] == [
        (b"lib", False, None), (b"lib/big.so", True, None), (b"lib/big.so", False, (8 * K, 4 * K)),
        (b"lib/small.so", False, (4 * K, 4 * K)),  # three extents: no reservation
        (b"data", False, None), (b"data/f", False, None),
        (b"lib/big.so", False, (0, 4 * K)), (b"lib/big.so", False, (40 * K, 4 * K))]
    assert hotplan.extents(pieces[0], M) == 6 and hotplan.extents(pieces[1], 12 * K) == 3
    assert hotplan.extents([(0, 12 * K)], 12 * K) == 1
