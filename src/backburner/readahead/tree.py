"""Directory trees copied and compared with everything that makes them the same tree:
types, owners, modes, times, extended attributes (ACLs and capabilities included),
symlink targets, device numbers, and which names are hard links of one inode.

Used by `layout build-ext4`, which copies as root into a filesystem of its own and then
proves the result equal to the source. Nothing here follows a symlink; sparse files stay
sparse (SEEK_DATA/SEEK_HOLE).
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass

from ..base.errors import DataError
from .pack import show_path

log = logging.getLogger(__name__)

_COPY_CHUNK = 8 << 20


@dataclass(frozen=True)
class Node:
    rel: bytes  # path relative to the tree's root; b"" is the root itself
    st: os.stat_result

    @property
    def kind(self) -> str:
        return kind_of(self.st.st_mode)


def kind_of(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "dir"), (stat.S_ISREG, "file"), (stat.S_ISLNK, "symlink"),
                       (stat.S_ISCHR, "char"), (stat.S_ISBLK, "block"), (stat.S_ISFIFO, "fifo"),
                       (stat.S_ISSOCK, "socket")):
        if test(mode):
            return name
    return "?"


def join(root: bytes, rel: bytes) -> bytes:
    return os.path.join(root, rel) if rel else root


def walk(root: bytes) -> Iterator[Node]:
    """Every node under root (root first), directories before their contents, names in
    byte order so two walks of equal trees line up."""
    yield Node(b"", os.lstat(root))
    stack = [b""]
    while stack:
        rel = stack.pop()
        names = sorted(os.listdir(join(root, rel)))
        subdirs = []
        for name in names:
            child = os.path.join(rel, name) if rel else name
            st = os.lstat(join(root, child))
            yield Node(child, st)
            if stat.S_ISDIR(st.st_mode):
                subdirs.append(child)
        stack.extend(reversed(subdirs))


# --- metadata --------------------------------------------------------------------------------


def xattrs(path: bytes) -> dict[str, bytes]:
    try:
        names = os.listxattr(path, follow_symlinks=False)
    except OSError as err:
        if err.errno in (errno.ENOTSUP, errno.EOPNOTSUPP):
            return {}
        raise
    out = {}
    for name in names:
        try:
            out[name] = os.getxattr(path, name, follow_symlinks=False)
        except OSError as err:
            if err.errno != errno.ENODATA:
                raise
    return out


def copy_meta(src: bytes, dst: bytes, st: os.stat_result) -> None:
    """Owner, mode, xattrs, times of src onto dst. chown first (it clears set-id bits and
    file capabilities), xattrs after chmod (an ACL then agrees with the mode), times last."""
    os.chown(dst, st.st_uid, st.st_gid, follow_symlinks=False)
    if not stat.S_ISLNK(st.st_mode):
        os.chmod(dst, stat.S_IMODE(st.st_mode))
    for name, value in xattrs(src).items():
        os.setxattr(dst, name, value, follow_symlinks=False)
    os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns), follow_symlinks=False)


def copy_data(src: bytes, dst: bytes, existing: bool = False) -> None:
    """Copy a regular file's bytes into a new file (or into an existing empty one, a
    placeholder), holes kept as holes."""
    fin = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        how = os.O_TRUNC if existing else os.O_CREAT | os.O_EXCL
        fout = os.open(dst, os.O_WRONLY | how | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            size = os.fstat(fin).st_size
            for start, end in _data_ranges(fin, size):
                _copy_range(fin, fout, start, end - start)
            os.ftruncate(fout, size)
        finally:
            os.close(fout)
    finally:
        os.close(fin)


def _data_ranges(fd: int, size: int) -> Iterator[tuple[int, int]]:
    pos = 0
    while pos < size:
        try:
            start = os.lseek(fd, pos, os.SEEK_DATA)
        except OSError as err:
            if err.errno == errno.ENXIO:
                return  # only a hole is left
            if err.errno in (errno.EINVAL, errno.EOPNOTSUPP):
                yield pos, size
                return
            raise
        end = os.lseek(fd, start, os.SEEK_HOLE)
        yield start, min(end, size)
        pos = end


def _copy_range(fin: int, fout: int, offset: int, length: int) -> None:
    done = 0
    while done < length:
        n = min(_COPY_CHUNK, length - done)
        try:
            got = os.copy_file_range(fin, fout, n, offset + done, offset + done)
        except OSError as err:
            if err.errno not in (errno.EXDEV, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOSYS):
                raise
            data = os.pread(fin, n, offset + done)
            got = os.pwrite(fout, data, offset + done)
        if got <= 0:
            raise DataError("a source file shrank while it was copied", "copy a quiet tree")
        done += got


def make_node(src: bytes, dst: bytes, st: os.stat_result) -> None:
    """Create dst as a copy of src's node (no metadata yet, except for directories'
    existence): file data, symlink target, device number, FIFO, socket."""
    mode = st.st_mode
    if stat.S_ISDIR(mode):
        if not os.path.isdir(dst):
            os.mkdir(dst, 0o700)
    elif stat.S_ISREG(mode):
        copy_data(src, dst)
    elif stat.S_ISLNK(mode):
        os.symlink(os.readlink(src), dst)
    else:
        os.mknod(dst, stat.S_IFMT(mode) | 0o600, st.st_rdev)


def file_digest(path: bytes) -> bytes:
    h = hashlib.blake2b(digest_size=20)
    with open(path, "rb") as f:
        while chunk := f.read(_COPY_CHUNK):
            h.update(chunk)
    return h.digest()


# --- comparing -------------------------------------------------------------------------------


def _same(a: Node, b: os.stat_result, root_a: bytes, root_b: bytes) -> str | None:
    sa = a.st
    if kind_of(b.st_mode) != a.kind:
        return f"is a {kind_of(b.st_mode)}, not a {a.kind}"
    if a.kind != "symlink" and stat.S_IMODE(b.st_mode) != stat.S_IMODE(sa.st_mode):
        return f"mode {stat.S_IMODE(b.st_mode):o}, not {stat.S_IMODE(sa.st_mode):o}"
    if (b.st_uid, b.st_gid) != (sa.st_uid, sa.st_gid):
        return f"owner {b.st_uid}:{b.st_gid}, not {sa.st_uid}:{sa.st_gid}"
    if b.st_mtime_ns != sa.st_mtime_ns:
        return "a different mtime"
    pa, pb = join(root_a, a.rel), join(root_b, a.rel)
    if xattrs(pa) != xattrs(pb):
        return "different extended attributes"
    if a.kind == "symlink" and os.readlink(pa) != os.readlink(pb):
        return "a different symlink target"
    if a.kind in ("char", "block") and b.st_rdev != sa.st_rdev:
        return "a different device number"
    if a.kind == "file" and (b.st_size != sa.st_size or file_digest(pa) != file_digest(pb)):
        return "different content"
    return None


def compare(src: bytes, dst: bytes, ignore_extra: frozenset[bytes] = frozenset()) -> list[str]:
    """Differences between two trees (empty when dst is an exact copy of src), hard-link
    structure included: names that share an inode in src share one in dst, and no more."""
    problems: list[str] = []
    groups_src: dict[tuple[int, int], list[bytes]] = {}
    inode_of_dst: dict[bytes, tuple[int, int]] = {}
    seen: set[bytes] = set()
    for node in walk(src):
        seen.add(node.rel)
        try:
            other = os.lstat(join(dst, node.rel))
        except FileNotFoundError:
            problems.append(f"{_show(node.rel)}: missing")
            continue
        why = _same(node, other, src, dst) if node.rel else _same_root(node, other)
        if why:
            problems.append(f"{_show(node.rel)}: {why}")
        if node.kind != "dir":
            groups_src.setdefault((node.st.st_dev, node.st.st_ino), []).append(node.rel)
            inode_of_dst[node.rel] = (other.st_dev, other.st_ino)
    for node in walk(dst):
        if node.rel not in seen and node.rel.split(b"/")[0] not in ignore_extra:
            problems.append(f"{_show(node.rel)}: not in the source")
    dst_groups: dict[tuple[int, int], set[bytes]] = {}
    for rel, ino in inode_of_dst.items():
        dst_groups.setdefault(ino, set()).add(rel)
    for names in groups_src.values():
        if names[0] in inode_of_dst and dst_groups[inode_of_dst[names[0]]] != set(names):
            problems.append(f"{_show(names[0])}: hard links differ")
    return problems


def _same_root(a: Node, b: os.stat_result) -> str | None:
    if stat.S_IMODE(b.st_mode) != stat.S_IMODE(a.st.st_mode):
        return f"root mode {stat.S_IMODE(b.st_mode):o}, not {stat.S_IMODE(a.st.st_mode):o}"
    if (b.st_uid, b.st_gid) != (a.st.st_uid, a.st.st_gid):
        return "root owner differs"
    return None


def _show(rel: bytes) -> str:
    return show_path(rel) or "/"
