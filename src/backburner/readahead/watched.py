"""The filesystems a recording watches: those holding the given paths, or every filesystem
on a block device; each with the device whose page cache holds its metadata and the disk
whose read-ahead is lowered while recording."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass

from ..base.errors import BackburnerError, NotFoundError
from ..extents import device_of
from ..kernel import procfs

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Watched:
    """A filesystem we mark, the device it is on (whose page cache holds its metadata), and
    the disk whose read-ahead we lower while recording."""

    mountpoint: str
    dev: int
    disk: str
    device: str = ""

    @property
    def read_ahead_path(self) -> str:
        return f"/sys/block/{os.path.basename(self.disk)}/queue/read_ahead_kb"


def watched_filesystems(paths: Sequence[str] = ()) -> list[Watched]:
    """The filesystems holding `paths`, or every block-device filesystem mounted here."""
    if paths:
        found = []
        for p in paths:
            try:
                st = os.stat(p)
            except FileNotFoundError:
                raise NotFoundError(f"{p}: no such file or directory") from None
            dev = device_of(p, st.st_dev)
            found.append(Watched(dev.mountpoint or p, st.st_dev, dev.disk, dev.path))
        return _unique(found)
    found = []
    for m in procfs.mounts():
        if os.major(m.devno) == 0 and m.fstype != "btrfs":
            continue  # proc, tmpfs, FUSE...: nothing on a block device to prefetch
        try:
            st = os.stat(m.mountpoint)
            dev = device_of(m.mountpoint)
            found.append(Watched(m.mountpoint, st.st_dev, dev.disk, dev.path))
        except (OSError, BackburnerError) as err:
            log.debug("not watching %s: %s", m.mountpoint, err)
    return _unique(found)


def _unique(found: list[Watched]) -> list[Watched]:
    seen: dict[int, Watched] = {}
    for w in found:
        seen.setdefault(w.dev, w)
    return list(seen.values())

