"""Files and directories we create (testbed images, private work directories, mount
points) and configuration files we install (udev rules, systemd drop-ins).

Undo removes only what we made: the same inode, never whatever now sits at the path.
"""

from __future__ import annotations

import base64
import os
import secrets
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from ..base.errors import IOFailure, SystemStateError, UnsafePathError
from ..files import safepath
from .change import Change
from .loops import loops_backed_by
from .mounts import mounts_under
from .paths import is_root, trusted_dir


@dataclass
class MadeDir(Change):
    """A directory we create (a mount point, a testbed folder). Undo removes it if empty."""

    kind: ClassVar[str] = "mkdir"
    makes: ClassVar[bool] = True
    path: str

    def describe(self) -> str:
        return f"directory {self.path}"

    def read(self) -> bool:
        return os.path.exists(self.path)

    def existed(self, old: Any) -> bool:
        return bool(old)

    def apply(self) -> None:
        os.makedirs(self.path, exist_ok=True)

    def undo(self, old: Any, result: Any) -> None:
        if old:
            return
        try:
            os.rmdir(self.path)
        except FileNotFoundError:
            pass
        except OSError as err:
            raise SystemStateError(f"could not remove {self.path}: {err.strerror}") from None


@dataclass
class MadeFile(Change):
    """A file we create (a testbed image), sparse at `size`. Undo deletes that file — the one
    we made (same inode), never one somebody else put at that path."""

    kind: ClassVar[str] = "mkfile"
    makes: ClassVar[bool] = True
    path: str
    size: int = 0

    def describe(self) -> str:
        return f"file {self.path} ({self.size} bytes)"

    def read(self) -> bool:
        if os.path.lexists(self.path):
            raise SystemStateError(f"{self.path} already exists", "remove it or choose another")
        return False

    def apply(self) -> dict[str, int]:
        try:
            fd = safepath.create_new(self.path)
        except OSError as err:
            raise IOFailure(f"{self.path}: {err.strerror}") from None
        try:
            st = os.fstat(fd)
            os.ftruncate(fd, self.size)
        except OSError as err:
            os.close(fd)
            os.unlink(self.path)
            raise IOFailure(f"{self.path}: {err.strerror} ({self.size} bytes)") from None
        os.close(fd)
        return {"dev": st.st_dev, "ino": st.st_ino}

    def undo(self, old: Any, result: Any) -> None:
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            return
        if result and (st.st_dev, st.st_ino) != (result.get("dev"), result.get("ino")):
            return  # not the file we made
        os.unlink(self.path)


@dataclass
class PrivateDir(Change):
    """A fresh directory with a random name, mode 0700, under a parent nobody else controls
    (`work_root()`, or the directory of a --device path): what testbeds and slowdisks work
    in. Nothing in it can have been planted. Undo removes it with whatever is left inside,
    but never across a mount that is still there."""

    kind: ClassVar[str] = "privdir"
    makes: ClassVar[bool] = True
    parent: str
    prefix: str

    def describe(self) -> str:
        return f"private directory {os.path.join(self.parent, self.prefix)}*"

    def apply(self) -> str:
        return self.apply_with(lambda _partial: None)

    def apply_with(self, record: Any) -> str:
        """The name is journaled before the directory is made: a SIGKILL between the two
        still leaves `restore` the name (mkdtemp chose it only as it created it)."""
        parent = Path(self.parent)
        if parent.exists():
            safepath.check_chain(parent, "work directory", sticky_ok=True)
        else:
            trusted_dir(parent, "work directory")
        for _ in range(100):
            path = str(parent / f"{self.prefix}{secrets.token_hex(6)}")
            record(path)
            try:
                os.mkdir(path, 0o700)
            except FileExistsError:
                record(None)  # someone else's: not ours to remove
                continue
            return path
        raise SystemStateError(f"no free name for a private directory in {parent}")

    def undo(self, old: Any, result: Any) -> str | None:
        if not result:
            return None
        try:
            st = os.lstat(result)
        except FileNotFoundError:
            return None
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
            # named in the journal but made by someone else (we died before our mkdir)
            return f"left {result} alone: it is not a directory backburner made"
        busy = mounts_under(result) + [dev for f in files_under(result)
                                       for dev in loops_backed_by(f)]
        if busy:
            raise SystemStateError(f"{result} is still in use ({', '.join(busy)})",
                                   "its mounts and loop devices must go first")
        shutil.rmtree(result)
        return None


def files_under(path: str) -> list[str]:
    return [os.path.join(d, f) for d, _, files in os.walk(path) for f in files]


def remove_tree(path: str) -> None:
    """Remove a folder tree of our own (a testbed's files); not journaled: data, not state."""
    shutil.rmtree(path, ignore_errors=True)


_CONFIG_MAX = 1 << 20  # a udev rule or a unit drop-in; anything bigger is not what we think


def _read_config(path: str) -> bytes | None:
    """The bytes of a regular file, None if there is none; never through a symlink."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as err:
        raise UnsafePathError(f"{path}: {err.strerror}", "it must be a regular file") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafePathError(f"{path} is not a regular file")
        if st.st_size > _CONFIG_MAX:
            raise SystemStateError(f"{path} is {st.st_size} bytes: not a file of ours")
        return os.read(fd, _CONFIG_MAX + 1)
    finally:
        os.close(fd)


def _write_config(path: str, data: bytes, mode: int) -> None:
    """Replace `path` whole (a temporary file beside it, fsync'd, renamed over it), so a
    reader — udev, systemd, a crash — sees the old file or the new one, never half."""
    directory, name = os.path.split(path)
    tmp = os.path.join(directory, f".{name}.backburner-{os.urandom(4).hex()}")
    fd = safepath.create_new(tmp, mode)
    try:
        os.fchmod(fd, mode)  # not narrowed by the umask
        os.write(fd, data)
        os.fsync(fd)
    except OSError as err:
        os.close(fd)
        os.unlink(tmp)
        raise IOFailure(f"{path}: {err.strerror}") from None
    os.close(fd)
    os.rename(tmp, path)
    dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


@dataclass
class InstalledFile(Change):
    """A configuration file we install (``content``) or take out again (``content`` None):
    a udev rule, a systemd drop-in. Its old content, or its absence, is journaled, so an
    interrupted `apply` is undone whole and `restore` after a crash puts back what was. Undo
    puts the old file back only while the file is still what we left there; one changed
    since is left alone, with a note."""

    kind: ClassVar[str] = "configfile"
    makes: ClassVar[bool] = False  # the path's content, its absence included, is put back
    path: str
    content: str | None
    mode: int = 0o644
    prune_parent: bool = False  # removing: take out the parent directory if left empty

    def describe(self) -> str:
        return f"{'install' if self.content is not None else 'remove'} {self.path}"

    def read(self) -> dict[str, Any]:
        safepath.check_chain(os.path.dirname(self.path), "configuration directory")
        data = _read_config(self.path)
        if data is None:
            return {"content": None}
        st = os.lstat(self.path)
        return {"content": base64.b64encode(data).decode(), "mode": stat.S_IMODE(st.st_mode),
                "uid": st.st_uid, "gid": st.st_gid}

    def apply(self) -> dict[str, Any]:
        if self.content is not None:
            _write_config(self.path, self.content.encode(), self.mode)
            return {"pruned": False}
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        pruned = False
        if self.prune_parent:
            try:
                os.rmdir(os.path.dirname(self.path))
                pruned = True
            except OSError:
                pass  # something else lives there too
        return {"pruned": pruned}

    def undo(self, old: Any, result: Any) -> str | None:
        directory, name = os.path.split(self.path)
        for left in Path(directory).glob(f".{name}.backburner-*"):  # a crash mid-write
            left.unlink(missing_ok=True)
        if old is None:
            return None  # failed before anything was read: nothing was changed
        target = base64.b64decode(old["content"]) if old.get("content") is not None else None
        ours = self.content.encode() if self.content is not None else None
        if not os.path.isdir(directory):
            if ours is not None or target is None:
                return None  # gone with its directory: nothing of ours is left
            os.mkdir(directory, 0o755)
        now = _read_config(self.path)
        if now == target:
            return None
        if now != ours:
            return f"left {self.path} as it is: it was changed after backburner wrote it"
        if target is None:
            os.unlink(self.path)
            return None
        _write_config(self.path, target, old.get("mode", 0o644))
        if is_root():
            os.chown(self.path, old.get("uid", 0), old.get("gid", 0))
        return None
