"""`layout`: put a pack's files first and contiguous when an image is built, and check it.

order
    The pack's files in access order, relative to the image root, as a ``mksquashfs -sort``
    file (priority 32767 first, higher is placed first), an ``xorriso`` command file of
    ``-find PATH -exec sort_weight W --`` lines (higher weight, lower block address; paths
    escaped with ``-backslash_codes``), or a plain list (``--null`` for any name).

build-ext4
    An ext4 image of a tree with the pack's files first and contiguous: `ext4image`.

check
    For a directory or an image (loop-mounted read-only): the pack's recorded ranges
    placed by FIEMAP; the share of the bytes in one ascending run once sorted (how
    contiguous the files are) and in access order (how well the order matches), and the
    seeks a cold start needs: in access order without help, and in one sweep with replay.
    For an ext4 image, also the reads a cold start makes with the metadata it needs
    (inode-table, directory and extent-tree blocks), in the order the pack's steps say,
    and what a slowdisk profile's drive does with them: the start's predicted time and
    seeks (`predict`).
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from .. import system
from ..base.errors import DataError, NotFoundError, SystemStateError, UsageError
from ..base.quantities import fmt_pct, fmt_s, human_size, plural
from ..slowdisk.profiles import get_profile
from . import predict
from .order import Piece, access_order, ascending_fraction, physical_order, seeks, span
from .pack import Pack
from .ranges import clip
from .summary import pieces_of

log = logging.getLogger(__name__)

FORMATS = ("mksquashfs-sort", "xorriso-weights", "list")
#: The drive `layout check` predicts a start on: the slow medium layouts are made for.
DEFAULT_PROFILE = "dvd"
_SQUASHFS_TOP = 32767


# --- paths relative to the image root ------------------------------------------------------


def norm_root(root: str | bytes) -> bytes:
    """A root directory as the pack spells paths: bytes, normalised."""
    return os.path.normpath(os.fsencode(root))


def relative(path: bytes, root: bytes) -> bytes | None:
    """`path` relative to `root` (None when it is not below it)."""
    if root == b"/":
        return path.lstrip(b"/") or None
    prefix = root.rstrip(b"/") + b"/"
    return path[len(prefix):] if path.startswith(prefix) and len(path) > len(prefix) else None


def relative_paths(pack: Pack, root: bytes) -> tuple[list[bytes], int]:
    """The pack's paths below `root`, relative, in access order, each once; and how many
    entries lie elsewhere."""
    out: dict[bytes, None] = {}
    outside = 0
    for e in pack.entries:
        if e.device:
            continue  # metadata: its places belong to the image it was recorded on
        rel = relative(e.path, root)
        if rel is None:
            outside += 1
        else:
            out.setdefault(rel)
    return list(out), outside


def guess_root(paths: Sequence[bytes], exists: Callable[[bytes], bool]) -> bytes:
    """Which directory of the recording machine the image's root stands for: the ancestor
    under which most of the pack's files are found (the deepest wins a tie). Each path
    is tried against each of its own ancestors, so a pack that also names files outside
    the image (the interpreter, libc) does not pull the guess up to /."""
    if not paths:
        raise DataError("the pack is empty")
    score: dict[bytes, int] = {}
    for p in paths:
        cur = os.path.dirname(p)
        while True:
            rel = relative(p, cur)
            if rel and exists(rel):
                score[cur] = score.get(cur, 0) + 1
            if cur in (b"/", b""):
                break
            cur = os.path.dirname(cur)
    if not score:
        raise NotFoundError("none of the pack's files is in the image or directory",
                            "give --root: the directory the pack was recorded under")
    return max(score, key=lambda d: (score[d], len(d)))


# --- order: the three formats (pure) -------------------------------------------------------


def _squashfs_name(rel: bytes) -> bytes | None:
    if b"\n" in rel:
        return None  # the sort file is read line by line: a newline cannot be escaped
    out = bytearray()
    for i, byte in enumerate(rel):
        if byte in b" \t\r\v\f\\" or (i == 0 and byte == ord("#")):
            out.append(ord("\\"))
        out.append(byte)
    return bytes(out)


def _xorriso_name(rel: bytes) -> bytes:
    out = bytearray()
    for byte in b"/" + rel:
        if 0x20 <= byte < 0x7F and byte not in b'"\\':
            out.append(byte)
        else:
            out += b"\\%03o" % byte
    return bytes(out)


@dataclass(frozen=True)
class Emitted:
    data: bytes
    files: int  # written
    skipped: int  # names the format cannot hold


def emit(rels: Sequence[bytes], fmt: str, null: bool = False) -> Emitted:
    """The files (relative paths, most wanted first) in one of FORMATS."""
    lines: list[bytes] = []
    skipped = 0
    if fmt == "mksquashfs-sort":
        for rank, rel in enumerate(rels):
            name = _squashfs_name(rel)
            if name is None:
                skipped += 1
                continue
            lines.append(name + b" %d\n" % max(1, _SQUASHFS_TOP - rank))
    elif fmt == "xorriso-weights":
        lines.append(b"-iso_rr_pattern off\n-backslash_codes on\n")
        for rank, rel in enumerate(rels):
            lines.append(b'-find "%s" -exec sort_weight %d --\n'
                         % (_xorriso_name(rel), len(rels) - rank))
    elif fmt == "list":
        for rel in rels:
            if not null and b"\n" in rel:
                skipped += 1
                continue
            lines.append(rel + (b"\0" if null else b"\n"))
    else:
        raise UsageError(f"unknown format {fmt!r}", "use " + ", ".join(FORMATS))
    files = len(rels) - skipped
    return Emitted(b"".join(lines), files, skipped)


@dataclass(frozen=True)
class Order:
    emitted: Emitted
    root: bytes
    outside: int


def order(pack: Pack, fmt: str, root: str | None, null: bool = False) -> Order:
    """`layout order`: the pack's files below `root` (default /) in `fmt`."""
    if fmt not in FORMATS:
        raise UsageError(f"unknown format {fmt!r}", "use " + ", ".join(FORMATS))
    base = norm_root(root) if root else b"/"
    rels, outside = relative_paths(pack, base)
    return Order(emit(rels, fmt, null), base, outside)


# --- check ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class CheckResult:
    target: str
    root: bytes  # the pack's directory that the target's root stands for
    files: int  # pack files found in the target
    missing: int
    bytes: int
    unplaced: int  # bytes FIEMAP could not place
    contiguous: float  # share of the bytes in one ascending run, sorted by place
    in_order: float  # share of the bytes in one ascending run, in access order
    seeks_cold: int  # a cold start, reading in access order
    seeks_sweep: int  # one physical sweep (replay)
    span: int
    meta: Metadata | None = None  # ext4 only: what a cold start reads besides the data
    drive: predict.Timed | None = None  # ext4 with a profile: what that drive does
    read_ahead_kb: int = 0  # what the pack was recorded with (0: unknown)


@dataclass(frozen=True)
class Metadata:
    """A cold start's reads of ext4 metadata, predicted: for each file in access order,
    each path component's parent directory (all its blocks, once) and inode (its
    inode-table block with the kernel's read-ahead window, once), then the file's data."""

    seeks: int  # the cold start's seeks, these reads included
    itable_blocks: int  # inode-table blocks read
    dir_blocks: int  # directory blocks read
    windows: int  # inode-table reads (each a window of blocks)
    tree_blocks: int = 0  # extent-tree blocks read (files of more than four extents)


def check_dir(top: str | bytes, pack: Pack, root: str | bytes | None = None,
              label: str | None = None, image: str | None = None,
              profile: str | None = None) -> CheckResult:
    """Place the pack's files found under directory `top` (the image root's stand-in);
    where `top` is the mount of `image`, an ext4, predict the metadata reads too, and
    with a slowdisk `profile` what that drive does with them (`predict`)."""
    base = os.fsencode(top)
    paths = [e.path for e in pack.entries if not e.device]

    def exists(rel: bytes) -> bool:
        return os.path.isfile(os.path.join(base, rel)) and not os.path.islink(
            os.path.join(base, rel))

    pack_root = norm_root(root) if root else guess_root(paths, exists)
    pieces: list[Piece] = []
    found = missing = 0
    for i, e in enumerate(pack.entries):
        if e.device:
            continue
        rel = relative(e.path, pack_root)
        if rel is None or not exists(rel):
            missing += 1
            continue
        found += 1
        size = os.lstat(os.path.join(base, rel)).st_size
        pieces += pieces_of(i, os.path.join(base, rel), clip(e.ranges, size), size)
    cold, sweep = access_order(pieces), physical_order(pieces)
    meta, pred = _metadata(base, pack_root, pack, image)
    drive = None
    if pred is not None and profile:
        assert image is not None
        drive = predict.timed(pred, get_profile(profile), os.path.getsize(image))
    return CheckResult(label or os.fsdecode(base), pack_root, found, missing,
                       sum(p.length for p in pieces),
                       sum(p.length for p in pieces if p.physical is None),
                       ascending_fraction(sweep), ascending_fraction(cold), seeks(cold),
                       seeks(sweep), span(pieces), meta, drive, pack.read_ahead_kb)


def _metadata(base: bytes, pack_root: bytes, pack: Pack, image: str | None
              ) -> tuple[Metadata | None, predict.Prediction | None]:
    """What a cold start reads on the ext4 `image` mounted at `base`, metadata included
    (`predict`), summed up; None for anything else."""
    pred = predict.reads(base, pack_root, pack, image) if image else None
    if pred is None:
        return None, None
    seq = [Piece(-1, r.offset, r.length, r.offset) for r in pred.reads]
    return Metadata(seeks(seq), pred.itable_blocks, pred.dir_blocks, pred.windows,
                    pred.tree_blocks), pred


@contextmanager
def mounted_ro(image: str) -> Iterator[str]:
    """The image on a read-only loop device, mounted read-only in a private directory."""
    system.require_root("mounting an image (loop device)")
    with system.Transaction("layout-check") as tx:
        work = str(tx.apply(system.PrivateDir(str(system.work_root()), "layout-")))
        mnt = os.path.join(work, "mnt")
        tx.apply(system.MadeDir(mnt))
        loop = tx.apply(system.LoopDevice(image, read_only=True))
        try:
            tx.apply(system.Mount(loop, mnt, "", "ro"))
        except SystemStateError:  # an ext4 whose journal needs replaying: read it as is
            tx.apply(system.Mount(loop, mnt, "ext4", "ro,noload"))
        yield mnt


def check(target: str, pack: Pack, root: str | None = None,
          profile: str | None = DEFAULT_PROFILE) -> CheckResult:
    """`layout check`: a directory as it is, an image file through a read-only mount;
    for an ext4 image, what a drive of `profile` would do with the start."""
    try:
        st = os.stat(target)
    except FileNotFoundError:
        raise NotFoundError(f"{target}: no such image or directory") from None
    if stat.S_ISDIR(st.st_mode):
        return check_dir(target, pack, root)
    if not stat.S_ISREG(st.st_mode):
        raise UsageError(f"{target} is neither an image file nor a directory")
    if profile:
        get_profile(profile)  # an unknown one is refused before the mount
    with mounted_ro(os.path.abspath(target)) as mnt:
        return check_dir(mnt, pack, root, label=target, image=os.path.abspath(target),
                         profile=profile)


#: A pack recorded with less read-ahead than this holds less than a start reads on a
#: medium with its default (a DVD drive's, a disk's: 128 KiB).
MEDIUM_READ_AHEAD_KB = 128


def read_ahead_note(pack: Pack) -> str | None:
    """A word for a pack recorded with less read-ahead than a medium has: a layout lays
    out, and a prediction follows, what the pack says the start reads."""
    if not pack.read_ahead_kb or pack.read_ahead_kb >= MEDIUM_READ_AHEAD_KB:
        return None
    return (f"the pack was recorded at {pack.read_ahead_kb} KiB read-ahead: on a medium that "
            "reads ahead more the start reads beyond it (record it with --read-ahead-kb "
            "set to the medium's)")


def describe_check(c: CheckResult) -> str:
    """One line per target for `layout check` and `build-ext4`."""
    placed = "" if not c.unplaced else f", {human_size(c.unplaced)} not placeable"
    meta = "" if c.meta is None else (
        f" ({c.meta.seeks} with the metadata it reads: "
        f"{plural(c.meta.itable_blocks, 'inode-table block')} in "
        f"{plural(c.meta.windows, 'read')}, {plural(c.meta.dir_blocks, 'directory block')}"
        + (f", {plural(c.meta.tree_blocks, 'extent-tree block')}" if c.meta.tree_blocks
           else "") + ")")
    drive = "" if c.drive is None else (
        f"; on {c.drive.profile}: a cold start {fmt_s(c.drive.seconds)} s, "
        f"{plural(c.drive.requests, 'read')}, {plural(c.drive.seeks, 'seek')}"
        + (f" (at the {c.read_ahead_kb} KiB read-ahead the pack was recorded with)"
           if c.read_ahead_kb else ""))
    return (f"{c.target}: {c.files} files ({c.missing} missing), {human_size(c.bytes)}"
            f"{placed}; contiguous {fmt_pct(round(c.contiguous, 3))}, in access order "
            f"{fmt_pct(round(c.in_order, 3))}; seeks: cold start {c.seeks_cold}{meta}, "
            f"with replay {c.seeks_sweep}; span {human_size(c.span)}{drive}")


__all__ = ["FORMATS", "CheckResult", "Metadata", "check", "check_dir", "describe_check", "emit",
           "guess_root", "mounted_ro", "norm_root", "order", "relative", "relative_paths"]
