"""Mounts we make (filesystems on our loop devices, FUSE mounts of our daemons) and the
filesystems we create on our own images."""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..base.errors import SystemStateError, UnavailableError, UnsafePathError
from ..files import safepath
from ..kernel import procfs
from .change import Change, run_tool, tool
from .loops import is_loop_over


def mounts_under(path: str) -> list[str]:
    real = os.path.realpath(path)
    return [t for t in _mount_targets() if t == real or t.startswith(real + "/")]


def _mount_targets() -> list[str]:
    return [m.mountpoint for m in procfs.mounts()]


@dataclass
class Filesystem(Change):
    """A new filesystem on a loop device over an image of ours (a testbed). The device must
    be backed by `image`, so a real disk is never formatted. Undo has nothing to put back:
    the filesystem lives and dies with the image, which has its own entry."""

    kind: ClassVar[str] = "mkfs"
    makes: ClassVar[bool] = False  # undo takes nothing away: the image goes with its entry
    device: str
    image: str
    fstype: str = "ext4"
    options: list[str] = field(default_factory=list)
    timeout_s: float = 300.0

    def describe(self) -> str:
        return f"{self.fstype} on {self.device}"

    def read(self) -> None:
        if not is_loop_over(self.device, self.image):
            raise SystemStateError(f"{self.device} is not a loop device over {self.image}",
                                   "only our own images are formatted")

    def apply(self) -> None:
        tool = f"mkfs.{self.fstype}"
        try:
            res = run_tool([tool, *self.options, self.device], timeout=self.timeout_s)
        except FileNotFoundError:
            raise UnavailableError(f"{tool} is not installed",
                                   "apt-get install e2fsprogs (or the filesystem's tools)"
                                   ) from None
        if res.status != 0:
            lines = [ln.strip() for ln in res.stderr.splitlines() if ln.strip()]
            if lines:
                why = f": {lines[-1]}"
            elif res.status is None:
                why = f" (timed out after {self.timeout_s:.0f} s, or killed by a signal)"
            else:
                why = f" (exit status {res.status})"
            raise SystemStateError(f"{tool} on {self.device} failed{why}")

    def undo(self, old: Any, result: Any) -> None:
        return None


def mount_options(path: str) -> set[str]:
    """The per-mount options (ro/rw, nosuid, nodev, ...) of the mount at path."""
    real = os.path.realpath(path)
    found: set[str] = set()
    for m in procfs.mounts():
        if m.mountpoint == real:
            found = set(m.options)  # the last one mounted there is on top
    return found


def is_mountpoint(path: str) -> bool:
    real = os.path.realpath(path)
    return any(m.mountpoint == real for m in procfs.mounts())


@dataclass
class Mount(Change):
    """A filesystem mounted by us (mount(8), not in a hot path). Undo unmounts it.

    The target must be a real directory (not a symlink) in a chain of directories nobody
    else controls: mount(2) follows symlinks, so a planted one would mount elsewhere. With
    "ro" in the options (bind mounts included), the mount is checked to be read-only.
    Every mount is nosuid and nodev unless "suid" or "dev" is asked for by name: an image
    we mount may come from anyone, and a set-uid file or a device node on it must not
    become a way in."""

    kind: ClassVar[str] = "mount"
    makes: ClassVar[bool] = True
    source: str
    target: str
    fstype: str = ""
    options: str = ""

    def describe(self) -> str:
        return f"mount {self.source} on {self.target}"

    def read(self) -> bool:
        st = os.lstat(self.target)
        if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
            raise UnsafePathError(f"mount point {self.target} is not a plain directory")
        safepath.check_chain(self.target, "mount point")
        if is_mountpoint(self.target):
            raise SystemStateError(f"{self.target} is already a mount point")
        return False

    def effective_options(self) -> str:
        given = [o for o in self.options.split(",") if o]
        extra = [safe for safe, unsafe in (("nosuid", "suid"), ("nodev", "dev"))
                 if safe not in given and unsafe not in given]
        return ",".join(given + extra)

    def apply(self) -> None:
        self.apply_with(lambda _partial: None)

    def apply_with(self, record: Callable[[Any], None]) -> None:
        cmd = ["mount", "--no-canonicalize"]
        if self.fstype:
            cmd += ["-t", self.fstype]
        cmd += ["-o", self.effective_options()]
        tool(cmd + [self.source, self.target], f"mounting {self.source}")
        record(None)  # mounted: ours to unmount, even if a check below fails
        wanted = set(self.effective_options().split(","))
        have = mount_options(self.target)
        for option in ("ro", "nosuid", "nodev"):
            if option in wanted and option not in have:
                raise SystemStateError(f"{self.target} was mounted without {option!r}")

    def undo(self, old: Any, result: Any) -> None:
        for _ in range(25):
            if not is_mountpoint(self.target):
                return
            if run_tool(["umount", self.target]).status == 0:
                return
            time.sleep(0.1)
        tool(["umount", "-l", self.target], f"unmounting {self.target}")


@dataclass
class FuseMount(Change):
    """A FUSE mount that a daemon we start makes on `target` (journaled before the daemon).

    apply() does nothing: the daemon mounts. undo() lazily unmounts whatever is still mounted
    there, which is what is left when the daemon was SIGKILLed (the mount then answers
    ENOTCONN and nobody else would ever unmount it); a daemon still serving then leaves its
    loop. Lazy, so a mount still held open (e.g. by a loop device) cannot make undo fail.
    """

    kind: ClassVar[str] = "fusemount"
    makes: ClassVar[bool] = True
    target: str

    def describe(self) -> str:
        return f"FUSE mount on {self.target}"

    def read(self) -> bool:
        if is_mountpoint(self.target):
            raise SystemStateError(f"{self.target} is already a mount point")
        return False

    def apply(self) -> None:
        pass

    def undo(self, old: Any, result: Any) -> None:
        if old:
            return
        for cmd in (["umount", "-l", self.target], ["fusermount3", "-u", "-z", self.target]):
            if not is_mountpoint(self.target):
                return
            try:
                run_tool(cmd, timeout=30)
            except FileNotFoundError:
                continue
        if is_mountpoint(self.target):
            raise SystemStateError(f"could not unmount the FUSE mount on {self.target}")

