"""Reading a file's ranges through its filesystem and from its block device, side by side.

Device reads use O_DIRECT (the device's own bytes, not a page cache that may hold newer
ones) into page-aligned mmap buffers, aligned to the device's logical block size. A reader
thread fetches the next device chunks while the caller reads the same range through the
filesystem, compares and hashes: memory stays at a few chunks whatever the file's size,
and the device is kept busy. Threads, not processes: nothing here is spawned.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import mmap
import os
import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from ..errors import DataError, IOFailure, NotRootError
from ..units import MiB

log = logging.getLogger(__name__)

CHUNK = 8 * MiB
DEPTH = 3  # device chunks in flight or waiting
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

    def __init__(self, path: str, block: int, chunk: int = CHUNK) -> None:
        self.path = path
        self.block = max(block, 512)
        self.chunk = chunk
        try:
            self.fd = os.open(path, os.O_RDONLY | os.O_DIRECT | os.O_CLOEXEC)
        except PermissionError:
            raise NotRootError(f"reading the block device {path}") from None
        except FileNotFoundError:
            raise IOFailure(f"{path}: the block device is gone") from None

    def buffer(self) -> mmap.mmap:
        return mmap.mmap(-1, self.chunk + 2 * self.block)  # page-aligned, as O_DIRECT needs

    def read_into(self, buf: mmap.mmap, offset: int, length: int) -> memoryview:
        """Bytes ``[offset, offset+length)`` of the device (length <= chunk)."""
        lo = offset - offset % self.block
        hi = -(-(offset + length) // self.block) * self.block
        view = memoryview(buf)[:hi - lo]
        got = 0
        while got < hi - lo:
            try:
                n = os.preadv(self.fd, [view[got:]], lo + got)
            except OSError as err:
                raise IOFailure(f"{self.path}: reading at byte {lo + got}: "
                                f"{err.strerror}") from None
            if n == 0:
                raise IOFailure(f"{self.path}: ends at byte {lo + got}, before byte "
                                f"{offset + length} of the map")
            got += n
        return view[offset - lo:offset - lo + length]

    def close(self) -> None:
        os.close(self.fd)

    def __enter__(self) -> DeviceReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_file_into(fd: int, buf: mmap.mmap, offset: int, length: int, name: str
                   ) -> memoryview:
    view = memoryview(buf)[:length]
    got = 0
    while got < length:
        try:
            n = os.preadv(fd, [view[got:]], offset + got)
        except OSError as err:
            if err.errno == errno.EINTR:
                continue
            raise IOFailure(f"{name}: reading at byte {offset + got}: {err.strerror}") from None
        if n == 0:
            raise DataError(f"{name} ends at byte {offset + got}, inside its own map",
                            "the file changed while it was read: map it again")
        got += n
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


def _chunks(pieces: Sequence[Piece], chunk: int) -> Iterator[tuple[int, Piece, int, int]]:
    """(piece index, piece, offset in piece, length) for every chunk, in order."""
    for i, piece in enumerate(pieces):
        for off in range(0, piece.length, chunk):
            yield i, piece, off, min(chunk, piece.length - off)


class _Prefetcher:
    """Reads the device chunks of ``pieces`` ahead, in order, on a thread of its own."""

    def __init__(self, reader: DeviceReader, pieces: Sequence[Piece]) -> None:
        self.reader = reader
        self.free: queue.Queue[mmap.mmap] = queue.Queue()
        self.ready: queue.Queue[tuple[memoryview, mmap.mmap] | BaseException | None] = \
            queue.Queue()
        self.stop = threading.Event()
        self.buffers = [reader.buffer() for _ in range(DEPTH)]
        for b in self.buffers:
            self.free.put(b)
        self.work = [(p.physical + off, n) for _, p, off, n in _chunks(pieces, reader.chunk)
                     if p.physical is not None]
        self.thread = threading.Thread(target=self._run, name="extents-device-read",
                                       daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            for offset, length in self.work:
                buf = self.free.get()
                if self.stop.is_set():
                    return
                self.ready.put((self.reader.read_into(buf, offset, length), buf))
        except BaseException as err:  # noqa: BLE001 - handed to the consumer, raised there
            self.ready.put(err)

    def next(self) -> tuple[memoryview, mmap.mmap]:
        item = self.ready.get()
        if isinstance(item, BaseException):
            raise item
        assert item is not None
        return item

    def release(self, view: memoryview, buf: mmap.mmap) -> None:
        view.release()
        self.free.put(buf)

    def close(self) -> None:
        self.stop.set()
        for b in self.buffers:  # wake a reader waiting for a buffer
            self.free.put(b)
        self.thread.join()
        while not self.ready.empty():
            item = self.ready.get()
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
    done = 0
    results: list[PieceResult] = []
    fetch = _Prefetcher(device, pieces) if device is not None else None
    fbuf = mmap.mmap(-1, device.chunk if device else CHUNK) if file_fd is not None else None
    chunk = device.chunk if device else CHUNK
    try:
        current, fh, dh, bad = -1, None, None, None
        for i, piece, off, n in _chunks(pieces, chunk):
            if i != current:
                if current >= 0:
                    results.append(PieceResult(_hex(fh), _hex(dh), bad))
                current, bad = i, None
                fh = hashlib.new(DIGEST) if digest and file_fd is not None else None
                dh = hashlib.new(DIGEST) if digest and fetch and piece.physical is not None \
                    else None
            fview = read_file_into(file_fd, fbuf, piece.logical + off, n, name) \
                if file_fd is not None and fbuf is not None else None
            dview, dbuf = fetch.next() if fetch and piece.physical is not None else (None, None)
            try:
                if fh is not None and fview is not None:
                    fh.update(fview)
                if dh is not None and dview is not None:
                    dh.update(dview)
                if compare and fview is not None and dview is not None and bad is None:
                    diff = first_difference(fview, dview)
                    bad = None if diff is None else off + diff
            finally:
                if fview is not None:
                    fview.release()
                if fetch and dview is not None and dbuf is not None:
                    fetch.release(dview, dbuf)
            done += n
            if progress is not None:
                progress(done, total)
            if bad is not None:
                break
        if current >= 0:
            results.append(PieceResult(_hex(fh), _hex(dh), bad))
    finally:
        if fetch is not None:
            fetch.close()
        if fbuf is not None:
            fbuf.close()
    return results


def _hex(h: hashlib._Hash | None) -> str | None:
    return h.hexdigest() if h is not None else None
