"""The proof of an extent map: verify, save and check it against the device's bytes, so a
map is kept only once proven and re-checked before it is trusted.

`verify` reads every mapped range from the block device and the same range through the
filesystem and compares them byte for byte. `save` does the same pass over the whole file,
hashing each segment, and writes the map only if every byte matched. `check` reads the
file and the saved device ranges again in one pass and says whether the map still holds:
unchanged, moved (a defragmenter or a rewrite put bytes elsewhere, or the device changed),
or content changed (the file's own bytes are not what was saved).
"""

from __future__ import annotations

import logging
import os
import socket
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

from ..base.errors import DataError, ExistsError, NotFoundError
from ..files import infile, outfile
from . import mapfile
from .device import BlockDevice, fs_uuid, machine_id
from .fiemap import open_regular
from .layout import Layout, layout_of
from .mapfile import MapFile, Moved, SavedDevice, SavedSegment
from .stream import DeviceReader, Piece, PieceResult, Progress, run_pass

log = logging.getLogger(__name__)

# Exit statuses of results (not errors), cmp/diff style; errors keep errors.py's.
SAME, MOVED, CONTENT_CHANGED = 0, 1, 2
MISMATCH = 1


@dataclass(frozen=True)
class Mismatch:
    """The first byte where the device and the file disagree."""

    file_offset: int
    device_offset: int  # on the partition (layout.device.path)
    device: BlockDevice

    def describe(self) -> str:
        disk = (f", byte {self.device.start + self.device_offset} of {self.device.disk}"
                if self.device.is_partition else "")
        return (f"file byte {self.file_offset} differs from byte {self.device_offset} of "
                f"{self.device.path}{disk}")


@dataclass(frozen=True)
class VerifyResult:
    layout: Layout
    checked_bytes: int
    checked_runs: int
    skipped: dict[str, int]  # bytes not compared, by kind (hole, unwritten, unmappable)
    seconds: float
    mismatch: Mismatch | None

    @property
    def status(self) -> int:
        return MISMATCH if self.mismatch else SAME


def _mismatch(lay: Layout, pieces: list[Piece], results: list[PieceResult]
              ) -> Mismatch | None:
    for piece, res in zip(pieces, results, strict=False):
        if res.mismatch_at is not None and piece.physical is not None:
            return Mismatch(piece.logical + res.mismatch_at, piece.physical + res.mismatch_at,
                            lay.device)
    return None


def _unchanged_while_read(before: Layout) -> None:
    """A file written while we read it proves nothing: refuse the result."""
    after = layout_of(before.file.path, sync=False)
    if (after.file != before.file or after.runs != before.runs):
        raise DataError(f"{before.file.path} changed while it was read",
                        "run it again when nothing writes to the file")


def verify(path: str | os.PathLike[str], *, include_unwritten: bool = False,
           progress: Progress | None = None) -> VerifyResult:
    """Compare every data run's device bytes with the file's bytes (see the module doc).
    ``include_unwritten`` compares unwritten space too: it shows what a map that treated
    it as data would serve (usually not the zeros the filesystem reads)."""
    lay = layout_of(path)
    kinds = {"data", "unwritten"} if include_unwritten else {"data"}
    pieces = [Piece(s.logical, s.length, s.run.physical) for s in lay.segments
              if s.run is not None and s.kind in kinds]
    skipped: dict[str, int] = {}
    for s in lay.segments:
        if s.kind not in kinds:
            skipped[s.kind] = skipped.get(s.kind, 0) + s.length
    t0 = time.monotonic()
    with open_regular(lay.file.path) as fd, \
            DeviceReader(lay.device.path, lay.device.logical_block_size) as dev:
        results = run_pass(pieces, fd, lay.file.path, dev, compare=True, digest=False,
                           progress=progress)
    seconds = time.monotonic() - t0
    _unchanged_while_read(lay)
    bad = _mismatch(lay, pieces, results)
    checked = sum(p.length for p in pieces[:len(results)])
    return VerifyResult(lay, checked, len(results), skipped, seconds, bad)


# --- save -------------------------------------------------------------------------------


@dataclass(frozen=True)
class SaveResult:
    layout: Layout
    output: str
    mismatch: Mismatch | None
    seconds: float

    @property
    def status(self) -> int:
        return MISMATCH if self.mismatch else SAME


def _saved_device(dev: BlockDevice) -> SavedDevice:
    return SavedDevice(dev.path, dev.major_minor, dev.disk, dev.start, dev.size, dev.fstype,
                       fs_uuid(dev.path))


def save(path: str | os.PathLike[str], output: str | os.PathLike[str], *,
         force: bool = False, progress: Progress | None = None) -> SaveResult:
    """Prove the map byte for byte, then write it to ``output`` (atomically)."""
    out = os.path.abspath(os.fspath(output))
    if os.path.exists(out) and not force:
        raise ExistsError(f"{out} exists", "give --force to replace it")
    outfile.check_target(out)  # before the long read, not after it
    lay = layout_of(path)
    pieces = [Piece(s.logical, s.length, s.run.physical if s.kind == "data" else None)
              for s in lay.segments]
    t0 = time.monotonic()
    with open_regular(lay.file.path) as fd, \
            DeviceReader(lay.device.path, lay.device.logical_block_size) as dev:
        results = run_pass(pieces, fd, lay.file.path, dev, compare=True, digest=True,
                           progress=progress)
    seconds = time.monotonic() - t0
    _unchanged_while_read(lay)
    bad = _mismatch(lay, pieces, results)
    if bad is not None:
        return SaveResult(lay, out, bad, seconds)
    digests = [r.file_digest or "" for r in results]
    m = MapFile(created=datetime.now(UTC).isoformat(timespec="seconds"),
                host=socket.gethostname(), machine_id=machine_id(), path=lay.file.path,
                inode=lay.file.inode, size=lay.file.size, mtime_ns=lay.file.mtime_ns,
                device=_saved_device(lay.device),
                segments=mapfile.saved_segments(lay.segments, digests))
    with outfile.replaced(out, perms=outfile.PRIVATE) as f:  # whole or not at all
        f.write(mapfile.dumps(m))
    log.debug("saved %d segments of %s to %s", len(m.segments), m.path, out)
    return SaveResult(lay, out, None, seconds)


# --- check ------------------------------------------------------------------------------


@dataclass
class CheckResult:
    saved: MapFile
    layout: Layout | None
    state: str = "unchanged"  # unchanged | moved | content changed
    moved: list[Moved] = field(default_factory=list)
    changed: list[SavedSegment] = field(default_factory=list)  # file bytes differ
    stale: list[SavedSegment] = field(default_factory=list)  # device bytes differ
    notes: list[str] = field(default_factory=list)
    read: bool = True  # False with quick: nothing was read, only FIEMAP compared

    @property
    def status(self) -> int:
        return {"unchanged": SAME, "moved": MOVED}.get(self.state, CONTENT_CHANGED)


MAX_MAP_BYTES = 64 << 20  # far beyond any real map: a bigger file is not one


def load(map_path: str | os.PathLike[str]) -> MapFile:
    name = os.fspath(map_path)
    return mapfile.loads(infile.read_text(name, "map file", MAX_MAP_BYTES), name)


def same_machine(saved: MapFile, source: str) -> None:
    here = machine_id()
    if saved.machine_id and here and saved.machine_id != here:
        raise NotFoundError(f"{source} was saved on another machine ({saved.host}): its file "
                            "and device are not here", "save a map on this machine")


def check(map_path: str | os.PathLike[str], *, quick: bool = False,
          progress: Progress | None = None) -> CheckResult:
    """Is the file still exactly where ``map_path`` says, with the same bytes?"""
    saved = load(map_path)
    same_machine(saved, os.fspath(map_path))
    if not os.path.exists(saved.path):
        raise NotFoundError(f"{saved.path}, the file mapped in {os.fspath(map_path)}, no "
                            "longer exists")
    lay = layout_of(saved.path)
    res = CheckResult(saved, lay, read=not quick)
    same_device = _compare_identity(saved, lay, res)
    res.moved = mapfile.moved(saved.segments, lay.segments) if lay.file.size == saved.size \
        else []
    if quick:
        if lay.file.size != saved.size or lay.file.mtime_ns != saved.mtime_ns:
            res.state = "content changed"
        elif res.moved or not same_device:
            res.state = "moved"
        return res
    if lay.file.size != saved.size:
        res.state = "content changed"
        return res
    _read_and_compare(saved, lay, same_device, res, progress)
    log.debug("check %s: %d moved, %d changed, %d stale", saved.path, len(res.moved),
              len(res.changed), len(res.stale))
    if res.changed:
        res.state = "content changed"
    elif res.moved or res.stale or not same_device:
        res.state = "moved"
    return res


def _compare_identity(saved: MapFile, lay: Layout, res: CheckResult) -> bool:
    """Notes on what differs besides the runs; True if the file is on the saved device."""
    if lay.file.inode != saved.inode:
        res.notes.append(f"the path now names another inode ({saved.inode} -> "
                         f"{lay.file.inode}): the file was replaced")
    if lay.file.size != saved.size:
        res.notes.append(f"size {saved.size} -> {lay.file.size}")
    if lay.file.mtime_ns != saved.mtime_ns:
        res.notes.append("modification time changed")
    same = lay.device.major_minor == saved.device.major_minor \
        and lay.device.path == saved.device.path
    if same and saved.device.uuid:
        now = fs_uuid(lay.device.path)  # None where blkid cannot tell: not a difference
        same = now is None or now == saved.device.uuid
    if not same:
        res.notes.append(f"device {saved.device.path} ({saved.device.major_minor}) -> "
                         f"{lay.device.path} ({lay.device.major_minor})")
    return same


def _read_and_compare(saved: MapFile, lay: Layout, same_device: bool, res: CheckResult,
                      progress: Progress | None) -> None:
    """One pass: the file's bytes per saved segment, and (on the same device) the saved
    device ranges of its data segments, each hashed and compared with the map."""
    pieces = [Piece(s.logical, s.length, s.physical if same_device and s.kind == "data"
                    else None) for s in saved.segments]
    with open_regular(lay.file.path) as fd, \
            DeviceReader(lay.device.path, lay.device.logical_block_size) as dev:
        results = run_pass(pieces, fd, lay.file.path, dev if same_device else None,
                           compare=False, digest=True, progress=progress)
    _unchanged_while_read(lay)
    for seg, r in zip(saved.segments, results, strict=True):
        if r.file_digest != seg.sha256:
            res.changed.append(seg)
        elif r.device_digest is not None and r.device_digest != seg.sha256:
            res.stale.append(seg)
