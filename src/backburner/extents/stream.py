"""Reading a file's ranges through its filesystem and from its block device, side by side.

Device reads use O_DIRECT (the device's own bytes, not a page cache that may hold newer
ones) into page-aligned mmap buffers, aligned to the device's logical block size. A reader
thread fetches the next device chunks while the caller reads the same range through the
filesystem, compares and hashes: memory stays at a few chunks whatever the file's size,
and the device is kept busy. Threads, not processes: nothing here is spawned.
"""

from __future__ import annotations

import hashlib
import logging
import mmap
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from ..base.errors import DataError, IOFailure, denied
from ..base.quantities import MiB

log = logging.getLogger(__name__)

CHUNK = 8 * MiB
THREADS = 2  # device reads in flight
DIGEST = "sha256"

Progress = Callable[[int, int], None]  # (bytes done, bytes in all)


@dataclass(frozen=True)
class Piece:
    """File bytes ``[logical, logical+length)``; on the device at ``physical`` (None: read
    the file only, e.g. a hole or unwritten space, whose bytes the device does not hold)."""

    logical: int
    length: int
    physical: int | None = None


@dataclass(frozen=True)
class PieceResult:
    file_digest: str | None
    device_digest: str | None
    mismatch_at: int | None = None  # first differing byte, relative to the piece


class DeviceReader:
    """O_DIRECT reads of any byte range of a block device, whatever its alignment."""

    def __init__(self, path: str, block: int, chunk: int | None = None) -> None:
        self.path = path
        self.block = max(block, 512)
        self.chunk = chunk or CHUNK
        try:
            self.fd = os.open(path, os.O_RDONLY | os.O_DIRECT | os.O_CLOEXEC)
        except PermissionError as err:
            raise denied(f"reading the block device {path}", err.strerror) from None
        except FileNotFoundError:
            raise IOFailure(f"{path}: the block device is gone") from None

    def buffer(self) -> mmap.mmap:
        return mmap.mmap(-1, self.chunk + 2 * self.block)  # page-aligned, as O_DIRECT needs

    def read_into(self, buf: mmap.mmap, offset: int, length: int) -> memoryview:
        """Bytes ``[offset, offset+length)`` of the device (length <= chunk)."""
        lo = offset - offset % self.block
        hi = -(-(offset + length) // self.block) * self.block
        view = memoryview(buf)[:hi - lo]
        try:
            _fill(view, lambda v, at: os.preadv(self.fd, [v], lo + at), offset + length - lo,
                  f"{self.path}: reading at byte", lo)
        except BaseException:
            view.release()  # an exported view would keep the buffer from being closed
            raise
        out = view[offset - lo:offset - lo + length]
        view.release()
        return out

    def close(self) -> None:
        os.close(self.fd)

    def __enter__(self) -> DeviceReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _fill(view: memoryview, read: Callable[[memoryview, int], int], need: int, what: str,
          base: int) -> int:
    """Read into ``view`` until it is full or at least ``need`` bytes came (a device or file
    may end inside the last aligned block); IOFailure on an error, DataError at an end."""
    got = 0
    while got < len(view):
        try:
            n = read(view[got:], got)
        except InterruptedError:
            continue
        except OSError as err:
            raise IOFailure(f"{what} {base + got}: {err.strerror}") from None
        if n == 0:
            if got >= need:
                break
            raise DataError(f"{what} {base + got}: it ends there, inside the map",
                            "the file or device changed while it was read: map it again")
        got += n
    return got


def read_file_into(fd: int, buf: mmap.mmap, offset: int, length: int, name: str
                   ) -> memoryview:
    view = memoryview(buf)[:length]
    try:
        _fill(view, lambda v, at: os.preadv(fd, [v], offset + at), length,
              f"{name}: reading at byte", offset)
    except BaseException:
        view.release()
        raise
    return view


def first_difference(a: memoryview, b: memoryview) -> int | None:
    """Offset of the first byte where ``a`` and ``b`` differ, None if they are equal.
    Compared as 8-byte words (memcmp speed) whenever the length allows."""
    n = len(a)
    words = n - n % 8
    if a[:words].cast("Q") == b[:words].cast("Q") and a[words:] == b[words:]:
        return None
    step = 4096
    for start in range(0, n, step):
        if a[start:start + step] != b[start:start + step]:
            return next(i for i in range(start, min(start + step, n)) if a[i] != b[i])
    return None  # pragma: no cover - unreachable: the whole differed, so a block does


def _chunks(pieces: Sequence[Piece], chunk: int) -> Iterator[tuple[Piece, int, int]]:
    """(piece, offset in piece, length) for every chunk, in order."""
    for piece in pieces:
        for off in range(0, piece.length, chunk):
            yield piece, off, min(chunk, piece.length - off)


class _Prefetcher:
    """Reads the device chunks of ``pieces`` ahead on ``THREADS`` threads (so that several
    reads are in flight, as fio's iodepth), handing them over in order.

    A thread takes a free buffer and the next chunk together, under one lock, so chunks
    are claimed in order and the one the consumer waits for always has its buffer.
    """

    def __init__(self, reader: DeviceReader, pieces: Sequence[Piece]) -> None:
        self.reader = reader
        self.work = [(p.physical + off, n) for p, off, n in _chunks(pieces, reader.chunk)
                     if p.physical is not None]
        self.buffers = [reader.buffer() for _ in range(THREADS + 2)]
        self.free = list(self.buffers)
        self.cond = threading.Condition()
        self.claimed = 0
        self.taken = 0
        self.done: dict[int, tuple[memoryview, mmap.mmap] | BaseException] = {}
        self.stopped = False
        self.threads = [threading.Thread(target=self._run, name=f"extents-read-{i}",
                                         daemon=True) for i in range(THREADS)]
        for t in self.threads:
            t.start()

    def _claim(self) -> tuple[int, mmap.mmap] | None:
        with self.cond:
            while not self.stopped and not self.free and self.claimed < len(self.work):
                self.cond.wait()
            if self.stopped or self.claimed >= len(self.work):
                return None
            self.claimed += 1
            return self.claimed - 1, self.free.pop()

    def _run(self) -> None:
        while (claim := self._claim()) is not None:
            i, buf = claim
            item: tuple[memoryview, mmap.mmap] | BaseException
            try:
                item = (self.reader.read_into(buf, *self.work[i]), buf)
            except BaseException as err:  # noqa: BLE001 - handed to the consumer, raised there
                item = err
            with self.cond:
                self.done[i] = item
                self.cond.notify_all()
            if isinstance(item, BaseException):
                return

    def next(self) -> tuple[memoryview, mmap.mmap]:
        with self.cond:
            while self.taken not in self.done:
                self.cond.wait()
            item = self.done.pop(self.taken)
            self.taken += 1
        if isinstance(item, BaseException):
            raise item
        return item

    def release(self, view: memoryview, buf: mmap.mmap) -> None:
        view.release()
        with self.cond:
            self.free.append(buf)
            self.cond.notify_all()

    def close(self) -> None:
        with self.cond:
            self.stopped = True
            self.cond.notify_all()
        for t in self.threads:
            t.join()
        for item in self.done.values():
            if isinstance(item, tuple):
                item[0].release()
        for b in self.buffers:
            b.close()


def run_pass(pieces: Sequence[Piece], file_fd: int | None, name: str,
             device: DeviceReader | None, *, compare: bool, digest: bool,
             progress: Progress | None = None) -> list[PieceResult]:
    """Read every piece through the filesystem (if ``file_fd``) and from the device (if
    it has a place and ``device``), comparing them (``compare``) and hashing each side
    (``digest``). Stops after the first piece that differs: its result says where."""
    total = sum(p.length for p in pieces)
    chunk = device.chunk if device else CHUNK
    log.debug("%s: %d pieces, %d bytes, device %s", name, len(pieces), total,
              device.path if device else "-")
    fetch = _Prefetcher(device, pieces) if device is not None else None
    fbuf = mmap.mmap(-1, chunk) if file_fd is not None else None
    results: list[PieceResult] = []
    done = 0
    try:
        for piece in pieces:
            fh = hashlib.new(DIGEST) if digest and fbuf is not None else None
            dh = hashlib.new(DIGEST) if digest and fetch and piece.physical is not None \
                else None
            bad = None
            for off in range(0, piece.length, chunk):
                n = min(chunk, piece.length - off)
                fview = read_file_into(file_fd, fbuf, piece.logical + off, n, name) \
                    if file_fd is not None and fbuf is not None else None
                dview, dbuf = fetch.next() if fetch and piece.physical is not None \
                    else (None, None)
                try:
                    diff = _digest_and_compare(fview, dview, fh, dh, compare)
                finally:
                    if fview is not None:
                        fview.release()
                    if fetch and dview is not None and dbuf is not None:
                        fetch.release(dview, dbuf)
                done += n
                if progress is not None:
                    progress(done, total)
                if diff is not None:
                    bad = off + diff
                    break
            results.append(PieceResult(_hex(fh), _hex(dh), bad))
            if bad is not None:
                break
    finally:
        if fetch is not None:
            fetch.close()
        if fbuf is not None:
            fbuf.close()
    return results


def _digest_and_compare(fview: memoryview | None, dview: memoryview | None,
                        fh: hashlib._Hash | None, dh: hashlib._Hash | None,
                        compare: bool) -> int | None:
    """Hash each side of one chunk; the offset of its first difference, if compared."""
    if fh is not None and fview is not None:
        fh.update(fview)
    if dh is not None and dview is not None:
        dh.update(dview)
    if compare and fview is not None and dview is not None:
        return first_difference(fview, dview)
    return None


def _hex(h: hashlib._Hash | None) -> str | None:
    return h.hexdigest() if h is not None else None
