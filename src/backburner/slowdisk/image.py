"""The backing image of a slowdisk mount: read and written with O_DIRECT where the file
system allows it (aligned requests), through a second, buffered descriptor otherwise, so
no page cache sits between the modelled disk and the bytes it serves."""

from __future__ import annotations

import mmap
import os
import threading

from ..base.errors import NotFoundError, SystemStateError


class ImageFile:
    """The backing image: O_DIRECT for aligned requests where possible, buffered otherwise."""

    def __init__(self, path: str, writable: bool, identity: str | None = None) -> None:
        self.path = path
        acc = os.O_RDWR if writable else os.O_RDONLY
        try:
            self.fd = os.open(path, acc | os.O_CLOEXEC | os.O_NOFOLLOW)
        except FileNotFoundError:
            raise NotFoundError(f"image {path!r} does not exist") from None
        except OSError as e:
            raise SystemStateError(f"cannot open image {path!r}: {e.strerror}") from None
        st = os.fstat(self.fd)
        if identity is not None and f"{st.st_dev}:{st.st_ino}" != identity:
            os.close(self.fd)
            raise SystemStateError(f"image {path!r} was replaced after it was checked",
                                   "nothing was served; check who can write its directory")
        self.size = os.lseek(self.fd, 0, os.SEEK_END)
        self.dfd: int | None = None
        self.align = 0
        self._local = threading.local()
        try:
            self.dfd = os.open(path, acc | os.O_CLOEXEC | os.O_DIRECT | os.O_NOFOLLOW)
        except OSError:
            return
        if os.fstat(self.dfd)[1:3] != st[1:3]:  # (ino, dev): the same file as fd
            os.close(self.dfd)
            self.dfd = None
            return
        for align in (512, 4096):
            if self.size < align:
                break
            try:
                with self._aligned(align) as mv:
                    os.preadv(self.dfd, [mv], 0)
            except OSError:
                continue
            self.align = align
            return
        os.close(self.dfd)
        self.dfd = None

    class _View:
        def __init__(self, buf: mmap.mmap, n: int) -> None:
            self.mv = memoryview(buf)[:n]

        def __enter__(self) -> memoryview:
            return self.mv

        def __exit__(self, *exc: object) -> None:
            self.mv.release()

    def _aligned(self, n: int) -> ImageFile._View:
        """A page-aligned per-thread buffer of at least ``n`` bytes."""
        buf = getattr(self._local, "buf", None)
        if buf is None or len(buf) < n:
            if buf is not None:
                buf.close()
            size = max(n, 1 << 20)
            size = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE * mmap.PAGESIZE
            buf = self._local.buf = mmap.mmap(-1, size)
        return ImageFile._View(buf, n)

    def _direct_ok(self, offset: int, n: int) -> bool:
        return self.dfd is not None and offset % self.align == 0 and n % self.align == 0

    def read(self, offset: int, n: int) -> bytes:
        if self._direct_ok(offset, n):
            assert self.dfd is not None
            with self._aligned(n) as mv:
                got = 0
                while got < n:
                    k = os.preadv(self.dfd, [mv[got:]], offset + got)
                    if k <= 0:
                        break
                    got += k
                return bytes(mv[:got])
        chunks = []
        got = 0
        while got < n:
            chunk = os.pread(self.fd, n - got, offset + got)
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def write(self, offset: int, data: bytes) -> int:
        n = len(data)
        if self._direct_ok(offset, n):
            assert self.dfd is not None
            with self._aligned(n) as mv:
                mv[:] = data
                done = 0
                while done < n:
                    done += os.pwritev(self.dfd, [mv[done:]], offset + done)
            return n
        done = 0
        view = memoryview(data)
        while done < n:
            done += os.pwrite(self.fd, view[done:], offset + done)
        return n

    def fsync(self) -> None:
        os.fsync(self.fd)

    def close(self) -> None:
        for fd in (self.fd, self.dfd):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.dfd = None
