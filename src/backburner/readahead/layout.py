"""`layout`: put a pack's files first and contiguous when an image is built, and check it.

order
    The pack's files in access order, relative to the image root, as a ``mksquashfs -sort``
    file (priority 32767 first, higher is placed first), an ``xorriso`` command file of
    ``-find PATH -exec sort_weight W --`` lines (higher weight, lower block address; paths
    escaped with ``-backslash_codes``), or a plain list (``--null`` for any name).

build-ext4
    The two-pass method. Pass 1: ``mke2fs -T default -d HOT`` makes a filesystem just big
    enough for the hot files (``-T default`` keeps a small first pass off the
    small-filesystem profile; the inode count is that of the final size, and the journal is
    added only after growing, so it does not land between the hot files). HOT holds the
    tree's skeleton (every directory; every file an empty placeholder) and the hot files
    themselves under numbered names in one staging directory: mke2fs -d adds a directory's
    entries in sorted order, so the directories come first, right after the inode tables,
    and the staging directory last (`STAGING_PREFIX`), its data in access order, one run.
    ``resize2fs`` grows it to the full size. Pass 2 mounts it (loop device and mount
    through `system`, in a transaction), renames each hot file into place (a rename moves
    no data), and copies the rest in with owners, modes, times, xattrs, symlinks, device
    nodes and hard links. Then ``e2fsck -fn`` must find
    it clean and a read-only mount must compare equal to the source, byte for byte.

check
    For a directory or an image (loop-mounted read-only): the pack's recorded ranges
    placed by FIEMAP; the share of the bytes in one ascending run once sorted (how
    contiguous the files are) and in access order (how well the order matches), and the
    seeks a cold start needs: in access order without help, and in one sweep with replay.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import stat
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from .. import spawn, system
from ..errors import (
    BackburnerError,
    DataError,
    ExistsError,
    NotFoundError,
    SystemStateError,
    UnavailableError,
    UsageError,
)
from ..units import MiB, fmt_pct, human_size
from . import tree
from .order import Piece, access_order, ascending_fraction, physical_order, seeks, span
from .pack import Pack, clip
from .summary import pieces_of

log = logging.getLogger(__name__)

FORMATS = ("mksquashfs-sort", "xorriso-weights", "list")
BLOCK = 4096
GROUP_BYTES = 32768 * BLOCK  # a block group of a 4 KiB-block ext4
INODE_RATIO = 16384  # mke2fs.conf [defaults] inode_ratio: what -T default gives
MAX_INODES_PER_GROUP = 8 * BLOCK
_SQUASHFS_TOP = 32767
#: The staging directory of the hot files in pass 1. mke2fs -d fills a directory in the
#: order of its names (byte order, under LC_ALL=C), so this one, whose first byte sorts
#: after any name's, comes last: the skeleton's directories are written first, right after
#: the inode tables, and the hot data follows them. A replay then reads the metadata and
#: the files in one forward pass, not past the hot data to the directories and back.
STAGING_PREFIX = b"\xff.backburner-hot-"


# --- paths relative to the image root ------------------------------------------------------


def _norm(root: str | bytes) -> bytes:
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
    base = _norm(root) if root else b"/"
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


def check_dir(top: str | bytes, pack: Pack, root: str | bytes | None = None,
              label: str | None = None) -> CheckResult:
    """Place the pack's files found under directory `top` (the image root's stand-in)."""
    base = os.fsencode(top)
    paths = [e.path for e in pack.entries if not e.device]

    def exists(rel: bytes) -> bool:
        return os.path.isfile(os.path.join(base, rel)) and not os.path.islink(
            os.path.join(base, rel))

    pack_root = _norm(root) if root else guess_root(paths, exists)
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
    return CheckResult(label or os.fsdecode(base), pack_root, found, missing,
                       sum(p.length for p in pieces),
                       sum(p.length for p in pieces if p.physical is None),
                       ascending_fraction(sweep), ascending_fraction(cold), seeks(cold),
                       seeks(sweep), span(pieces))


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


def check(target: str, pack: Pack, root: str | None = None) -> CheckResult:
    """`layout check`: a directory as it is, an image file through a read-only mount."""
    try:
        st = os.stat(target)
    except FileNotFoundError:
        raise NotFoundError(f"{target}: no such image or directory") from None
    if stat.S_ISDIR(st.st_mode):
        return check_dir(target, pack, root)
    if not stat.S_ISREG(st.st_mode):
        raise UsageError(f"{target} is neither an image file nor a directory")
    with mounted_ro(os.path.abspath(target)) as mnt:
        return check_dir(mnt, pack, root, label=target)


# --- build-ext4 ----------------------------------------------------------------------------


@dataclass(frozen=True)
class BuildOptions:
    src: str
    image: str
    size: int | None = None  # bytes; None: the tree's size with room to spare
    root: str | None = None  # the pack's directory that SRC stands for; None: guessed


@dataclass
class BuildResult:
    image: str
    size: int
    first_pass: int  # bytes of the pass-1 filesystem
    hot_files: int
    hot_bytes: int
    missing: int  # pack files not in the source
    nodes: dict[str, int] = field(default_factory=dict)  # how many of each kind copied
    before: CheckResult | None = None  # the pack's files in the source directory
    after: CheckResult | None = None  # ... in the new image
    seconds: float = 0.0


@dataclass
class _Scan:
    nodes: list[tree.Node]
    used: int  # bytes of blocks the tree needs

    @property
    def files(self) -> dict[bytes, tree.Node]:
        return {n.rel: n for n in self.nodes if n.kind == "file"}


def _scan(src: bytes) -> _Scan:
    nodes = list(tree.walk(src))
    used = sum(-(-n.st.st_size // BLOCK) * BLOCK + BLOCK for n in nodes)
    return _Scan(nodes, used)


def _tool(argv: list[str], what: str, timeout: float = 600.0) -> spawn.ToolResult:
    try:
        res = spawn.run_tool(argv, timeout, env={"LC_ALL": "C"})  # byte order: STAGING_PREFIX
    except FileNotFoundError:
        raise UnavailableError(f"{argv[0]} is not installed", "apt-get install e2fsprogs"
                               ) from None
    return res


def _must(res: spawn.ToolResult, what: str, ok: Sequence[int] = (0,)) -> None:
    if res.status not in ok:
        lines = [ln for ln in (res.stderr or res.stdout).splitlines() if ln.strip()]
        raise SystemStateError(f"{what} failed: {lines[-1] if lines else 'timed out'}")


def _hot(pack: Pack, scan: _Scan, src: bytes, root: str | None
         ) -> tuple[list[list[bytes]], bytes, int]:
    """Hot inodes in access order, each as the list of its hot names (hard links); the
    pack root used; how many pack files are not in the source."""
    files = scan.files
    paths = [e.path for e in pack.entries if not e.device]
    base = _norm(root) if root else guess_root(paths, lambda rel: rel in files)
    by_inode: dict[tuple[int, int], list[bytes]] = {}
    missing = 0
    for rel in relative_paths(pack, base)[0]:
        node = files.get(rel)
        if node is None:
            missing += 1
            continue
        by_inode.setdefault((node.st.st_dev, node.st.st_ino), []).append(rel)
    return list(by_inode.values()), base, missing


def _stage(hot: list[list[bytes]], scan: _Scan, src: bytes, stage_root: bytes,
           staging: bytes) -> int:
    """HOT, what pass 1 is made from: the hot files under numbered names in `staging`, in
    access order (their data lands first, in that order), and the whole tree's skeleton:
    every directory, every other node (symlinks, devices, FIFOs) as it is, and every
    regular file as an empty placeholder, hard links kept. So every directory is complete
    (and compact) in pass 1, next to the hot data: pass 2 only fills placeholders and
    renames hot files over theirs, which rewrites a directory entry in place instead of
    growing the directory somewhere far away. Returns the hot bytes."""
    os.mkdir(os.path.join(stage_root, staging), 0o700)
    hot_names = {name for names in hot for name in names}
    placeholders: dict[tuple[int, int], bytes] = {}
    for node in scan.nodes:
        if not node.rel:
            continue
        s, d = tree.join(src, node.rel), os.path.join(stage_root, node.rel)
        if node.kind == "dir":
            os.mkdir(d, 0o700)
        elif node.kind == "file":
            key = (node.st.st_dev, node.st.st_ino)
            if key in placeholders and node.rel not in hot_names:
                os.link(placeholders[key], d)  # a cold hard link: one inode in pass 1 too
                continue
            os.close(os.open(d, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
            placeholders.setdefault(key, d)
        else:
            tree.make_node(s, d, node.st)
        tree.copy_meta(s, d, node.st)
    for node in reversed(scan.nodes):
        if node.kind == "dir" and node.rel:
            tree.copy_meta(tree.join(src, node.rel), os.path.join(stage_root, node.rel), node.st)
    nodes = scan.files
    total = 0
    width = _width(hot)
    for rank, names in enumerate(hot):
        node = nodes[names[0]]
        dst = os.path.join(stage_root, staging, b"%0*d" % (width, rank))
        tree.copy_data(os.path.join(src, names[0]), dst)
        tree.copy_meta(os.path.join(src, names[0]), dst, node.st)
        total += node.st.st_size
    return total


def _width(hot: list[list[bytes]]) -> int:
    return max(8, len(str(len(hot))))


def _first_pass_size(hot_bytes: int, hot_count: int, scan: _Scan) -> int:
    """Hot data, the skeleton's directory blocks and inode tables' worth of room."""
    entries = sum(8 + len(os.path.basename(n.rel)) + 4 for n in scan.nodes)
    dirs = sum(1 for n in scan.nodes if n.kind == "dir")
    blocks = hot_bytes / BLOCK * 1.05 + hot_count + entries / BLOCK * 1.5 + dirs + 64
    size = int(blocks * BLOCK) + 16 * MiB
    return -(-size // MiB) * MiB


def _inodes_per_group(final: int, items: int) -> int:
    groups = -(-final // GROUP_BYTES)
    ipg = max(GROUP_BYTES // INODE_RATIO, -(-int(items * 1.2) // groups))
    ipg = -(-ipg // 16) * 16  # whole inode-table blocks (16 inodes of 256 bytes)
    if ipg > MAX_INODES_PER_GROUP:
        raise UsageError(f"{items} files do not fit in an ext4 of this size",
                         "give a larger --size")
    return ipg


def _mkfs_first_pass(image: str, stage_root: bytes, size: int, ipg: int, final: int) -> int:
    """mke2fs -d HOT into the image, growing the first pass until the hot files fit.

    packed_meta_blocks keeps the bitmaps and the inode table in one block at the start
    (else small hot files fill the holes flex_bg leaves between them, away from the rest);
    resize= reserves descriptor blocks for the final size, so growing moves nothing.
    """
    for _ in range(6):
        groups = -(-size // GROUP_BYTES)
        os.truncate(image, size)
        res = _tool(["mke2fs", "-q", "-F", "-t", "ext4", "-T", "default", "-b", str(BLOCK),
                     "-O", "^has_journal", "-N", str(ipg * groups),
                     "-E", f"nodiscard,packed_meta_blocks=1,resize={final // BLOCK}",
                     "-d", os.fsdecode(stage_root), image, f"{size // 1024}k"],
                    "mke2fs")
        if res.status == 0:
            return size
        log.debug("mke2fs at %d bytes: %s", size, res.stderr.strip())
        os.truncate(image, 0)
        size = -(-int(size * 1.5) // MiB) * MiB
    _must(res, "mke2fs -d (the hot files' first pass)")
    return size


def _grow(image: str, final: int) -> None:
    os.truncate(image, final)
    _must(_tool(["resize2fs", image, f"{final // 1024}k"], "resize2fs"), "resize2fs")
    _must(_tool(["tune2fs", "-O", "has_journal", image], "tune2fs"), "adding the journal")


def _place_hot(src: bytes, mnt: bytes, scan: _Scan, hot: list[list[bytes]],
               staging: bytes) -> None:
    """Rename each staged hot file over its first name's placeholder (the data stays where
    pass 1 put it), give it the source's metadata again (mke2fs -d keeps whole seconds
    only), and link its other hot names over theirs."""
    files = scan.files
    width = _width(hot)
    for rank, names in enumerate(hot):
        staged = os.path.join(mnt, staging, b"%0*d" % (width, rank))
        first = os.path.join(mnt, names[0])
        os.rename(staged, first)
        tree.copy_meta(os.path.join(src, names[0]), first, files[names[0]].st)
        for other in names[1:]:
            os.unlink(os.path.join(mnt, other))
            os.link(first, os.path.join(mnt, other))
    os.rmdir(os.path.join(mnt, staging))


def _copy_rest(src: bytes, mnt: bytes, scan: _Scan, hot: list[list[bytes]]) -> dict[str, int]:
    """Fill the placeholders of everything that is not hot (once per inode: hard links
    share it since pass 1), hot files' cold names linked to them, metadata on every
    node; directories' metadata last, deepest first (a rename changes their mtime)."""
    hot_names = {name for names in hot for name in names}
    hot_first: dict[tuple[int, int], bytes] = {}
    for names in hot:
        st = scan.files[names[0]].st
        hot_first[(st.st_dev, st.st_ino)] = names[0]
    filled: set[tuple[int, int]] = set()
    counts: dict[str, int] = {}
    for node in scan.nodes:
        counts[node.kind] = counts.get(node.kind, 0) + 1
        if node.kind == "dir" or node.rel in hot_names:
            continue
        s, d = tree.join(src, node.rel), tree.join(mnt, node.rel)
        key = (node.st.st_dev, node.st.st_ino)
        if node.kind == "file" and key in hot_first:  # a cold name of a hot file
            os.unlink(d)
            os.link(os.path.join(mnt, hot_first[key]), d)
            continue
        if node.kind == "file" and key not in filled:
            tree.copy_data(s, d, existing=True)
            filled.add(key)
        tree.copy_meta(s, d, node.st)
    for node in reversed(scan.nodes):
        if node.kind == "dir":
            tree.copy_meta(tree.join(src, node.rel), tree.join(mnt, node.rel), node.st)
    return counts


def _fsck(image: str) -> None:
    _must(_tool(["e2fsck", "-f", "-n", image], "e2fsck"), "e2fsck -fn of the new image")


def _image_path(path: str) -> str:
    """IMAGE, checked before any work: a new file in an existing directory."""
    image = os.path.abspath(path)
    if os.path.lexists(image):
        raise ExistsError(f"{path} already exists", "remove it or choose another name")
    if not os.path.isdir(os.path.dirname(image)):
        raise NotFoundError(f"directory {os.path.dirname(image)} does not exist")
    return image


def _publish(building: str, image: str) -> None:
    """The finished, verified image appears at IMAGE in one step (a hard link: never over
    a file that appeared there meanwhile); the building name goes with the transaction."""
    os.chmod(building, 0o644)
    try:
        os.link(building, image)
    except FileExistsError:
        raise ExistsError(f"{image} appeared while the image was built",
                          "the new image was not kept; choose another name") from None


def build_ext4(pack: Pack, opts: BuildOptions) -> BuildResult:
    """`layout build-ext4`: a verified ext4 image of SRC with the pack's files first.

    The image is built under a hidden name beside IMAGE, journaled, and linked to IMAGE
    only once verified: an interrupt, an error or a SIGKILL followed by `restore` leaves
    no half-built image at IMAGE (which would then refuse a rerun)."""
    system.require_root("building an ext4 image (owners, loop device, mount)")
    src = _norm(os.path.abspath(opts.src))
    if not os.path.isdir(src) or os.path.islink(src):
        raise NotFoundError(f"{opts.src} is not a directory")
    t0 = time.monotonic()
    scan = _scan(src)
    hot, base, missing = _hot(pack, scan, src, opts.root)
    final = opts.size or -(-int(scan.used * 1.25 + 64 * MiB) // (4 * MiB)) * 4 * MiB
    image = _image_path(opts.image)
    folder, name = os.path.split(image)
    building = os.path.join(folder, f".{name}.building-{secrets.token_hex(4)}")
    with system.Transaction("layout-image") as tx:
        tx.apply(system.MadeFile(building))
        result = _build(pack, opts, src, scan, hot, base, missing, final, building)
        _publish(building, image)
    result.image = image
    result.seconds = time.monotonic() - t0
    return result


def _build(pack: Pack, opts: BuildOptions, src: bytes, scan: _Scan, hot: list[list[bytes]],
           base: bytes, missing: int, final: int, image: str) -> BuildResult:
    ipg = _inodes_per_group(final, len(scan.nodes))
    staging = STAGING_PREFIX + secrets.token_hex(4).encode()
    with system.Transaction("layout-build") as tx:
        work = os.fsencode(tx.apply(system.PrivateDir(str(system.work_root()), "layout-")))
        stage_root = os.path.join(work, b"hot")
        os.mkdir(stage_root, 0o700)
        hot_bytes = _stage(hot, scan, src, stage_root, staging)
        first = _mkfs_first_pass(image, stage_root, _first_pass_size(hot_bytes, len(hot), scan),
                                 ipg, final)
        if final < first:
            raise UsageError(f"--size {final} is smaller than the hot files need ({first})")
        shutil.rmtree(stage_root)
        _grow(image, final)
        mnt = os.path.join(work, b"mnt")
        tx.apply(system.MadeDir(os.fsdecode(mnt)))
        loop = tx.apply(system.LoopDevice(image))
        tx.apply(system.Mount(loop, os.fsdecode(mnt), "ext4"))
        _place_hot(src, mnt, scan, hot, staging)
        nodes = _copy_rest(src, mnt, scan, hot)
        os.sync()
    _fsck(image)
    result = BuildResult(image, final, first, len(hot), hot_bytes, missing, nodes)
    extra = frozenset() if os.path.lexists(os.path.join(src, b"lost+found")) else frozenset(
        {b"lost+found"})
    with mounted_ro(image) as ro:
        problems = tree.compare(src, os.fsencode(ro), extra)
        if problems:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            log.debug("differences: %s", problems)
            raise SystemStateError(f"the new image differs from {opts.src}: {problems[0]}{more}")
        result.after = check_dir(ro, pack, base, label=opts.image)
    try:
        result.before = check_dir(src, pack, base, label=opts.src)
    except BackburnerError as err:
        log.debug("no before figures: %s", err)
    return result


def describe_check(c: CheckResult) -> str:
    """One line per target for `layout check` and `build-ext4`."""
    placed = "" if not c.unplaced else f", {human_size(c.unplaced)} not placeable"
    return (f"{c.target}: {c.files} files ({c.missing} missing), {human_size(c.bytes)}"
            f"{placed}; contiguous {fmt_pct(round(c.contiguous, 3))}, in access order "
            f"{fmt_pct(round(c.in_order, 3))}; seeks: cold start {c.seeks_cold}, "
            f"with replay {c.seeks_sweep}; span {human_size(c.span)}")


__all__ = ["BuildOptions", "BuildResult", "CheckResult", "FORMATS", "build_ext4", "check",
           "check_dir", "describe_check", "emit", "guess_root", "order", "relative_paths"]
