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
