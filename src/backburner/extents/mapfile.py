"""The saved map: format, validation and comparison with a file's layout now (pure).

A map file is JSON (docs/reference/extents-map.md has the format): the file's identity
(machine, path, inode, size, mtime), its device (node, numbers, filesystem UUID, partition
start), and its segments — every byte range of ``[0, size)`` with its kind, device offset,
flags and the SHA-256 of its bytes as the filesystem returned them (the same bytes the
device held, as `save` proved). A ``map_sha256`` over everything else catches a corrupted
file, which is refused rather than reported as a moved one.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ..base.errors import DataError
from .runs import Segment, flag_names, parse_flags

FORMAT = "backburner-extents-map"
VERSION = 1
KINDS = ("data", "unwritten", "unmappable", "hole")
_HEX64 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class SavedSegment:
    logical: int
    length: int
    kind: str  # data | unwritten | unmappable | hole
    physical: int | None  # None for a hole
    flags: int
    sha256: str

    @property
    def end(self) -> int:
        return self.logical + self.length


@dataclass(frozen=True)
class SavedDevice:
    path: str
    major_minor: str
    disk: str
    start: int
    size: int
    fstype: str
    uuid: str | None


@dataclass(frozen=True)
class MapFile:
    created: str
    host: str
    machine_id: str | None
    path: str
    inode: int
    size: int
    mtime_ns: int
    device: SavedDevice
    segments: tuple[SavedSegment, ...]

    def data_segments(self) -> list[SavedSegment]:
        return [s for s in self.segments if s.kind == "data"]


def _body(m: MapFile) -> dict[str, Any]:
    return {
        "format": FORMAT, "version": VERSION, "created": m.created, "host": m.host,
        "machine_id": m.machine_id,
        "file": {"path": m.path, "inode": m.inode, "size": m.size, "mtime_ns": m.mtime_ns},
        "device": asdict(m.device),
        "segments": [{"logical": s.logical, "length": s.length, "kind": s.kind,
                      "physical": s.physical, "flags": flag_names(s.flags),
                      "sha256": s.sha256} for s in m.segments],
    }


def _self_digest(body: dict[str, Any]) -> str:
    canon = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canon.encode()).hexdigest()


def dumps(m: MapFile) -> str:
    body = _body(m)
    return json.dumps({**body, "map_sha256": _self_digest(body)}, indent=1) + "\n"


def loads(text: str, source: str) -> MapFile:
    """Parse and check a map file; DataError (one line, naming ``source``) otherwise."""
    try:
        doc = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise DataError(f"{source} is not a map file: {err}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise DataError(f"{source} is not a backburner extents map",
                        "make one with `backburner extents save FILE -o MAP`")
    version = doc.get("version")
    if not isinstance(version, int) or version > VERSION:
        raise DataError(f"{source} is map format version {version!r}; this backburner reads "
                        f"version {VERSION}", "check it with the version that saved it")
    claimed = doc.pop("map_sha256", None)
    if claimed != _self_digest(doc):
        raise DataError(f"{source} is corrupted: its contents do not match its checksum",
                        "save the map again")
    try:
        m = _parse(doc)
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise DataError(f"{source} is malformed: {type(err).__name__}: {err}") from None
    _check_cover(m, source)
    return m


def _int(x: Any, *, low: int = 0) -> int:
    if not isinstance(x, int) or isinstance(x, bool) or x < low:
        raise ValueError(f"{x!r} is not a whole number >= {low}")
    return x


def _str(x: Any, *, optional: bool = False) -> Any:
    if (x is None and optional) or isinstance(x, str):
        return x
    raise ValueError(f"{x!r} is not text")


def _segment(d: dict[str, Any]) -> SavedSegment:
    kind = _str(d["kind"])
    if kind not in KINDS:
        raise ValueError(f"unknown segment kind {kind!r}")
    sha = _str(d["sha256"])
    if not _HEX64.fullmatch(sha):
        raise ValueError(f"{sha!r} is not a SHA-256")
    physical = None if kind == "hole" else _int(d["physical"])
    if not isinstance(d["flags"], list):
        raise ValueError("flags must be a list")
    return SavedSegment(_int(d["logical"]), _int(d["length"], low=1), kind, physical,
                        parse_flags(_str(f) for f in d["flags"]), sha)


def _parse(doc: dict[str, Any]) -> MapFile:
    f, d = doc["file"], doc["device"]
    dev = SavedDevice(_str(d["path"]), _str(d["major_minor"]), _str(d["disk"]),
                      _int(d["start"]), _int(d["size"]), _str(d["fstype"]),
                      _str(d["uuid"], optional=True))
    return MapFile(_str(doc["created"]), _str(doc["host"]),
                   _str(doc["machine_id"], optional=True), _str(f["path"]),
                   _int(f["inode"]), _int(f["size"]), _int(f["mtime_ns"]), dev,
                   tuple(_segment(s) for s in doc["segments"]))


def _check_cover(m: MapFile, source: str) -> None:
    """Segments must cut ``[0, size)`` exactly: in order, no gap, no overlap."""
    pos = 0
    for s in m.segments:
        if s.logical != pos:
            raise DataError(f"{source} is malformed: a segment starts at file byte "
                            f"{s.logical}, expected {pos}")
        pos = s.end
    if pos != m.size:
        raise DataError(f"{source} is malformed: its segments cover {pos} bytes of {m.size}")


def saved_segments(segs: Sequence[Segment], digests: Sequence[str]) -> tuple[SavedSegment, ...]:
    out = []
    for seg, digest in zip(segs, digests, strict=True):
        run = seg.run
        out.append(SavedSegment(seg.logical, seg.length, seg.kind,
                                None if run is None else run.physical,
                                0 if run is None else run.flags, digest))
    return tuple(out)


@dataclass(frozen=True)
class Moved:
    """A saved segment whose bytes are now elsewhere: ``now`` are the current pieces of
    its range as (file offset, length, kind, device offset or None)."""

    saved: SavedSegment
    now: tuple[tuple[int, int, str, int | None], ...]

    def describe(self) -> str:
        s = self.saved
        was = "a hole" if s.physical is None else f"{s.kind} at device byte {s.physical}"
        now = ", ".join("a hole" if p is None else f"{k} at device byte {p}"
                        for _, _, k, p in self.now[:3])
        more = f" (+{len(self.now) - 3} more pieces)" if len(self.now) > 3 else ""
        return f"file bytes {s.logical}+{s.length}: was {was}, now {now}{more}"


def _in_place(s: SavedSegment, logical: int, _length: int, kind: str, physical: int | None
              ) -> bool:
    """A current piece of saved segment ``s`` is where ``s`` said its bytes were."""
    if kind != s.kind:
        return False
    if physical is None or s.physical is None:
        return physical is s.physical
    return physical == s.physical + logical - s.logical


def moved(saved: Sequence[SavedSegment], current: Sequence[Segment]) -> list[Moved]:
    """Saved segments some of whose bytes are not where they were, or not of the same
    kind now (however the current runs happen to be cut). Both sides must cover the same
    ``[0, size)``."""
    out = []
    j = 0
    for s in saved:
        while j < len(current) and current[j].end <= s.logical:
            j += 1
        pieces = []
        k = j
        while k < len(current) and current[k].logical < s.end:
            c = current[k]
            lo, hi = max(c.logical, s.logical), min(c.end, s.end)
            phys = None if c.run is None else c.run.physical + lo - c.run.logical
            pieces.append((lo, hi - lo, c.kind, phys))
            k += 1
        if not all(_in_place(s, *p) for p in pieces):
            out.append(Moved(s, tuple(pieces)))
    return out
