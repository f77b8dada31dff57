"""Paths another user cannot plant or change: what root may create, follow, mount or trust.

backburner runs as root and writes, mounts and chroots under its own directories, and reads
rules and journals that say what to do as root. A directory anyone could have created first
(a fixed name in /tmp) or can still change is a way in. The checks follow sudo's and
OpenSSH's: every component of the path is a real directory (no symlink), owned by root or by
us, and not writable by group or others unless it is sticky (like /tmp: others can then not
rename or replace what we own inside it); the final directory itself is never writable by
others. Files opened for writing use O_NOFOLLOW and O_EXCL where they are created.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..base.errors import UnsafePathError

_WRITABLE_BY_OTHERS = stat.S_IWGRP | stat.S_IWOTH


def _trusted_owner(st: os.stat_result) -> bool:
    return st.st_uid in (0, os.geteuid())


def check_chain(path: str | os.PathLike[str], what: str = "directory", *,
                sticky_ok: bool = False) -> None:
    """Every ancestor of `path` (and `path` itself, if it exists) is one nobody else controls.

    UnsafePathError names the first component that is a symlink, owned by another user, or
    writable by others without the sticky bit. ``sticky_ok``: `path` itself may be a sticky
    world-writable directory (like /tmp), for callers that only create a random-named,
    private directory in it (others can neither predict, replace nor rename it).
    """
    absolute = Path(os.path.abspath(path))
    parts = [absolute, *absolute.parents][::-1]
    for i, comp in enumerate(parts):
        try:
            st = os.lstat(comp)
        except FileNotFoundError:
            return  # the rest will be created by us, privately
        last = i == len(parts) - 1
        if stat.S_ISLNK(st.st_mode):
            if comp == absolute or not _system_link(comp, st):
                raise UnsafePathError(f"{what} {path}: {comp} is a symbolic link",
                                      "give the real path")
            continue
        if not stat.S_ISDIR(st.st_mode):
            raise UnsafePathError(f"{what} {path}: {comp} is not a directory")
        if not _trusted_owner(st):
            raise UnsafePathError(f"{what} {path}: {comp} is owned by uid {st.st_uid}",
                                  "it must be owned by root")
        sticky = bool(st.st_mode & stat.S_ISVTX)
        if st.st_mode & _WRITABLE_BY_OTHERS and (not sticky or (last and not sticky_ok)):
            raise UnsafePathError(f"{what} {path}: {comp} is writable by other users",
                                  f"chmod go-w {comp}")


def _system_link(comp: Path, st: os.stat_result) -> bool:
    """A root-owned symlink in a root-owned, not-others-writable directory (merged /usr's
    /lib -> usr/lib, /var/run -> /run): only root could have made or can change it."""
    parent = os.lstat(comp.parent)
    return st.st_uid == 0 and parent.st_uid == 0 and not parent.st_mode & _WRITABLE_BY_OTHERS


def private_dir(path: str | os.PathLike[str], what: str = "directory") -> Path:
    """`path` as a directory only we can write (created 0700 where missing), after checking
    that nobody else controls any component of it."""
    check_chain(path, what)
    p = Path(os.path.abspath(path))
    missing = []
    cur = p
    while not os.path.lexists(cur):
        missing.append(cur)
        cur = cur.parent
    for d in reversed(missing):
        try:
            os.mkdir(d, 0o700)
        except FileExistsError:
            pass  # made meanwhile: the check below decides whether it can be trusted
    check_chain(p, what)
    return p


def check_file(path: str | os.PathLike[str], what: str = "file") -> os.stat_result:
    """A file root may trust (a rule file, a journal): a regular file, not a symlink, owned
    by root or us, not writable by group or others, in a directory chain nobody else controls.
    """
    check_chain(os.path.dirname(os.path.abspath(path)), f"the directory of {what} {path}")
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISREG(st.st_mode):
        raise UnsafePathError(f"{what} {path} is not a regular file")
    if not _trusted_owner(st):
        raise UnsafePathError(f"{what} {path} is owned by uid {st.st_uid}",
                              "it must be owned by root")
    if st.st_mode & _WRITABLE_BY_OTHERS:
        raise UnsafePathError(f"{what} {path} is writable by other users",
                              f"chmod go-w {path}")
    return st


def create_new(path: str | os.PathLike[str], mode: int = 0o600) -> int:
    """A new file for writing: never an existing one, never through a symlink."""
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                   mode)
