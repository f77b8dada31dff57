"""Mappings of a file onto its device: a device-mapper table, losetup arguments (pure).

Both are only emitted when reading the mapping gives exactly the file's bytes. `problems`
names every range where it would not: allocated-but-unwritten space (the filesystem reads
zeros there, the device holds whatever was on it before), holes (no device bytes at all),
space not allocated yet, compressed, encrypted or inline data, and reflinked (shared) space,
where writing through the mapping would change other files too. Unwritten space and holes
become dm ``zero`` targets only when asked (`zero_unwritten`: writes to them are lost), and
shared space is mapped only for read-only use when asked (`allow_shared`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..base.errors import DataError
from ..base.quantities import human_size
from .runs import (
    DELALLOC,
    ENCODED,
    ENCRYPTED,
    INLINE,
    NOT_ALIGNED,
    SECTOR,
    SHARED,
    TAIL,
    UNKNOWN,
    Run,
    Segment,
    segments,
)

#: Why a range cannot be mapped, by kind; the first flag that applies wins.
REASONS: tuple[tuple[int, str, str], ...] = (
    (DELALLOC | UNKNOWN, "not-allocated",
     "not allocated yet (delayed allocation): the filesystem has not chosen its place"),
    (ENCODED, "encoded", "compressed or otherwise encoded: the device holds other bytes"),
    (ENCRYPTED, "encrypted", "encrypted by the filesystem: the device holds ciphertext"),
    (INLINE | TAIL | NOT_ALIGNED, "not-aligned",
     "stored inside metadata, not at a sector boundary"),
)


@dataclass(frozen=True)
class Problem:
    """A file range a mapping must not present as the file's bytes, and why."""

    kind: str  # hole | unwritten | shared | not-allocated | encoded | encrypted | ...
    logical: int
    length: int
    why: str
    overridable: bool

    def describe(self) -> str:
        return f"file bytes {self.logical}+{self.length} ({self.kind})"


@dataclass(frozen=True)
class Target:
    """One line of a dm table: file sectors ``[start, start+sectors)`` read from device
    sector ``device_sector`` (linear) or as zeros (zero)."""

    start: int
    sectors: int
    kind: str  # linear | zero
    device_sector: int = 0

    def line(self, device: str) -> str:
        if self.kind == "zero":
            return f"{self.start} {self.sectors} zero"
        return f"{self.start} {self.sectors} linear {device} {self.device_sector}"


def problems(segs: Sequence[Segment], *, zero_unwritten: bool = False,
             allow_shared: bool = False) -> list[Problem]:
    """Every range whose bytes a mapping would get wrong, given what the user allows."""
    out = []
    for seg in segs:
        run = seg.run
        if run is None:
            if not zero_unwritten:
                out.append(Problem("hole", seg.logical, seg.length,
                                   "a hole: no device bytes, the filesystem reads zeros", True))
            continue
        reason = next(((k, w) for bits, k, w in REASONS if run.flags & bits), None)
        if reason is None and (run.physical % SECTOR or run.length % SECTOR):
            reason = ("not-aligned", "not at a 512-byte sector boundary on the device")
        if reason is not None:
            out.append(Problem(reason[0], seg.logical, seg.length, reason[1], False))
        elif run.kind == "unwritten" and not zero_unwritten:
            out.append(Problem("unwritten", seg.logical, seg.length,
                               "allocated but never written: the filesystem reads zeros, the "
                               "device holds old data", True))
        elif run.flags & SHARED and not allow_shared:
            out.append(Problem("shared", seg.logical, seg.length,
                               "shared with other files (reflink): writing through the map "
                               "changes them too", True))
    return out


def refusal(found: Sequence[Problem], what: str) -> DataError:
    """One line naming the first offending ranges and what would allow the rest."""
    shown = ", ".join(p.describe() for p in found[:3])
    more = f" and {len(found) - 3} more" if len(found) > 3 else ""
    kinds = sorted({p.kind for p in found})
    fixes = []
    if {"hole", "unwritten"} & set(kinds):
        fixes.append("--zero-unwritten maps holes and unwritten space to zeros")
    if "shared" in kinds:
        fixes.append("--allow-shared maps shared space (use the mapping read-only)")
    if not all(p.overridable for p in found):
        fixes.append("; ".join(sorted({f"{p.kind}: {p.why}" for p in found
                                       if not p.overridable})))
    return DataError(f"refusing {what}: the device's bytes would not be the file's at "
                     f"{shown}{more}", "; ".join(fixes))


def _size_check(size: int) -> None:
    if size == 0:
        raise DataError("the file is empty: there is nothing to map")
    if size % SECTOR:
        raise DataError(f"the file's size ({size} bytes) is not a whole number of 512-byte "
                        "sectors: a block device cannot end mid-sector")


def dm_targets(runs: Sequence[Run], size: int, *, zero_unwritten: bool = False,
               allow_shared: bool = False) -> list[Target]:
    """The file as a dm-linear table, or DataError naming the ranges that forbid it."""
    _size_check(size)
    segs = segments(runs, size)
    found = problems(segs, zero_unwritten=zero_unwritten, allow_shared=allow_shared)
    if found:
        raise refusal(found, "a device-mapper table")
    out: list[Target] = []
    for seg in segs:
        start, sectors = seg.logical // SECTOR, seg.length // SECTOR
        if seg.run is None or seg.run.kind == "unwritten":
            target = Target(start, sectors, "zero")
        else:
            target = Target(start, sectors, "linear", seg.run.physical // SECTOR)
        if out and _continues(out[-1], target):
            prev = out[-1]
            out[-1] = Target(prev.start, prev.sectors + sectors, prev.kind, prev.device_sector)
        else:
            out.append(target)
    return out


def _continues(prev: Target, target: Target) -> bool:
    """One line can say both (a hole followed by unwritten space; shared space next to
    unshared space at the next device sector)."""
    return prev.kind == target.kind and prev.start + prev.sectors == target.start and (
        target.kind == "zero" or prev.device_sector + prev.sectors == target.device_sector)


def dm_table(runs: Sequence[Run], size: int, device: str, **kw: bool) -> str:
    return "".join(t.line(device) + "\n" for t in dm_targets(runs, size, **kw))


@dataclass(frozen=True)
class LoopArgs:
    """`losetup --offset OFFSET --sizelimit SIZELIMIT DEVICE`: a file that is one run."""

    device: str
    offset: int
    sizelimit: int

    def argv(self) -> list[str]:
        return ["--offset", str(self.offset), "--sizelimit", str(self.sizelimit), self.device]


def loop_args(runs: Sequence[Run], size: int, device: str, *,
              allow_shared: bool = False) -> LoopArgs:
    """losetup arguments, when the whole file is one run of data on the device."""
    _size_check(size)
    segs = segments(runs, size)
    found = problems(segs, allow_shared=allow_shared)
    if found:
        raise refusal(found, "losetup arguments")
    if len(segs) != 1:
        raise DataError(f"the file is {len(segs)} runs on the device, not one: a loop device "
                        "maps only one", "use --dm-table")
    run = segs[0].run
    assert run is not None
    return LoopArgs(device, run.physical, size)


def describe_targets(targets: Sequence[Target]) -> str:
    """A one-line summary for stderr: how many lines of each kind, how much of each."""
    lin = [t for t in targets if t.kind == "linear"]
    zero = [t for t in targets if t.kind == "zero"]
    parts = [f"{len(lin)} linear ({human_size(sum(t.sectors for t in lin) * SECTOR)})"]
    if zero:
        parts.append(f"{len(zero)} zero ({human_size(sum(t.sectors for t in zero) * SECTOR)})")
    return ", ".join(parts)
