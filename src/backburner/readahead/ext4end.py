"""`layout build-ext4 --hot-region end`: the hot region in the last block groups, with its
inodes and directories beside its data, at the medium's fast end.

A DVD reads its outer edge 2.4 times as fast as its inner one, and the outer edge is the
end of the image. Hot data at the end is worth little if the inodes are still at the
start (every inode-table read a seek across the image), and mke2fs packs the inode
tables at the start with flex_bg and hands out the lowest free inode numbers. Without
flex_bg every block group holds its own bitmaps and inode table at its start, and
libext2fs (`ext2fs_new_inode`) looks for a new inode from its parent's group on, its
blocks from its group's first block on (`ext2fs_find_inode_goal`, `ext2fs_new_block3`).
So the first pass here is the full-size filesystem made empty by ``mke2fs -O ^flex_bg``,
and one ``debugfs -w`` session that

1. marks every free inode and block of the groups before the region's group in use
   (``seti``, ``setb``; the groups' INODE_UNINIT flags are cleared meanwhile, since the
   allocator clears an uninitialised group's bitmap when it looks at it);
2. makes the staged hot tree (`ext4image` stages it, `hotplan` orders it) with the
   commands ``mke2fs -d`` would run, in its order (names in byte order, depth first):
   its inodes fill the region group's inode table from its first block, its directories
   and data follow that table;
3. frees what step 1 marked and puts the flags back, so nothing else changed.

The root directory's inode (2) stays in group 0, but a mounted filesystem holds it; its
directory block is what a start reads, so `move_root_block` moves it to the block the
region starts with (a directory block's checksum does not depend on where it lies).

debugfs reads its commands a line at a time, with ``"..."`` quoting only: a name with a
newline or a carriage return cannot be spelt. Such a placeholder is made under a name of
the same length (`Fixup`) and renamed in the second pass (out and back, so the real name
takes the freed slot); a node debugfs cannot make (a socket, a symlink whose target
cannot be spelt) is an empty placeholder that the second pass replaces (`stand_ins`).
"""

from __future__ import annotations

import logging
import os
import re
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from ..base.errors import SystemStateError
from .e2tools import BLOCK, GROUP_BYTES, must, tool

log = logging.getLogger(__name__)

INODE_UNINIT, BLOCK_UNINIT, ITABLE_ZEROED = 1, 2, 4
_FLAG_NAMES = {"INODE_UNINIT": INODE_UNINIT, "BLOCK_UNINIT": BLOCK_UNINIT,
               "ITABLE_ZEROED": ITABLE_ZEROED}
_UNSPELLABLE = (b"\n", b"\r", b"\0")


# --- the groups of a new filesystem (pure) ---------------------------------------------------


@dataclass(frozen=True)
class Group:
    index: int
    first: int  # its first block
    flags: int
    free_blocks: tuple[tuple[int, int], ...]  # (first, count) runs
    free_inodes: tuple[tuple[int, int], ...]
    free_block_count: int  # as its descriptor says

    @property
    def blocks_free(self) -> int:
        return sum(n for _, n in self.free_blocks)

    @property
    def inodes_free(self) -> int:
        return sum(n for _, n in self.free_inodes)


def _runs(text: str) -> tuple[tuple[int, int], ...]:
    out = []
    for part in text.replace(" ", "").split(","):
        if not part:
            continue
        a, _, b = part.partition("-")
        out.append((int(a), int(b or a) - int(a) + 1))
    return tuple(out)


_GROUP = re.compile(r"^Group (\d+): \(Blocks (\d+)-\d+\)[^\[]*(?:\[(.*)\])?")
_COUNTS = re.compile(r"^\s+(\d+) free blocks, \d+ free inodes")


def parse_groups(dumpe2fs: str) -> list[Group]:
    """The groups of ``dumpe2fs`` output (LC_ALL=C): where each starts, its flags, its
    free blocks and inodes."""
    groups: list[Group] = []
    cur: dict = {}

    def close() -> None:
        if cur:
            groups.append(Group(cur["index"], cur["first"], cur["flags"],
                                cur.get("blocks", ()), cur.get("inodes", ()),
                                cur.get("count", 0)))

    for line in dumpe2fs.splitlines():
        m = _GROUP.match(line)
        if m:
            close()
            flags = sum(_FLAG_NAMES.get(f.strip(), 0) for f in (m.group(3) or "").split(","))
            cur = {"index": int(m.group(1)), "first": int(m.group(2)), "flags": flags}
            continue
        if not cur:
            continue
        if (c := _COUNTS.match(line)) is not None:
            cur["count"] = int(c.group(1))
        elif line.strip().startswith("Free blocks:"):
            cur["blocks"] = _runs(line.split(":", 1)[1])
        elif line.strip().startswith("Free inodes:"):
            cur["inodes"] = _runs(line.split(":", 1)[1])
    close()
    if not groups:
        raise SystemStateError("dumpe2fs listed no block groups")
    return groups


def region_group(groups: list[Group], blocks: int, inodes: int) -> int:
    """The last group from which on the free blocks and inodes hold what the region needs
    (0 when only the whole filesystem does)."""
    have_b = have_i = 0
    for g in reversed(groups):
        have_b += g.blocks_free
        have_i += g.inodes_free
        if have_b >= blocks and have_i >= inodes:
            return g.index
    return 0


# --- the debugfs commands (pure) -------------------------------------------------------------


def spellable(name: bytes) -> bool:
    return not any(b in name for b in _UNSPELLABLE)


def quote(name: bytes) -> bytes:
    """A name as one debugfs argument (its only quoting: "..." with "" for a quote)."""
    assert spellable(name), name
    return b'"' + name.replace(b'"', b'""') + b'"'


def substitute(name: bytes, taken: set[bytes]) -> bytes:
    """A spellable name of the same length, not in `taken` (a directory's other names):
    the slot it takes is the real name's."""
    bad = [i for i, b in enumerate(name) if bytes([b]) in _UNSPELLABLE]
    alphabet = b"_0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    for n in range(len(alphabet) ** len(bad)):
        out = bytearray(name)
        for i in bad:
            n, digit = divmod(n, len(alphabet))
            out[i] = alphabet[digit]
        if bytes(out) not in taken:
            return bytes(out)
    raise SystemStateError(f"no spellable stand-in for the name {name!r}")


@dataclass(frozen=True)
class Fixup:
    """A placeholder made as `spelt` in directory `parent` (a path of the staged tree,
    b"" its root) that the second pass renames to `real`."""

    parent: bytes
    spelt: bytes
    real: bytes


@dataclass(frozen=True)
class Event:
    """One step of populating the staged tree, in mke2fs -d's order: "dir" (make and enter
    it), "up" (leave it), "file" (`host`: the staged file to copy, `size` its bytes: an
    empty one is a placeholder, made from the one empty file), "symlink" (`target`),
    "fifo", "char", "block" (`rdev`), "other" (what debugfs cannot make)."""

    kind: str
    name: bytes = b""
    host: bytes = b""
    size: int = 0
    target: bytes = b""
    rdev: int = 0


@dataclass
class Script:
    commands: list[bytes] = field(default_factory=list)
    fixups: list[Fixup] = field(default_factory=list)
    stand_ins: list[bytes] = field(default_factory=list)  # paths of the staged tree
    inodes: int = 0  # made by the population

    def add(self, *words: bytes) -> None:
        self.commands.append(b" ".join(words))

    def text(self) -> bytes:
        return b"".join(c + b"\n" for c in self.commands)


def populate(events: Iterable[Event], empty: bytes, script: Script) -> None:
    """The debugfs commands that make the staged tree (`events`) in the open filesystem's
    root; `empty` is an empty host file (every placeholder is a copy of it)."""
    path: list[bytes] = []
    names: list[set[bytes]] = [set()]
    for ev in events:
        if ev.kind == "up":
            script.add(b"cd", b"..")
            path.pop()
            names.pop()
            continue
        name = ev.name
        if not spellable(name):
            real = name
            name = substitute(name, names[-1] | {real})
            script.fixups.append(Fixup(b"/".join(path), name, real))
        names[-1].add(name)
        script.inodes += 1
        q = quote(name)
        if ev.kind == "dir":
            script.add(b"mkdir", q)
            script.add(b"cd", q)
            path.append(name)
            names.append(set())
        elif ev.kind == "file":
            script.add(b"write", quote(ev.host if ev.size else empty), q)
        elif ev.kind == "symlink" and spellable(ev.target) and ev.target:
            script.add(b"symlink", q, quote(ev.target))
        elif ev.kind == "fifo":
            script.add(b"mknod", q, b"p")
        elif ev.kind in ("char", "block"):
            script.add(b"mknod", q, ev.kind[0].encode(), b"%d" % os.major(ev.rdev),
                       b"%d" % os.minor(ev.rdev))
        else:  # a socket, or a symlink whose target debugfs cannot spell
            script.add(b"write", quote(empty), q)
            script.stand_ins.append(b"/".join([*path, name]))


def reserve(groups: list[Group], region: int, script: Script, release: bool = False) -> None:
    """Mark in use (or, with `release`, free again) every free inode and block of the
    groups before `region`, and clear (put back) their INODE_UNINIT flags."""
    for g in groups[:region]:
        for first, n in g.free_inodes:
            script.add(b"freei" if release else b"seti", b"<%d>" % first, b"%d" % n)
        for first, n in g.free_blocks:
            script.add(b"freeb" if release else b"setb", b"%d" % first, b"%d" % n)
        if g.flags & INODE_UNINIT:
            flags = g.flags if release else g.flags & ~INODE_UNINIT
            script.add(b"set_bg", b"%d" % g.index, b"flags", b"%d" % flags)
            if release:
                script.add(b"set_bg", b"%d" % g.index, b"checksum", b"calc")


def cold_dirs(paths: Iterable[bytes], script: Script) -> None:
    """Each placeholder of a cold directory (a path of the staged tree) made a directory:
    the kernel would give the directory it makes in the second pass an inode in another
    group (Orlov looks for groups with more free inodes than the region's), far from the
    hot ones a start that stats it reads beside; made here, after the hot tree, it takes
    the placeholder's inode and a block right after the hot data."""
    made = False
    for path in paths:
        parent, name = os.path.split(path)
        if not spellable(name):
            continue  # a fixup's: made in the second pass
        script.add(b"cd", quote(b"/" + parent))
        script.add(b"rm", quote(name))
        script.add(b"mkdir", quote(name))
        made = True
    if made:
        script.add(b"cd", b"/")


def first_pass(groups: list[Group], region: int, events: Iterable[Event], empty: bytes,
               dirs: Iterable[bytes] = ()) -> tuple[Script, int | None]:
    """The whole session: the region's first free block kept for the root directory's
    block (returned; None when the region is group 0, where the root is already), the
    reservation, the staged tree and its cold directories (`dirs`, see `cold_dirs`), the
    release."""
    script = Script()
    root_block = None
    if region > 0:
        root_block = groups[region].free_blocks[0][0]
        script.add(b"setb", b"%d" % root_block)
        # the block bitmap of a BLOCK_UNINIT group is not written: make it a real one
        g = groups[region]
        if g.flags & BLOCK_UNINIT:
            script.add(b"set_bg", b"%d" % region, b"flags", b"%d" % (g.flags & ~BLOCK_UNINIT))
            script.add(b"set_bg", b"%d" % region, b"checksum", b"calc")
    reserve(groups, region, script)
    populate(events, empty, script)
    cold_dirs(dirs, script)
    reserve(groups, region, script, release=True)
    return script, root_block


def move_root(old: int, new: int, groups: list[Group], per_group: int) -> Script:
    """After the first session (with the old block's bytes copied to `new`): the root
    directory's first block remapped to `new`, the old one freed, and both groups' free
    counts (their descriptors' `groups`, read after the session) made true again."""
    script = Script()
    script.add(b"set_inode_field", b"<2>", b"bmap[0]", b"%d" % new)
    script.add(b"freeb", b"%d" % old)
    g_old, g_new = old // per_group, new // per_group
    for g, delta in ((g_old, 1), (g_new, -1)):
        script.add(b"set_bg", b"%d" % g, b"free_blocks_count",
                   b"%d" % (groups[g].free_block_count + delta))
        script.add(b"set_bg", b"%d" % g, b"checksum", b"calc")
    return script


# --- running it ---------------------------------------------------------------------------


def _debugfs(image: str, script: Script, work: bytes, what: str) -> str:
    """Run a debugfs session; its errors (debugfs exits 0 whatever a command did) are
    whatever it wrote to stderr besides its banner. Returns them, "" when none."""
    path = os.path.join(work, b"debugfs.cmds")
    with open(path, "wb") as f:
        f.write(script.text())
    res = tool(["debugfs", "-w", "-f", os.fsdecode(path), image], what, errors="replace")
    must(res, what)
    errors = [ln for ln in res.stderr.splitlines()
              if ln.strip() and not ln.startswith("debugfs ")]
    return errors[0] if errors else ""


def _groups(image: str) -> list[Group]:
    res = tool(["dumpe2fs", image], "dumpe2fs")
    must(res, "dumpe2fs of the first pass")
    return parse_groups(res.stdout)


def first_pass_at_end(image: str, stage_root: bytes, final: int, ipg: int, need: int,
                    work: bytes, dirs: Iterable[bytes] = ()) -> tuple[Script, int]:
    """Pass 1 for ``hot_region="end"`` (see `ext4end`): the full-size filesystem without
    flex_bg, the staged tree made in its last groups that hold it, the root directory's
    block moved to the region's first block. Grows the region until the tree fits.
    Returns the session (its fixups and stand-ins) and the region's first byte."""
    empty = os.path.join(work, b"empty")
    os.close(os.open(empty, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600))
    staged = list(events(stage_root))
    groups_n = -(-final // GROUP_BYTES)
    region = groups_n
    while True:  # from one group earlier each time: ends at group 0 (no reservation)
        os.truncate(image, 0)
        os.truncate(image, final)
        must(tool(["mke2fs", "-q", "-F", "-t", "ext4", "-T", "default", "-b", str(BLOCK),
                   "-O", "^has_journal,^flex_bg", "-N", str(ipg * groups_n),
                   "-E", "nodiscard", image, f"{final // 1024}k"], "mke2fs"),
             "mke2fs (the full-size first pass)")
        groups = _groups(image)
        region = min(region - 1, region_group(groups, need // BLOCK, len(staged) + 16))
        script, root_block = first_pass(groups, region, staged, empty, dirs)
        error = _debugfs(image, script, work, "debugfs (the hot files' first pass)")
        if "Could not allocate" in error and region > 0:
            log.debug("region from group %d too small: %s", region, error)
            continue
        if error:
            hint = "give a larger --size" if "Could not allocate" in error else None
            raise SystemStateError(f"debugfs (the hot files' first pass) failed: {error}", hint)
        if root_block is None:
            return script, groups[0].first * BLOCK
        _move_root(image, root_block, work)
        return script, root_block * BLOCK


def _move_root(image: str, new: int, work: bytes) -> None:
    """The root directory's block, made in group 0 by mke2fs, copied to the region's
    first block (kept free for it) and remapped there."""
    res = tool(["debugfs", "-R", "bmap <2> 0", image], "debugfs")
    must(res, "debugfs bmap of the root directory")
    old = int(res.stdout.split()[-1])
    fd = os.open(image, os.O_RDWR | os.O_CLOEXEC)
    try:
        data = os.pread(fd, BLOCK, old * BLOCK)
        if os.pwrite(fd, data, new * BLOCK) != BLOCK:
            raise SystemStateError("could not copy the root directory's block")
        os.fsync(fd)
    finally:
        os.close(fd)
    groups = _groups(image)
    error = _debugfs(image, move_root(old, new, groups, GROUP_BYTES // BLOCK), work,
                     "debugfs (moving the root directory's block)")
    if error:
        raise SystemStateError(f"moving the root directory's block failed: {error}")


def fix_names(mnt: bytes, staging: bytes, fixups: list[Fixup]) -> None:
    """The placeholders debugfs could not name, renamed out and back in: the real name
    takes the slot the stand-in name (of the same length) left."""
    for i, f in enumerate(fixups):
        parent = os.path.join(mnt, f.parent) if f.parent else mnt
        tmp = os.path.join(mnt, staging, b"fix-%d" % i)
        os.rename(os.path.join(parent, f.spelt), tmp)
        os.rename(tmp, os.path.join(parent, f.real))


# --- the staged tree as events -----------------------------------------------------------


def events(stage_root: bytes) -> Iterator[Event]:
    """The staged tree in mke2fs -d's order: each directory's names in byte order
    (scandir with alphasort under LC_ALL=C), a subdirectory entered where its name comes."""
    for name in sorted(os.listdir(stage_root)):
        path = os.path.join(stage_root, name)
        st = os.lstat(path)
        if stat.S_ISDIR(st.st_mode):
            yield Event("dir", name)
            yield from events(path)
            yield Event("up")
        elif stat.S_ISREG(st.st_mode):
            yield Event("file", name, host=path, size=st.st_size)
        elif stat.S_ISLNK(st.st_mode):
            yield Event("symlink", name, target=os.readlink(path))
        elif stat.S_ISFIFO(st.st_mode):
            yield Event("fifo", name)
        elif stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
            yield Event("char" if stat.S_ISCHR(st.st_mode) else "block", name,
                        rdev=st.st_rdev)
        else:
            yield Event("other", name)


__all__ = ["Event", "Fixup", "Group", "Script", "cold_dirs", "events", "first_pass",
           "first_pass_at_end",
           "fix_names", "move_root",
           "parse_groups", "populate", "quote", "region_group", "reserve", "spellable",
           "substitute"]
