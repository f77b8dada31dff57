"""A real ext4 on a loop device, made and mounted through `system` (so its undo is the
code under test's own), with a small tree of files on it; and page-cache probes that do
not use the code under test."""

from __future__ import annotations

import ctypes
import mmap
import os
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import loop_ext4

MiB = 1 << 20
PAGE = mmap.PAGESIZE
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                       ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]


@dataclass
class Bed:
    mnt: Path
    loop: str
    image: Path

    def path(self, rel: str | bytes) -> bytes:
        return os.path.join(os.fsencode(self.mnt), os.fsencode(rel))


#: name -> size; written with seeded random bytes
TREE = {
    "a/one.txt": 10_000,
    "a/two.txt": 3 * PAGE,
    "b c/three\nfile": 5_000,
    b"b c/\xff\xfenot-utf8": 7_000,
    "big.bin": MiB,
    "unread.txt": 2 * PAGE,
    "lib/mod.py": 20_000,
}


def write_tree(root: Path, tree: dict = TREE, seed: int = 0) -> None:
    rng = random.Random(seed)
    for rel, size in tree.items():
        path = os.path.join(os.fsencode(root), os.fsencode(rel))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:  # a .py file must import: one long comment
            f.write(b"#" * (size - 1) + b"\n" if path.endswith(b".py") else rng.randbytes(size))


@pytest.fixture
def bed(tmp_path: Path, state_dir: Path) -> Iterator[Bed]:
    with loop_ext4(tmp_path, 64 * MiB) as (loop, mnt):
        write_tree(mnt)
        os.sync()
        yield Bed(mnt, loop, tmp_path / "disk.img")


def resident(path: bytes | str) -> list[tuple[int, int]]:
    """Resident byte ranges of a file by mmap + mincore, written here independently of
    the code under test."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            return []
        addr = _libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        assert addr not in (None, ctypes.c_void_p(-1).value), os.strerror(ctypes.get_errno())
        try:
            vec = (ctypes.c_ubyte * -(-size // PAGE))()
            assert _libc.mincore(ctypes.c_void_p(addr), size, vec) == 0
        finally:
            _libc.munmap(ctypes.c_void_p(addr), size)
    finally:
        os.close(fd)
    out: list[tuple[int, int]] = []
    for i, v in enumerate(vec):
        if v & 1:
            if out and out[-1][0] + out[-1][1] == i * PAGE:
                out[-1] = (out[-1][0], out[-1][1] + PAGE)
            else:
                out.append((i * PAGE, PAGE))
    return out
