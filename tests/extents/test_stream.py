"""extents.stream: O_DIRECT reads at any alignment, byte-exact comparison, streamed digests,
and a reader thread that never outlives its pass. A regular file on the test machine's
disk stands in for the block device (O_DIRECT works on both)."""

from __future__ import annotations

import hashlib
import os
import random
import threading
from pathlib import Path

import pytest

from backburner.extents import stream as S
from backburner.extents.stream import DeviceReader, Piece

MiB = 1 << 20


@pytest.mark.parametrize("seed", range(40))
def test_first_difference(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randint(1, 20000)
    a = bytearray(rng.randbytes(n))
    b = bytearray(a)
    assert S.first_difference(memoryview(a), memoryview(b)) is None
    where = sorted(rng.sample(range(n), rng.randint(1, min(n, 3))))
    for i in where:
        b[i] ^= 1 << rng.randrange(8)
    assert S.first_difference(memoryview(a), memoryview(b)) == where[0]


@pytest.fixture
def disk(tmp_path: Path) -> tuple[Path, bytes]:
    data = random.Random(1).randbytes(3 * MiB + 512)
    path = tmp_path / "disk"
    path.write_bytes(data)
    return path, data


@pytest.mark.parametrize("block", [512, 4096])
def test_unaligned_reads(disk: tuple[Path, bytes], block: int) -> None:
    path, data = disk
    rng = random.Random(block)
    with DeviceReader(str(path), block, chunk=MiB) as dev:
        buf = dev.buffer()
        for _ in range(200):
            off = rng.randrange(0, len(data) - 1)
            n = rng.randint(1, min(MiB, len(data) - off))
            view = dev.read_into(buf, off, n)
            assert view == data[off:off + n]
            view.release()
        buf.close()


def test_pass_digests_and_compares(disk: tuple[Path, bytes]) -> None:
    path, data = disk
    pieces = [Piece(0, MiB + 512, 0), Piece(2 * MiB, 4096, 2 * MiB), Piece(MiB, 8192)]
    seen: list[tuple[int, int]] = []
    fd = os.open(path, os.O_RDONLY)
    try:
        with DeviceReader(str(path), 512, chunk=256 * 1024) as dev:
            res = S.run_pass(pieces, fd, str(path), dev, compare=True, digest=True,
                             progress=lambda d, t: seen.append((d, t)))
    finally:
        os.close(fd)
    for piece, r in zip(pieces, res, strict=True):
        want = hashlib.sha256(data[piece.logical:piece.logical + piece.length]).hexdigest()
        assert r.file_digest == want and r.mismatch_at is None
        assert r.device_digest == (want if piece.physical is not None else None)
    total = sum(p.length for p in pieces)
    assert seen[-1] == (total, total) and [d for d, _ in seen] == sorted(d for d, _ in seen)


def test_pass_stops_at_the_first_difference(tmp_path: Path, disk: tuple[Path, bytes]) -> None:
    path, data = disk
    other = tmp_path / "file"
    changed = bytearray(data)
    changed[MiB + 300_001] ^= 0xFF
    other.write_bytes(changed)
    threads = threading.active_count()
    pieces = [Piece(0, MiB, 0), Piece(MiB, MiB, MiB), Piece(2 * MiB, MiB, 2 * MiB)]
    fd = os.open(other, os.O_RDONLY)
    try:
        with DeviceReader(str(path), 512, chunk=64 * 1024) as dev:
            res = S.run_pass(pieces, fd, str(other), dev, compare=True, digest=False)
    finally:
        os.close(fd)
    assert [r.mismatch_at for r in res] == [None, 300_001]  # the third piece was not read
    assert threading.active_count() == threads  # the reader thread is gone


def test_a_file_shorter_than_its_map(disk: tuple[Path, bytes], tmp_path: Path) -> None:
    from backburner.base.errors import DataError

    path, _ = disk
    short = tmp_path / "short"
    short.write_bytes(b"x" * 1000)
    fd = os.open(short, os.O_RDONLY)
    try:
        with pytest.raises(DataError, match="reading at byte 1000: it ends there"):
            S.run_pass([Piece(0, 4096)], fd, str(short), None, compare=False, digest=True)
    finally:
        os.close(fd)
