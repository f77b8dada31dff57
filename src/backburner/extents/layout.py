"""A file's layout: its identity, its device, and its runs in device bytes.

This is where the kernel calls meet the pure core: open the file once, FIEMAP it (synced),
find its block device, translate btrfs addresses, merge. Everything `show`, `map`,
`verify`, `save` and `check` do starts from a `Layout`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

from . import btrfs
from .device import BlockDevice, device_of
from .fiemap import fiemap_fd, open_regular
from .runs import Run, Segment, Totals, merge, segments, select, totals


@dataclass(frozen=True)
class FileId:
    """What tells this file from another one at the same path, or the same one changed."""

    path: str
    st_dev: int
    inode: int
    size: int
    mtime_ns: int


@dataclass(frozen=True)
class Layout:
    file: FileId
    device: BlockDevice
    extents: int  # FIEMAP records before merging
    runs: tuple[Run, ...]

    @cached_property
    def segments(self) -> list[Segment]:
        return segments(self.runs, self.file.size)

    @cached_property
    def totals(self) -> Totals:
        return totals(self.runs, self.file.size, self.extents, self.segments)


def layout_of(path: str | os.PathLike[str], *, sync: bool = True) -> Layout:
    """The layout of the regular file at ``path``, synced first unless ``sync`` is False."""
    name = os.path.abspath(os.fspath(path))
    with open_regular(name) as fd:
        extents = fiemap_fd(fd, name, sync=sync)
        st = os.fstat(fd)  # after the sync: the size and mtime the extents belong to
        device = device_of(name, st.st_dev)
        if device.fstype == "btrfs":
            extents = btrfs.translate(extents, btrfs.chunks(fd))
    ident = FileId(name, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    return Layout(ident, device, len(extents), tuple(merge(extents, st.st_size)))


def physical_runs(path: str | os.PathLike[str],
                  ranges: Iterable[tuple[int, int]] | None = None, *,
                  sync: bool = False) -> list[Run]:
    """Where on its device each (offset, length) byte range of the file lies, in the
    order given (all of the file when ``ranges`` is None); holes are left out.

    Not synced by default: readahead wants where the data is now and must not write back
    someone's dirty pages; ranges still in delayed allocation come back flagged DELALLOC.
    """
    lay = layout_of(path, sync=sync)
    return list(lay.runs) if ranges is None else select(lay.runs, ranges)
