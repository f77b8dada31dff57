"""A saved map's table, proven true before anyone loads it.

A dm-linear table is loaded where the filesystem that holds the file is *not* mounted
(a mounted filesystem claims its device, and the kernel refuses the table): from an
initramfs, another system, or beside a FUSE mount. There, FIEMAP cannot be asked again,
so the map saved earlier (`save`) is what the table is made from — and a map the file has
since left (a defragmenter, a rewrite) would serve other bytes, silently. So the saved map
is proven first: where the file is reachable, by `check` (its extents now, and the bytes);
where it is not, by reading the saved device ranges and comparing them with the saved
digests, on the same device (node, numbers, size, and the filesystem UUID, which must be
found: there the map's machine is not checked, as an initramfs or a rescue system of the
same machine may not carry its machine-id). Anything short of "unchanged"
is refused, and no table is printed.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass

from ..base.errors import DataError, NotFoundError
from . import proof
from .device import BlockDevice, block_device, fs_uuid
from .mapfile import MapFile
from .runs import Run
from .stream import DeviceReader, Piece, Progress, run_pass


@dataclass(frozen=True)
class Proven:
    """A saved map shown to hold now: its file's runs on ``device``, and how it was shown."""

    saved: MapFile
    device: BlockDevice
    runs: tuple[Run, ...]
    how: str


def prove(map_path: str | os.PathLike[str], progress: Progress | None = None) -> Proven:
    """The saved map's runs, if the file is still exactly there; DataError if not."""
    name = os.fspath(map_path)
    saved = proof.load(name)
    runs = tuple(Run(s.logical, s.physical, s.length, s.flags) for s in saved.segments
                 if s.physical is not None)
    if os.path.exists(saved.path):
        proof.same_machine(saved, name)  # the path names this machine's file
        res = proof.check(name, progress=progress)
        if res.state != "unchanged":
            first = (res.moved[0].describe() if res.moved
                     else "; ".join(res.notes) or f"{len(res.stale + res.changed)} segments")
            raise DataError(f"{name}: {saved.path} {res.state} since the map was saved "
                            f"({first}): its table would serve other bytes",
                            "save a new map (extents save)")
        assert res.layout is not None
        return Proven(saved, res.layout.device, runs, "checked against the file (check)")
    dev = _saved_device(saved, name)
    _device_bytes_match(saved, dev, name, progress)
    return Proven(saved, dev, runs, f"{saved.path} is not reachable here; the device's "
                  "bytes at the map match the saved digests")


def _saved_device(saved: MapFile, name: str) -> BlockDevice:
    """The saved device, if the same node still names the same device and filesystem."""
    want = saved.device
    try:
        st = os.stat(want.path)
    except OSError:
        raise NotFoundError(f"{want.path}, the device of {name}, does not exist") from None
    rdev = f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"
    if not stat.S_ISBLK(st.st_mode) or rdev != want.major_minor:
        raise DataError(f"{name}: {want.path} is not the saved device {want.major_minor} "
                        f"(now {rdev if stat.S_ISBLK(st.st_mode) else 'not a block device'})",
                        "save the map again where the device has this name")
    # unmounted, nothing else says which filesystem this is: its UUID must be the saved
    # one (a device holding none, or one blkid cannot read, is not proof of anything)
    now = fs_uuid(want.path)
    if want.uuid is None or now != want.uuid:
        raise DataError(f"{name}: {want.path} does not hold the saved filesystem (UUID "
                        f"{now or 'none found'}, saved {want.uuid or 'none'})",
                        "prove the map where the file is mounted (extents check)")
    dev = block_device(st.st_rdev, want.fstype)
    if dev.size < want.size:
        raise DataError(f"{name}: {want.path} is {dev.size} bytes, the saved device "
                        f"{want.size}")
    return dev


def _device_bytes_match(saved: MapFile, dev: BlockDevice, name: str,
                        progress: Progress | None) -> None:
    data = saved.data_segments()
    pieces = [Piece(s.logical, s.length, s.physical) for s in data]
    with DeviceReader(dev.path, dev.logical_block_size) as reader:
        results = run_pass(pieces, None, name, reader, compare=False, digest=True,
                           progress=progress)
    bad = [s for s, r in zip(data, results, strict=True) if r.device_digest != s.sha256]
    if bad:
        raise DataError(f"{name}: the device's bytes differ from the saved file's in "
                        f"{len(bad)} of {len(data)} runs (first at file byte "
                        f"{bad[0].logical}): the file moved or changed since the map was "
                        "saved, and its table would serve other bytes",
                        "save a new map where the filesystem is mounted (extents save)")
