"""tree: a file copied keeps its holes; two trees compared say what differs (content,
mode, xattrs, a node of another kind, a name too many or missing, hard links)."""

from __future__ import annotations

import os
from pathlib import Path

from backburner.readahead import tree

K = 4096


def _sparse_source(path: Path) -> bytes:
    """64 KiB: data in [0, 16K) and [32K, 64K), a hole in [16K, 32K)."""
    with open(path, "wb") as f:
        f.write(os.urandom(16 * K))
        f.seek(32 * K)
        f.write(os.urandom(32 * K))
    return path.read_bytes()


def _data_ranges(path: Path) -> list[tuple[int, int]]:
    fd = os.open(path, os.O_RDONLY)
    try:
        return list(tree._data_ranges(fd, os.fstat(fd).st_size))
    finally:
        os.close(fd)


def test_copy_data_keeps_the_holes(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    data = _sparse_source(src)
    tree.copy_data(os.fsencode(src), os.fsencode(dst))
    assert dst.read_bytes() == data
    assert _data_ranges(dst) == _data_ranges(src) == [(0, 16 * K), (32 * K, 64 * K)]


def test_compare_says_what_differs(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    for root in (a, b):
        (root / "d").mkdir(parents=True)
        (root / "d/f").write_text("same")
        (root / "d/g").write_text("other")
        for rel in ("d/f", "d/g", "d"):
            os.utime(root / rel, ns=(1, 10**18))
    assert tree.compare(os.fsencode(a), os.fsencode(b)) == []
    os.link(a / "d/f", a / "d/link")
    (b / "d/link").write_text("same")
    os.utime(b / "d/link", ns=(1, 10**18))
    (b / "d/g").write_text("OTHER")
    os.utime(b / "d/g", ns=(1, 10**18))
    os.chmod(b / "d/f", 0o600)
    os.setxattr(b / "d", "user.x", b"1")
    (b / "extra").write_text("")
    for root in (a, b):
        os.utime(root / "d", ns=(1, 10**18))
    problems = tree.compare(os.fsencode(a), os.fsencode(b))
    assert "d: different extended attributes" in problems
    assert "d/f: mode 600, not 644" in problems
    assert "d/g: different content" in problems
    assert "extra: not in the source" in problems
    assert "d/f: hard links differ" in problems
