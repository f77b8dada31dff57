"""`layout build-ext4`: a verified ext4 image of a tree whose first blocks hold what a
pack's start reads: the hot files' inodes, their directories and their data, in the
order the start needs them.

The two-pass method. Pass 1: ``mke2fs -T default -d HOT`` makes a filesystem just big
enough for the hot region (``-T default`` keeps a small first pass off the
small-filesystem profile; the inode count is that of the final size, and the journal is
added only after growing, so it does not land between the hot files). HOT holds only
what the start touches (`hotplan`): the root's entries as empty placeholders and one
staging directory (`STAGING_PREFIX`) of numbered entries in first-use order, each a hot
directory (every ancestor of a hot file, with all its entries as placeholders, so its
blocks are final and the inodes a listing looks at are beside the hot ones) or a hot
file with its data. mke2fs -d fills a directory in the order of its names, so inodes and
blocks are allocated in that order: the hot inodes densely in the first inode-table
blocks, each directory's blocks right before the data of the first file the start opens
in it. ``resize2fs`` grows it to the full size. Pass 2 mounts it (loop device and mount
through `system`, in a transaction), renames each staged directory and file over its
placeholder (a rename moves no data, and a name of the same length takes the freed slot:
no directory grows), and copies the rest in, after the hot region, with owners, modes,
times, xattrs, symlinks, device nodes and hard links. Then ``e2fsck -fn`` must find it
clean and a read-only mount must compare equal to the source, byte for byte.

A pack recorded with --lookups also says which directories the start lists or searches
and in which order it touches everything (`hotorder`): those directories are hot too,
everything is placed where it is first touched, and a file read in pieces out of order
is laid out piece by piece (donors staged in pass 1, the pieces moved into them in pass
2: `ext4move`). The source may be any tree: a mounted ext4 image (its root's lost+found
is mke2fs's own in pass 1), a mounted xfs.

With ``hot_region="end"`` (a DVD's fast outer edge) pass 1 is the full-size filesystem
without flex_bg instead, each block group with its own inode table, and the hot tree is
made in its last groups by debugfs (`ext4end`): the hot inodes in the table right before
the hot directories and data, not at the start of the image.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import time
from dataclasses import dataclass, field

from .. import system
from ..base.errors import BackburnerError, ExistsError, NotFoundError, SystemStateError, UsageError
from ..base.quantities import MiB
from . import ext4end, ext4move, hotorder, hotplan, tree
from .e2tools import BLOCK, must, tool
from .ext4mkfs import fsck, grow, inodes_per_group, mkfs_first_pass
from .layout import (
    DEFAULT_PROFILE,
    CheckResult,
    check_dir,
    guess_root,
    mounted_ro,
    norm_root,
    relative,
)
from .pack import Pack
from .ranges import Ranges, merge_ranges

log = logging.getLogger(__name__)

#: The staging directory of pass 1. mke2fs -d fills a directory in the order of its names
#: (byte order, under LC_ALL=C), so this one, whose first byte sorts after any name's,
#: comes after the root's placeholders (which take inodes, no blocks) and its numbered
#: entries fill the hot region in rank order.
STAGING_PREFIX = b"\xff.backburner-hot-"


HOT_REGIONS = ("start", "end")


@dataclass(frozen=True)
class BuildOptions:
    src: str
    image: str
    size: int | None = None  # bytes; None: the tree's size with room to spare
    root: str | None = None  # the pack's directory that SRC stands for; None: guessed
    hot_region: str = "start"  # or "end": the medium's end (a disc's fast outer edge)
    used_ranges: bool = True  # large hot files: only what the start read in the region


@dataclass
class BuildResult:
    image: str
    size: int
    first_pass: int  # bytes of the pass-1 filesystem
    hot_files: int
    hot_bytes: int
    missing: int  # pack files not in the source
    nodes: dict[str, int] = field(default_factory=dict)  # how many of each kind copied
    region_at: int | None = None  # hot_region "end": the byte the hot region starts at
    split_files: int = 0  # hot files in pieces: only what the start read is hot
    split_out: int = 0  # bytes of theirs left out of the hot region
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


def _hot(pack: Pack, scan: _Scan, src: bytes, root: str | None
         ) -> tuple[list[list[bytes]], list[Ranges], bytes, int, dict[int, int]]:
    """Hot inodes in access order, each as the list of its hot names (hard links) and the
    ranges the start read of it; the pack root used; how many pack files are not in the
    source; each entry's index in the hot inodes' list."""
    files = scan.files
    paths = [e.path for e in pack.entries if not e.device]
    base = norm_root(root) if root else guess_root(paths, lambda rel: rel in files)
    by_inode: dict[tuple[int, int], list[bytes]] = {}
    ranges: dict[tuple[int, int], list[tuple[int, int]]] = {}
    missing: set[bytes] = set()
    key_of: dict[int, tuple[int, int]] = {}
    for i, e in enumerate(pack.entries):
        rel = None if e.device else relative(e.path, base)
        if rel is None:
            continue
        node = files.get(rel)
        if node is None:
            missing.add(rel)
            continue
        key = (node.st.st_dev, node.st.st_ino)
        names = by_inode.setdefault(key, [])
        if rel not in names:
            names.append(rel)
        ranges.setdefault(key, []).extend(e.ranges)
        key_of[i] = key
    index = {k: n for n, k in enumerate(by_inode)}
    return (list(by_inode.values()), [merge_ranges(ranges[k]) for k in by_inode], base,
            len(missing), {i: index[k] for i, k in key_of.items()})


def _children(scan: _Scan) -> dict[bytes, list[tree.Node]]:
    out: dict[bytes, list[tree.Node]] = {}
    for node in scan.nodes:
        if node.rel:
            out.setdefault(os.path.dirname(node.rel), []).append(node)
    return out


#: The root's directory that mke2fs makes itself (and e2fsck wants): pass 1 has no
#: placeholder for it, pass 2 fills in the source's (an ext4 image's root holds one).
LOST_FOUND = b"lost+found"


def _made_by_mkfs(node: tree.Node) -> bool:
    return node.rel == LOST_FOUND and node.kind == "dir"


def _placeholders(src: bytes, children: list[tree.Node], into: bytes) -> None:
    """A hot directory's entries as pass 1 holds them: every file and every subdirectory
    an empty file (pass 2 fills it, renames a hot file or directory over it, or makes the
    cold directory in its place, unless the end layout's pass 1 made it: a name of the
    same length takes the same slot, so the directory never grows), other nodes
    (symlinks, devices, FIFOs, sockets) as they are; none for the root's lost+found,
    which mke2fs makes."""
    for node in children:
        if _made_by_mkfs(node):
            continue
        d = os.path.join(into, os.path.basename(node.rel))
        if node.kind in ("dir", "file"):
            os.close(os.open(d, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
        else:
            tree.make_node(tree.join(src, node.rel), d, node.st)


def _stage(plan: hotplan.Plan, scan: _Scan, src: bytes, stage_root: bytes,
           staging: bytes) -> int:
    """HOT, what pass 1 is made from: the root's entries as placeholders and, in the
    staging directory, the plan's items under their rank names: each hot directory with
    its entries as placeholders, each directory only looked at empty, each hot file with
    its data, each piece of a scattered file as a donor of its length and a scattered
    file's reservation as one block (see `hotplan`, `ext4move`; a donor's bytes are never
    read: the piece's are copied into its blocks in pass 2, so they are a filler that is
    not zero, which mke2fs would leave as a hole). Returns the hot bytes."""
    children = _children(scan)
    _placeholders(src, children.get(b"", []), stage_root)
    os.mkdir(os.path.join(stage_root, staging), 0o700)
    nodes = scan.files
    total = 0
    for rank, item in enumerate(plan.items):
        dst = os.path.join(stage_root, staging, plan.name(rank))
        if item.is_dir:
            os.mkdir(dst, 0o700)
            if not item.bare:
                _placeholders(src, children.get(item.rel, []), dst)
            continue
        if item.reserve or item.piece is not None:
            length = BLOCK if item.reserve else min(
                item.piece[1], nodes[item.rel].st.st_size - item.piece[0])
            _filler(dst, -(-length // BLOCK) * BLOCK)
            total += 0 if item.reserve else length
            continue
        tree.copy_data(os.path.join(src, item.rel), dst)
        total += nodes[item.rel].st.st_size
    return total


def _filler(path: bytes, length: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        chunk = b"\xff" * min(length, 1 << 20)
        done = 0
        while done < length:
            done += os.write(fd, chunk[:length - done])
    finally:
        os.close(fd)


def _cold_dirs(plan: hotplan.Plan, scan: _Scan, staging: bytes) -> list[bytes]:
    """The placeholders of cold directories in the staged tree (the root's, and each hot
    directory's under its rank name)."""
    children = _children(scan)
    staged = {item.rel for item in plan.items}
    out = [n.rel for n in children.get(b"", []) if n.kind == "dir" and n.rel not in staged
           and not _made_by_mkfs(n)]
    for rank, item in enumerate(plan.items):
        if item.is_dir and not item.bare:
            out += [os.path.join(staging, plan.name(rank), os.path.basename(n.rel))
                    for n in children.get(item.rel, [])
                    if n.kind == "dir" and n.rel not in staged]
    return out


def _first_pass_size(plan: hotplan.Plan, hot_bytes: int, scan: _Scan) -> int:
    """Hot data, the hot directories' blocks and the inode tables' worth of room."""
    children = _children(scan)
    entries = sum(8 + len(os.path.basename(n.rel)) + 4
                  for d in plan.dirs for n in children.get(d, []))
    entries += len(plan.items) * (8 + plan.width() + 4)
    blocks = (hot_bytes / BLOCK * 1.05 + len(plan.items) + entries / BLOCK * 1.5
              + len(plan.dirs) + 64)
    size = int(blocks * BLOCK) + 16 * MiB
    return -(-size // MiB) * MiB


def _image_rel(staged: bytes, plan: hotplan.Plan, staging: bytes) -> bytes:
    """Where a path of the staged tree ends up in the image."""
    parts = staged.split(b"/", 2)
    if parts[0] != staging or len(parts) < 2:
        return staged
    base = plan.items[int(parts[1])].rel
    return os.path.join(base, parts[2]) if len(parts) > 2 else base


def _place_hot(tx: system.Transaction, src: bytes, mnt: bytes, device: str, scan: _Scan,
               plan: hotplan.Plan, hot: list[list[bytes]], staging: bytes) -> None:
    """In rank order (a directory before anything in it): rename each staged hot directory
    over its placeholder, and each staged hot file over its first name's placeholder (no
    data moves), give the file the source's metadata (mke2fs -d keeps whole seconds only)
    and link its other hot names over theirs. A scattered file is written whole into its
    placeholder (after the hot region), then put together from its donors (`ext4move`)."""
    files = scan.files
    scattered: dict[int, list[ext4move.Piece]] = {}
    reserves: dict[int, bytes] = {}
    for rank, item in enumerate(plan.items):
        staged = os.path.join(mnt, staging, plan.name(rank))
        target = os.path.join(mnt, item.rel)
        if item.is_dir:
            if item.rel == LOST_FOUND:
                os.rmdir(target)  # mke2fs's own, empty
            else:
                os.unlink(target)
            os.rename(staged, target)
            continue
        assert item.hot is not None
        if item.reserve:
            reserves[item.hot] = staged
            continue
        if item.piece is not None:
            if item.hot not in scattered:
                tree.copy_data(os.path.join(src, item.rel), target, existing=True)
                _link_others(mnt, target, hot[item.hot])
            off, ln = item.piece
            scattered.setdefault(item.hot, []).append(
                ext4move.Piece(staged, off // BLOCK, -(-min(ln, files[item.rel].st.st_size - off)
                                                       // BLOCK)))
            continue
        os.rename(staged, target)
        tree.copy_meta(os.path.join(src, item.rel), target, files[item.rel].st)
        _link_others(mnt, target, hot[item.hot])
    ext4move.assemble(tx, mnt, device, [
        ext4move.Scattered(os.path.join(mnt, hot[i][0]), tuple(ps), reserves.get(i))
        for i, ps in scattered.items()], os.path.join(mnt, staging))
    for i in scattered:
        rel = hot[i][0]
        tree.copy_meta(os.path.join(src, rel), os.path.join(mnt, rel), files[rel].st)


def _link_others(mnt: bytes, target: bytes, names: list[bytes]) -> None:
    for other in names[1:]:
        os.unlink(os.path.join(mnt, other))
        os.link(target, os.path.join(mnt, other))


def _replace_with_link(existing: bytes, new: bytes) -> None:
    if os.path.lexists(new):
        os.unlink(new)
    os.link(existing, new)


def _copy_rest(src: bytes, mnt: bytes, scan: _Scan, plan: hotplan.Plan,
               hot: list[list[bytes]], stand_ins: frozenset[bytes] = frozenset()
               ) -> dict[str, int]:
    """Everything that is not hot, in the tree's order (a directory before its contents):
    a cold directory made (over its placeholder, if it is in a hot directory), a cold file
    filled (its placeholder, or a new file) once per inode, its other names and the hot
    files' cold names linked; metadata on every node, directories' last, deepest first
    (a rename or a new entry changes their mtime)."""
    hot_names = {name for names in hot for name in names}
    first: dict[tuple[int, int], bytes] = {}
    for names in hot:
        st = scan.files[names[0]].st
        first[(st.st_dev, st.st_ino)] = os.path.join(mnt, names[0])
    counts: dict[str, int] = {}
    for node in scan.nodes:
        counts[node.kind] = counts.get(node.kind, 0) + 1
        if node.rel in plan.dirs or node.rel in hot_names:
            continue
        s, d = tree.join(src, node.rel), tree.join(mnt, node.rel)
        if node.kind == "dir":
            if os.path.lexists(d) and not os.path.isdir(d):
                os.unlink(d)
            if not os.path.lexists(d):
                os.mkdir(d, 0o700)
            continue
        key = (node.st.st_dev, node.st.st_ino)
        if node.kind == "file" and key in first:
            _replace_with_link(first[key], d)
        elif node.kind == "file":
            tree.copy_data(s, d, existing=os.path.lexists(d))
            first[key] = d
        elif node.rel in stand_ins:  # an empty file where debugfs could not make it
            os.unlink(d)
            tree.make_node(s, d, node.st)
        elif not os.path.lexists(d):
            tree.make_node(s, d, node.st)
        tree.copy_meta(s, d, node.st)
    for node in reversed(scan.nodes):
        if node.kind == "dir":
            tree.copy_meta(tree.join(src, node.rel), tree.join(mnt, node.rel), node.st)
    return counts


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
    if opts.hot_region not in HOT_REGIONS:
        raise UsageError(f"unknown hot region {opts.hot_region!r}", "use start or end")
    system.require_root("building an ext4 image (owners, loop device, mount)")
    src = norm_root(os.path.abspath(opts.src))
    if not os.path.isdir(src) or os.path.islink(src):
        raise NotFoundError(f"{opts.src} is not a directory")
    t0 = time.monotonic()
    scan = _scan(src)
    hot, ranges, base, missing, hot_of = _hot(pack, scan, src, opts.root)
    sizes = [scan.files[names[0]].st.st_size for names in hot]
    how = hotorder.order(pack, base, {n.rel: n.kind for n in scan.nodes}, hot_of, sizes,
                         ranges, BLOCK, opts.used_ranges)
    final = opts.size or -(-int(scan.used * 1.25 + 64 * MiB) // (4 * MiB)) * 4 * MiB
    image = _image_path(opts.image)
    folder, name = os.path.split(image)
    building = os.path.join(folder, f".{name}.building-{secrets.token_hex(4)}")
    with system.Transaction("layout-image") as tx:
        tx.apply(system.MadeFile(building))
        result = _build(pack, opts, src, scan, hot, sizes, how, base, missing, final,
                        building)
        _publish(building, image)
    result.image = image
    result.seconds = time.monotonic() - t0
    return result


def _build(pack: Pack, opts: BuildOptions, src: bytes, scan: _Scan, hot: list[list[bytes]],
           sizes: list[int], how: hotorder.Order, base: bytes, missing: int, final: int,
           image: str) -> BuildResult:
    ipg = inodes_per_group(final, len(scan.nodes))
    staging = STAGING_PREFIX + secrets.token_hex(4).encode()
    with system.Transaction("layout-build") as tx:
        work = os.fsencode(tx.apply(system.PrivateDir(str(system.work_root()), "layout-")))
        stage_root = os.path.join(work, b"hot")
        os.mkdir(stage_root, 0o700)
        hp = hotplan.plan(hot, how.split, how.touches, how.pieces, sizes)
        hot_bytes = _stage(hp, scan, src, stage_root, staging)
        need = _first_pass_size(hp, hot_bytes, scan)
        if final < need:
            raise UsageError(f"--size {final} is smaller than the hot files need ({need})")
        fixups: list[ext4end.Fixup] = []
        stand_ins: frozenset[bytes] = frozenset()
        region_at = None
        if opts.hot_region == "end":
            session, region_at = ext4end.first_pass_at_end(
                image, stage_root, final, ipg, need, work, _cold_dirs(hp, scan, staging))
            fixups = session.fixups
            stand_ins = frozenset(_image_rel(p, hp, staging) for p in session.stand_ins)
            first = final
            must(tool(["tune2fs", "-O", "has_journal", image], "tune2fs"), "adding the journal",
         tool_name="tune2fs")
        else:
            first = mkfs_first_pass(image, stage_root, need, ipg, final)
            if final < first:
                raise UsageError(f"--size {final} is smaller than the hot files need ({first})")
            grow(image, final)
        shutil.rmtree(stage_root)
        mnt = os.path.join(work, b"mnt")
        tx.apply(system.MadeDir(os.fsdecode(mnt)))
        loop = tx.apply(system.LoopDevice(image))
        tx.apply(system.Mount(loop, os.fsdecode(mnt), "ext4"))
        ext4end.fix_names(mnt, staging, fixups)
        _place_hot(tx, src, mnt, loop, scan, hp, hot, staging)
        nodes = _copy_rest(src, mnt, scan, hp, hot, stand_ins)
        # only now: the staging directory grew block by block among the hot data, and
        # cold directories made while those blocks were free would have taken them
        os.rmdir(os.path.join(mnt, staging))
        os.sync()
    fsck(image)
    left_out = sum(n for i, ps in how.pieces.items()
                   for _, n in hotplan.unused(merge_ranges(ps), sizes[i]))
    result = BuildResult(image, final, first, len(hot), hot_bytes, missing, nodes, region_at,
                         len(how.pieces), left_out)
    extra = frozenset() if os.path.lexists(os.path.join(src, b"lost+found")) else frozenset(
        {b"lost+found"})
    with mounted_ro(image) as ro:
        problems = tree.compare(src, os.fsencode(ro), extra)
        if problems:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            log.debug("differences: %s", problems)
            raise SystemStateError(f"the new image differs from {opts.src}: {problems[0]}{more}")
        result.after = check_dir(ro, pack, base, label=opts.image, image=image,
                                 profile=DEFAULT_PROFILE)
    try:
        result.before = check_dir(src, pack, base, label=opts.src)
    except BackburnerError as err:
        log.debug("no before figures: %s", err)
    return result
