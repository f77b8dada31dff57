"""What a cold start asks of the drive on an ext4 image, and how long the drive takes.

`layout check` predicts, from a pack and an image, the device reads a cold start makes,
in order: for each thing the start did (the pack's steps, recorded with ``--lookups``;
without them, its files in access order, each file's ranges ascending), the metadata it
needs first and was not read yet (each path component's parent directory, all its
blocks; each component's inode, as the kernel's aligned inode-table read-ahead window;
a file's extent-tree blocks where it has more than four extents) and then its data. A
listed directory reads all its blocks; a name looked up in vain reads the directory it
was looked for in; a stat reads the inode. Each read starts after the start's own time
since the step before (the step's gap, measured on the recording's fast device), and
the reads are served one after the other by the same timing model a slowdisk plays
(`slowdisk.model.Disk`, pure), which says where the drive seeks, where it reads from
its own cache, and when the last read is done: the predicted time of the start.

`reads` looks at the image (FIEMAP of the mounted image's files and directories, its
geometry and inodes read from the image file); `timed` is pure.
"""

from __future__ import annotations

import logging
import os
import stat
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field

from ..base.errors import BackburnerError
from ..extents import fiemap
from ..extents.runs import UNMAPPABLE
from ..slowdisk.drive import Profile
from ..slowdisk.model import Disk
from . import ext4meta
from .pack import LISTED, MISSED, Pack, Step

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Read:
    """One predicted device read: `what` is data, dir, itable or tree."""

    offset: int
    length: int
    what: str
    think_s: float = 0.0  # the start's own time before it (0 within a step)


@dataclass
class Prediction:
    reads: list[Read] = field(default_factory=list)
    itable_blocks: int = 0
    windows: int = 0  # inode-table reads
    dir_blocks: int = 0
    tree_blocks: int = 0
    missing: int = 0  # lookups and files not found in the image
    think_s: float = 0.0  # the start's own time between its steps, in all


@dataclass(frozen=True)
class Timed:
    """What the drive did with the predicted reads."""

    profile: str
    requests: int
    seeks: int
    seconds: float  # when the last read was done: the start's predicted wall time
    busy_s: float  # the drive's own time


def _relative(path: bytes, root: bytes) -> bytes | None:
    if root == b"/":
        return path.lstrip(b"/")
    prefix = root.rstrip(b"/") + b"/"
    if path == root.rstrip(b"/"):
        return b""
    return path[len(prefix):] if path.startswith(prefix) else None


class _Walker:
    """The reads of one start, with what is cached so far."""

    def __init__(self, base: bytes, image_fd: int, geo: ext4meta.Geometry) -> None:
        self.base = base
        self.fd = image_fd
        self.geo = geo
        self.out = Prediction()
        self.cached: set[int] = set()  # device blocks read (metadata)
        self.data: dict[int, set[int]] = {}  # inode -> file pages read
        self.resolved: set[bytes] = {b""}  # paths whose inode is cached (the root's is)
        self.listed: set[bytes] = set()  # directories whose blocks are all read
        self.think = 0.0
        self.trees: dict[int, set[int]] = {}

    def _emit(self, offset: int, length: int, what: str) -> None:
        self.out.reads.append(Read(offset, length, what, self.think))
        self.think = 0.0

    def _blocks(self, blocks: list[int], what: str) -> int:
        """Read the blocks not cached yet, each contiguous run as one read."""
        new = [b for b in blocks if b not in self.cached]
        self.cached.update(new)
        run: list[int] = []
        for b in new:
            if run and b != run[-1] + 1:
                self._emit(run[0] * self.geo.block, len(run) * self.geo.block, what)
                run = []
            run.append(b)
        if run:
            self._emit(run[0] * self.geo.block, len(run) * self.geo.block, what)
        return len(new)

    def _dir_blocks(self, rel: bytes) -> None:
        if rel in self.listed:
            return
        self.listed.add(rel)
        path = os.path.join(self.base, rel) if rel else self.base
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            blocks = [b for e in fiemap(fd, sync=False) if not e.flags & UNMAPPABLE
                      for b in range(e.physical // self.geo.block,
                                     (e.physical + e.length) // self.geo.block)]
        finally:
            os.close(fd)
        self.out.dir_blocks += self._blocks(blocks, "dir")

    def _inode(self, ino: int) -> None:
        if self.geo.inode_block(ino) in self.cached:
            return
        window = list(self.geo.window(ino))
        got = self._blocks(window, "itable")
        if got:
            self.out.windows += 1
            self.out.itable_blocks += got

    def resolve(self, rel: bytes) -> os.stat_result | None:
        """Look `rel` up from the root: each parent's blocks and each component's inode;
        its lstat, or None where a component is missing (its parent was searched)."""
        parts = [p for p in rel.split(b"/") if p]
        st = None
        for k in range(len(parts)):
            here = b"/".join(parts[:k + 1])
            try:
                st = os.lstat(os.path.join(self.base, here))
            except OSError:
                self._dir_blocks(b"/".join(parts[:k]))
                return None
            if here not in self.resolved:
                self._dir_blocks(b"/".join(parts[:k]))
                self._inode(st.st_ino)
                self.resolved.add(here)
            if stat.S_ISLNK(st.st_mode) and k + 1 < len(parts):
                return None  # a link on the way: followed wherever it points, not here
        return st if parts else os.lstat(self.base)

    def listed_dir(self, rel: bytes) -> None:
        st = self.resolve(rel)
        if st is not None and stat.S_ISDIR(st.st_mode):
            self._dir_blocks(rel)

    def file_pages(self, rel: bytes, first: int, pages: int, page: int) -> None:
        st = self.resolve(rel)
        if st is None or not stat.S_ISREG(st.st_mode):
            self.out.missing += 1
            return
        done = self.data.setdefault(st.st_ino, set())
        want = [p for p in range(first, first + pages) if p not in done
                and p * page < st.st_size]
        if not want:
            return
        done.update(want)
        path = os.path.join(self.base, rel)
        lo, hi = want[0] * page, (want[-1] + 1) * page
        self._tree(st.st_ino, [(lo // self.geo.block, -(-(hi - lo) // self.geo.block))])
        for off, ln in _runs_of(path, lo, min(hi, -(-st.st_size // page) * page), want, page):
            self._emit(off, ln, "data")

    def _tree(self, ino: int, wanted: list[tuple[int, int]]) -> None:
        try:
            inode = os.pread(self.fd, self.geo.inode_size, self.geo.inode_at(ino))
            blocks = ext4meta.tree_blocks(
                inode, lambda b: os.pread(self.fd, self.geo.block, b * self.geo.block), wanted)
        except (OSError, struct.error, IndexError) as err:
            log.debug("inode %d: no extent tree: %s", ino, err)
            return
        self.out.tree_blocks += self._blocks(blocks, "tree")


def _runs_of(path: bytes, lo: int, hi: int, want: list[int], page: int
             ) -> Iterator[tuple[int, int]]:
    """Where the wanted pages of [lo, hi) lie on the device, as contiguous runs."""
    wanted = set(want)
    try:
        extents = fiemap(os.fsdecode(path), sync=False, start=lo, length=hi - lo)
    except (BackburnerError, OSError) as err:
        log.debug("%r: %s", path, err)
        return
    places: list[int] = []
    for e in extents:
        if e.flags & UNMAPPABLE:
            continue
        for p in range(max(lo, e.logical) // page, min(hi, e.logical + e.length) // page):
            if p in wanted:
                places.append(e.physical + p * page - e.logical)
    start = prev = None
    for at in places:
        if start is not None and at == prev + page:
            prev = at
            continue
        if start is not None:
            yield start, prev + page - start
        start = prev = at
    if start is not None:
        yield start, prev + page - start


def _steps(pack: Pack) -> list[Step]:
    """The pack's steps, or, for a pack without them, its files in access order."""
    if pack.steps:
        return list(pack.steps)
    out = []
    for i, e in enumerate(pack.entries):
        if e.device:
            continue
        for off, ln in e.ranges:
            out.append(Step(i, off // pack.page_size, -(-ln // pack.page_size)))
    return out


def reads(base: bytes, pack_root: bytes, pack: Pack, image: str) -> Prediction | None:
    """The reads a cold start of `pack` makes on the ext4 `image` mounted at `base`
    (None when it is not an ext4 or cannot be read). The root directory's inode is
    taken as cached (a mounted filesystem's is), its blocks not."""
    try:
        geo = ext4meta.read(image)
        fd = os.open(image, os.O_RDONLY | os.O_CLOEXEC)
    except (OSError, ValueError, struct.error) as err:
        log.debug("no prediction for %s: %s", image, err)
        return None
    walker = _Walker(base, fd, geo)
    try:
        for st in _steps(pack):
            walker.think += st.gap_us / 1e6
            walker.out.think_s += st.gap_us / 1e6
            if st.lookup is not None:
                lk = pack.lookups[st.lookup]
                rel = _relative(lk.path, pack_root)
                if rel is None:
                    continue
                if lk.kind == LISTED:
                    walker.listed_dir(rel)
                elif walker.resolve(rel) is None and lk.kind != MISSED:
                    walker.out.missing += 1
                continue
            e = pack.entries[st.what]
            rel = None if e.device else _relative(e.path, pack_root)
            if rel is not None:
                walker.file_pages(rel, st.first, st.pages, pack.page_size)
    except (BackburnerError, OSError, IndexError, struct.error) as err:
        log.debug("no prediction for %r: %s", base, err)
        return None
    finally:
        os.close(fd)
    return walker.out


def timed(pred: Prediction, profile: Profile, capacity: int) -> Timed:
    """The predicted reads served in order by a drive of `profile` holding an image of
    `capacity` bytes, each arriving the start's own time after the one before is done."""
    disk = Disk(profile, capacity)
    now = 0.0
    for r in pred.reads:
        _, now = disk.service(r.offset, r.length, False, now + r.think_s)
    c = disk.counters
    return Timed(profile.name, c.requests, c.seeks, now, c.busy_s)


__all__ = ["Prediction", "Read", "Timed", "reads", "timed"]
