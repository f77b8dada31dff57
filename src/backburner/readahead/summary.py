"""`readahead show`: what a pack holds, how much of it is stale, and what order buys.

Staleness is decided by identity (inode, size, mtime); `--verify` also reads the recorded
ranges of every matching file whose entry has a digest (`record --hash`) and calls it
changed when the bytes differ: an update that kept the inode, size and mtime (a rewrite in
place followed by `touch -r`, an rsync of the same length) is caught only that way.

For the entries that still match their files, FIEMAP places each recorded range on its
device; the seeks a cold start needs reading them in access order are compared with one
ascending sweep (what replay does on a rotating disk).
"""

from __future__ import annotations

import logging
import os
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from ..base.errors import BackburnerError
from ..base.quantities import fmt_pct, human_size, plural
from ..extents import fiemap, runs_of, select
from .cached import open_file
from .freshness import check_entries
from .order import Piece, access_order, ascending_fraction, physical_order, seeks, span
from .pack import CHANGED, LISTED, MISSED, MISSING, OK, STATTED, Entry, Pack, digest, show_path
from .ranges import clip

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Row:
    path: bytes
    status: str
    bytes: int
    ranges: int
    physical: int | None  # where its first recorded byte is on the device, if known
    device: bool = False  # the filesystem's metadata, read through its block device


def lookup_counts(pack: Pack) -> str:
    """What a pack recorded with --lookups holds beyond its files, in a few words."""
    n = {k: sum(1 for lk in pack.lookups if lk.kind == k) for k in (LISTED, STATTED, MISSED)}
    return (f"{plural(n[LISTED], 'directory', 'directories')} listed, "
            f"{plural(n[STATTED], 'inode')} looked at, {plural(n[MISSED], 'name')} missed, "
            f"{plural(len(pack.steps), 'step')} in order")


@dataclass
class Summary:
    note: str
    created_ns: int
    page_size: int
    rows: list[Row]
    counts: dict[str, int] = field(default_factory=dict)
    stale_bytes: int = 0
    verified: int | None = None  # digests checked (None: not asked to)
    content_changed: int = 0  # of those, files whose bytes differ
    seeks_access: int = 0
    seeks_sorted: int = 0
    ascending_access: float = 1.0
    span: int = 0
    asked: str = ""  # with --lookups: what the start asked besides its files' bytes
    read_ahead_kb: int = 0
    wall_ns: int = 0
    cpu_ns: int = 0

    @property
    def bytes(self) -> int:
        return sum(r.bytes for r in self.rows)

    @property
    def stale_fraction(self) -> float:
        return self.stale_bytes / self.bytes if self.bytes else 0.0


def pieces_of(i: int, path: bytes, ranges: tuple[tuple[int, int], ...], size: int
              ) -> list[Piece]:
    """The recorded ranges of a file placed on its device (unknown places where FIEMAP
    cannot say)."""
    try:
        runs = select(runs_of(fiemap(os.fsdecode(path), sync=False), size), clip(ranges, size))
    except (BackburnerError, OSError) as err:
        log.debug("%r: %s", path, err)
        return [Piece(i, off, ln) for off, ln in clip(ranges, size)]
    return [Piece(i, r.logical, r.length, r.physical if r.kind == "data" else None)
            for r in runs]


CHUNK = 1 << 20


def content_matches(entry: Entry) -> bool:
    """Whether the file's recorded ranges still hash to the entry's digest; read in
    chunks (a range may be a whole large file), without following a planted symlink and
    without touching its atime. A file that cannot be read does not match."""
    assert entry.digest is not None
    try:
        fd = open_file(entry.path)
    except OSError as err:
        log.debug("%r: %s", entry.path, err)
        return False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size != entry.state.size:
            return False
        return digest(_chunks(fd, clip(entry.ranges, st.st_size))) == entry.digest
    except OSError as err:
        log.debug("%r: %s", entry.path, err)
        return False
    finally:
        os.close(fd)


def _chunks(fd: int, ranges: tuple[tuple[int, int], ...]) -> Iterator[bytes]:
    for off, ln in ranges:
        end = off + ln
        while off < end:
            chunk = os.pread(fd, min(CHUNK, end - off), off)
            if not chunk:  # shrunk while being read: the digest will not match
                return
            yield chunk
            off += len(chunk)


def summarize(pack: Pack, verify: bool = False) -> Summary:
    """What `show` prints; `verify`: check the digests of matching files (reads them)."""
    rows = []
    counts = {OK: 0, CHANGED: 0, MISSING: 0}
    stale = 0
    verified = changed_content = 0
    by_dev: dict[int, list[Piece]] = {}
    for i, (entry, verdict, now) in enumerate(check_entries(pack)):
        if verify and verdict == OK and entry.digest is not None and not entry.device:
            verified += 1
            if not content_matches(entry):
                verdict = CHANGED
                changed_content += 1
        counts[verdict] += 1
        physical = None
        if verdict == OK and now is not None:
            ps = ([Piece(i, off, ln, off) for off, ln in clip(entry.ranges, now.size)]
                  if entry.device else pieces_of(i, entry.path, entry.ranges, now.size))
            by_dev.setdefault(now.dev, []).extend(ps)
            physical = next((p.physical for p in ps if p.physical is not None), None)
        else:
            stale += entry.bytes
        rows.append(Row(entry.path, verdict, entry.bytes, len(entry.ranges), physical,
                        entry.device))
    s = Summary(pack.note, pack.created_ns, pack.page_size, rows, counts, stale,
                verified if verify else None, changed_content)
    s.asked = lookup_counts(pack) if pack.lookups or pack.steps else ""
    s.read_ahead_kb, s.wall_ns, s.cpu_ns = pack.read_ahead_kb, pack.wall_ns, pack.cpu_ns
    in_access = [access_order(ps) for ps in by_dev.values()]
    s.seeks_access = sum(seeks(ps) for ps in in_access)
    s.seeks_sorted = sum(seeks(physical_order(ps)) for ps in by_dev.values())
    s.span = sum(span(ps) for ps in by_dev.values())
    flat = [p for ps in in_access for p in ps]
    s.ascending_access = ascending_fraction(flat)
    return s


def _entry_line(r: Row) -> str:
    where = f"@{r.physical // 512}s" if r.physical is not None else "-"
    return (f"{r.status:<8} {human_size(r.bytes):>10} {r.ranges:>6} {where:>14}  "
            f"{show_path(r.path)}{' (metadata)' if r.device else ''}")


def _verify_lines(s: Summary) -> list[str]:
    if s.verified is None:
        return []
    if not s.verified:
        return ["verified  no digests to check (record with --hash to store them)"]
    return [f"verified  {plural(s.verified, 'digest')}: {s.content_changed} with other "
            "bytes now (counted as changed; replay, which checks identity only, would "
            "read them)"]


def format_summary(s: Summary, files: bool = False) -> str:
    created = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(s.created_ns / 1e9))
    files = [r for r in s.rows if not r.device]
    meta = [r for r in s.rows if r.device]
    lines = [
        f"recorded  {created}: {s.note or '?'}",
        f"files     {len(files)} ({human_size(sum(r.bytes for r in files))} in "
        f"{plural(sum(r.ranges for r in files), 'range')}, pages of {s.page_size} bytes)",
    ]
    if meta:
        lines.append(f"metadata  {human_size(sum(r.bytes for r in meta))} in "
                     f"{plural(sum(r.ranges for r in meta), 'range')} on "
                     f"{', '.join(show_path(r.path) for r in meta)} (inode tables, "
                     "directories: read through the device)")
    if s.asked:
        lines.append(f"asked     {s.asked}; recorded with {s.read_ahead_kb} KiB read-ahead, "
                     f"the start took {s.wall_ns / 1e9:.3f} s ({s.cpu_ns / 1e9:.3f} s CPU)")
    lines += [
        f"stale     {s.counts[CHANGED]} changed, {s.counts[MISSING]} missing: "
        f"{human_size(s.stale_bytes)} ({fmt_pct(round(s.stale_fraction, 3))} of the bytes) "
        "will be skipped",
        *_verify_lines(s),
        f"seeks     {s.seeks_access} in access order, {s.seeks_sorted} in one physical sweep "
        f"({s.seeks_access - s.seeks_sorted} saved; the files span {human_size(s.span)})",
        f"ascending {fmt_pct(round(s.ascending_access, 3))} of the bytes lie in one ascending "
        "run in access order",
    ]
    if files:
        lines.append(f"{'status':<8} {'bytes':>10} {'ranges':>6} {'first sector':>14}  path")
        lines += [_entry_line(r) for r in s.rows]
    return "\n".join(lines)

