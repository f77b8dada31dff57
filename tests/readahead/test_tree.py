"""tree.copy_part: only the ranges asked for are copied, the rest stays a hole (a new
file) or as it was (an existing one), and the source's own holes stay holes."""

from __future__ import annotations

import os
from pathlib import Path

from backburner.readahead import tree

K = 4096


def _sparse_source(path: Path) -> bytes:
    """64 KiB: data in [0, 16K) and [32K, 64K), a hole in [16K, 32K)."""
    data = bytes(range(256)) * 64
    with open(path, "wb") as f:
        f.write(data[:16 * K // 4])
        f.write(os.urandom(16 * K - 16 * K // 4))
        f.seek(32 * K)
        f.write(os.urandom(32 * K))
    return path.read_bytes()


def _data_ranges(path: Path) -> list[tuple[int, int]]:
    fd = os.open(path, os.O_RDONLY)
    try:
        return list(tree._data_ranges(fd, os.fstat(fd).st_size))
    finally:
        os.close(fd)


def test_copy_part_into_a_new_file_leaves_holes_elsewhere(tmp_path: Path) -> None:
    src = tmp_path / "src"
    whole = _sparse_source(src)
    dst = tmp_path / "dst"
    tree.copy_part(os.fsencode(src), os.fsencode(dst), [(4 * K, 4 * K), (24 * K, 16 * K)],
                   len(whole))
    got = dst.read_bytes()
    assert len(got) == len(whole)
    assert got[4 * K:8 * K] == whole[4 * K:8 * K] and got[32 * K:40 * K] == whole[32 * K:40 * K]
    assert got[:4 * K] == bytes(4 * K) and got[40 * K:] == bytes(24 * K)
    # what the source holds in [24K, 32K) is a hole: nothing written there either
    assert _data_ranges(dst) == [(4 * K, 8 * K), (32 * K, 40 * K)]


def test_copy_part_fills_an_existing_file_in_place(tmp_path: Path) -> None:
    src = tmp_path / "src"
    whole = _sparse_source(src)
    dst = tmp_path / "dst"
    tree.copy_part(os.fsencode(src), os.fsencode(dst), [(0, 8 * K)], len(whole))
    ino = dst.stat().st_ino
    tree.copy_part(os.fsencode(src), os.fsencode(dst), [(8 * K, len(whole))], len(whole),
                   existing=True)
    assert dst.read_bytes() == whole and dst.stat().st_ino == ino
    assert _data_ranges(dst) == [(0, 16 * K), (32 * K, 64 * K)]
