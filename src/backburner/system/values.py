"""Single values in sysfs and procfs (a queue's scheduler, rotational flag, read-ahead, a
sysctl), the page cache drop, and PSI triggers."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from ..base.errors import SystemStateError
from .change import Change, selected, write
from .paths import require_root


@dataclass
class SysfsValue(Change):
    """A value in sysfs/procfs, e.g. queue/scheduler, queue/rotational, a sysctl."""

    kind: ClassVar[str] = "sysfs"
    makes: ClassVar[bool] = False
    path: str
    value: str

    def describe(self) -> str:
        return f"{self.path} = {self.value}"

    def read(self) -> str:
        try:
            return selected(Path(self.path).read_text())
        except FileNotFoundError:
            raise SystemStateError(f"{self.path} does not exist") from None

    def apply(self) -> None:
        write(self.path, self.value)
        now = selected(Path(self.path).read_text())
        if now != self.value:
            raise SystemStateError(f"{self.path} reads {now!r} after writing {self.value!r}")

    def undo(self, old: Any, result: Any) -> None:
        if old is None or not os.path.exists(self.path):
            return  # the device is gone: nothing left to restore
        if selected(Path(self.path).read_text()) != old:
            write(self.path, old)


def drop_caches() -> None:
    """sync, then drop page cache, dentries and inodes, so the next start is really cold."""
    require_root("dropping the page cache (/proc/sys/vm/drop_caches)")
    os.sync()
    write("/proc/sys/vm/drop_caches", "3")


def psi_trigger(path: str, trigger: str) -> int:
    """A PSI trigger ("some 100000 1000000" on /proc/pressure/io or a cgroup's io.pressure):
    an fd that poll() reports POLLPRI on when the stall threshold is crossed. Not journaled:
    the kernel removes the trigger when the fd is closed (or its owner dies). Raises OSError
    (EINVAL for a window this caller may not use, EOPNOTSUPP without PSI)."""
    fd = os.open(path, os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        os.write(fd, trigger.encode() + b"\0")  # the kernel overwrites the last byte with NUL
    except OSError:
        os.close(fd)
        raise
    return fd
