"""Loop devices over our image files."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from .. import procfs
from ..errors import SystemStateError
from .change import Change, tool


def loops_backed_by(path: str) -> list[str]:
    """Loop devices whose backing file is `path` (read from sysfs, no losetup needed)."""
    real = os.path.realpath(path)
    found = []
    for dev in sorted(Path("/sys/block").glob("loop*")):
        try:
            backing = (dev / "loop" / "backing_file").read_text().strip()
        except OSError:
            continue
        if backing.removesuffix(" (deleted)") == real:
            found.append(f"/dev/{dev.name}")
    return found


#: How long a loop device's detach may take to complete (it waits for the last user and
#: for in-flight IO; a loaded machine took over 2 s)
LOOP_DETACH_WAIT_S = 15.0
#: ... and how long at most while its write counters still move (a lazily unmounted
#: filesystem writing back its dirty pages through it; a reader does not extend the wait)
LOOP_DETACH_MAX_S = 300.0


@dataclass
class LoopDevice(Change):
    """A loop device over a file. Direct IO on, so reads reach the backing file's device."""

    kind: ClassVar[str] = "loop"
    backing: str
    direct_io: bool = True
    read_only: bool = False

    def describe(self) -> str:
        return f"loop device on {self.backing}"

    def apply(self) -> str:
        cmd = ["losetup", "--find", "--show", f"--direct-io={'on' if self.direct_io else 'off'}"]
        if self.read_only:
            cmd.append("--read-only")
        out = tool(cmd + [self.backing], "attaching a loop device")
        return out.strip()

    def undo(self, old: Any, result: Any) -> None:
        for dev in loops_backed_by(self.backing):
            tool(["losetup", "-d", dev], f"detaching {dev}")
        start = time.monotonic()
        deadline, last = start + LOOP_DETACH_WAIT_S, b""
        while time.monotonic() < deadline:  # detach is asynchronous while it is still open
            left = loops_backed_by(self.backing)
            if not left:
                return
            io = b" ".join(b" ".join((procfs.read_small(
                f"/sys/block/{os.path.basename(d)}/stat") or b"").split()[4:7]) for d in left)
            if io != last and last:  # writes still completing (writeback): wait on
                deadline = min(time.monotonic() + LOOP_DETACH_WAIT_S,
                               start + LOOP_DETACH_MAX_S)
            last = io
            time.sleep(0.05)
        waited = time.monotonic() - start
        users = [u for d in left for u in procfs.users_of_device(d)]
        # not claimed as undone: the journal stays, and `restore` (or the next run) retries
        raise SystemStateError(
            f"{', '.join(left)} still attached to {self.backing} after "
            f"{waited:.0f} s ("
            + ("; ".join(users) if users else "something still has it open") + ")")
