"""What `extents` commands print: text for people, JSON for programs (pure).

Device offsets are on the filesystem's device (the partition when there is one), in bytes
and in 512-byte sectors; the header says where that partition starts on its disk.
"""

from __future__ import annotations

from typing import Any

from ..base.quantities import fmt_s, human_size, plural
from .layout import Layout
from .proof import CheckResult, SaveResult, VerifyResult
from .runs import SECTOR, Segment, flag_names

SHOWN_CHANGES = 5


def device_line(lay: Layout) -> str:
    dev = lay.device
    where = (f", a partition starting at byte {dev.start} (sector {dev.start // SECTOR}) of "
             f"{dev.disk}" if dev.is_partition else " (a whole disk)")
    return f"{dev.fstype} on {dev.path} ({dev.major_minor}){where}"


def summary(lay: Layout) -> str:
    t = lay.totals
    parts = [f"{plural(t.runs, 'run')} from {plural(t.extents, 'extent')}",
             f"{plural(t.holes, 'hole')} ({human_size(t.hole_bytes)})",
             f"data {human_size(t.data_bytes)}"]
    if t.unwritten_bytes:
        parts.append(f"unwritten {human_size(t.unwritten_bytes)}")
    if t.unmappable_bytes:
        parts.append(f"unmappable {human_size(t.unmappable_bytes)}")
    if t.shared_bytes:
        parts.append(f"shared {human_size(t.shared_bytes)}")
    parts.append(f"{plural(t.jumps, 'jump')} on the device")
    parts.append(f"largest run {human_size(t.largest_run)}")
    return "; ".join(parts)


HEADER = (f"{'#':>6} {'file offset':>14} {'length':>12} {'device offset':>15} "
          f"{'dev sector':>12} {'sectors':>10}  flags")


def _sectors(nbytes: int) -> str:
    """Bytes as 512-byte sectors; exact, with the remainder shown when there is one."""
    whole, rest = divmod(nbytes, SECTOR)
    return f"{whole}+{rest}B" if rest else str(whole)


_FLAGS_TEXT: dict[int, str] = {}


def _flags_text(flags: int) -> str:
    text = _FLAGS_TEXT.get(flags)
    if text is None:  # a few distinct values per file: built once each
        text = _FLAGS_TEXT[flags] = ",".join(flag_names(flags)) or "-"
    return text


def _row(i: int, seg: Segment) -> str:
    run = seg.run
    if run is None:
        return (f"{'-':>6} {seg.logical:>14} {seg.length:>12} {'-':>15} {'-':>12} "
                f"{_sectors(seg.length):>10}  hole")
    return (f"{i:>6} {seg.logical:>14} {seg.length:>12} {run.physical:>15} "
            f"{_sectors(run.physical):>12} {_sectors(seg.length):>10}  "
            f"{_flags_text(run.flags)}")


def show_text(lay: Layout) -> str:
    f = lay.file
    lines = [f"{f.path}: {human_size(f.size)} ({f.size} bytes), {device_line(lay)}",
             summary(lay), "", HEADER]
    n = 0
    for seg in lay.segments:
        lines.append(_row(n, seg))
        n += seg.run is not None
    return "\n".join(lines) + "\n"


def show_json(lay: Layout) -> dict[str, Any]:
    f, d, t = lay.file, lay.device, lay.totals
    return {
        "file": {"path": f.path, "size": f.size, "inode": f.inode, "mtime_ns": f.mtime_ns},
        "device": {"path": d.path, "major_minor": d.major_minor, "disk": d.disk,
                   "start": d.start, "start_sector": d.start // SECTOR, "size": d.size,
                   "logical_block_size": d.logical_block_size, "fstype": d.fstype,
                   "mountpoint": d.mountpoint},
        "totals": {"size": t.size, "extents": t.extents, "runs": t.runs,
                   "data_bytes": t.data_bytes, "unwritten_bytes": t.unwritten_bytes,
                   "unmappable_bytes": t.unmappable_bytes, "shared_bytes": t.shared_bytes,
                   "holes": t.holes, "hole_bytes": t.hole_bytes, "jumps": t.jumps,
                   "largest_run": t.largest_run, "flags": flag_names(t.flags)},
        "segments": [_seg_json(s) for s in lay.segments],
    }


def _seg_json(seg: Segment) -> dict[str, Any]:
    run = seg.run
    return {"logical": seg.logical, "length": seg.length, "kind": seg.kind,
            "physical": None if run is None else run.physical,
            "physical_sector": None if run is None else _json_sector(run.physical),
            "flags": [] if run is None else flag_names(run.flags),
            "extents": 0 if run is None else run.extents}


def _json_sector(nbytes: int) -> int | float:
    """A whole sector number, or a fraction where the data is not sector-aligned."""
    return nbytes // SECTOR if nbytes % SECTOR == 0 else nbytes / SECTOR


def _rate(nbytes: int, seconds: float) -> str:
    return f"{nbytes / seconds / 1e6:.0f} MB/s" if seconds > 0 else "-"


def _skipped(skipped: dict[str, int]) -> str:
    if not skipped:
        return ""
    parts = ", ".join(f"{human_size(n)} {kind}" for kind, n in sorted(skipped.items()))
    return f"; not compared (no device bytes to read): {parts}"


def verify_text(r: VerifyResult) -> str:
    lay = r.layout
    if r.mismatch:
        return f"MISMATCH: {r.mismatch.describe()}"
    if not r.checked_bytes:
        return (f"nothing compared: {lay.file.path} has no data on {lay.device.path} to read"
                f"{_skipped(r.skipped)}")
    return (f"identical: {human_size(r.checked_bytes)} in {plural(r.checked_runs, 'run')} of "
            f"{lay.file.path} read from {lay.device.path} match the file "
            f"({fmt_s(r.seconds)} s, {_rate(r.checked_bytes, r.seconds)})"
            f"{_skipped(r.skipped)}")


def save_text(r: SaveResult) -> str:
    if r.mismatch:
        return f"MISMATCH, nothing saved: {r.mismatch.describe()}"
    t = r.layout.totals
    return (f"saved {r.output}: {plural(t.runs, 'run')} of {r.layout.file.path} on "
            f"{r.layout.device.path}, every byte checked ({fmt_s(r.seconds)} s)")


def _more(items: list[Any]) -> list[str]:
    return [f"  ... and {len(items) - SHOWN_CHANGES} more"] if len(items) > SHOWN_CHANGES else []


def check_text(r: CheckResult) -> str:
    s = r.saved
    lines = []
    if r.state == "unchanged":
        how = "every byte read again" if r.read else "FIEMAP and identity only (--quick)"
        lines.append(f"unchanged: {s.path} is where the map says "
                     f"({plural(len(s.segments), 'segment')}, {how})")
    elif r.state == "moved":
        lines.append(f"moved: {s.path} is no longer (all) where the map says: "
                     f"{plural(len(r.moved), 'segment')} moved of {len(s.segments)}")
        lines += [f"  {m.describe()}" for m in r.moved[:SHOWN_CHANGES]] + _more(r.moved)
        stale = [x for x in r.stale if all(m.saved != x for m in r.moved)]
        lines += [f"  file bytes {x.logical}+{x.length}: the device bytes at {x.physical} "
                  "differ from the saved ones" for x in stale[:SHOWN_CHANGES]] + _more(stale)
    else:
        what = (f"{plural(len(r.changed), 'segment')} of {len(s.segments)} differ"
                if r.changed else "its size or modification time changed")
        lines.append(f"content changed: {s.path} no longer holds the bytes the map was saved "
                     f"with: {what}")
        lines += [f"  file bytes {c.logical}+{c.length}" for c in r.changed[:SHOWN_CHANGES]]
        lines += _more(r.changed)
    lines += [f"  note: {n}" for n in r.notes]
    return "\n".join(lines)
