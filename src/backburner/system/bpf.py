"""BPF programs attached to a cgroup v2 group: the network policy's hold on a job's
packets and sockets, attributed by the kernel's own socket-to-cgroup link.

A program attached to a group stays there after the process that loaded it exits, so each
change journals the program's id (never reused while the program lives) and the group's
device and inode before it attaches; the undo, also `restore`'s after a SIGKILL, detaches
that program from that group and nothing else (other programs there stay). A map lives
while a program or a descriptor holds it: the detached program takes its map with it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from .. import cgroupbpf
from ..errors import SystemStateError
from .cgroups import cgroup_procs
from .change import Change

#: The clamp the sock_ops program sets on its last run before the undo detaches it: the
#: largest window TCP can offer (65535 << 14), so the job's sockets are clamped no more.
RELEASE_CLAMP = 0xFFFF << 14
#: How long the undo lets a still running job's sockets send a segment (and so get the
#: released clamp) before the program goes.
RELEASE_S = 0.3


def _open_group(path: str) -> int | None:
    try:
        return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None


def _attach(path: str, prog: int, attach_type: int, result: dict[str, Any],
            record: Callable[[Any], None]) -> dict[str, Any]:
    """Attach `prog` to the group at `path`, the result journaled first (with the group's
    identity and the program's id added)."""
    group = _open_group(path)
    if group is None:
        raise SystemStateError(f"no cgroup {path}")
    try:
        st = os.fstat(group)
        result = {**result, "prog": cgroupbpf.program_id(prog),
                  "group": [st.st_dev, st.st_ino]}
        record(result)  # journaled before the attach
        try:
            cgroupbpf.attach(group, prog, attach_type)
        except OSError as err:
            raise SystemStateError(f"could not attach a BPF program to {path}: "
                                   f"{err.strerror}") from None
    finally:
        os.close(group)
    return result


def _detach(path: str, result: Any, attach_type: int,
            before: Callable[[], None] = lambda: None) -> None:
    """Detach the journaled program from the journaled group, if both are still there;
    `before` runs first, while the program is still attached."""
    if not result:
        return  # nothing was loaded, so nothing was attached
    group = _open_group(path)
    if group is None:
        return  # the group is gone, and its programs with it
    try:
        st = os.fstat(group)
        if [st.st_dev, st.st_ino] != result["group"]:
            return
        if result["prog"] not in cgroupbpf.attached(group, attach_type):
            return
        prog = cgroupbpf.program_fd(result["prog"])
        if prog is None:
            return
        try:
            before()
            cgroupbpf.detach(group, prog, attach_type)
        except OSError as err:
            raise SystemStateError(f"could not detach the BPF program from {path}: "
                                   f"{err.strerror}") from None
        finally:
            os.close(prog)
    finally:
        os.close(group)


@dataclass
class CgroupPacketPriority(Change):
    """A cgroup-skb egress program on a cgroup v2 group that gives every packet its
    sockets send the priority `priority` (an HTB class id, major << 16 | minor, puts it in
    that class); with `data_priority`, only packets without data (ACKs) get `priority`,
    and those with data get `data_priority` (0: their own)."""

    kind: ClassVar[str] = "cgroup-bpf-priority"
    path: str
    priority: int
    data_priority: int | None = None

    def describe(self) -> str:
        data = "" if self.data_priority is None else \
            f" (ACKs; data {self.data_priority:#x})"
        return f"packet priority {self.priority:#x}{data} for cgroup {self.path}"

    def apply_with(self, record: Callable[[Any], None]) -> Any:
        if not os.path.isdir(self.path):
            raise SystemStateError(f"no cgroup {self.path}")
        prog = cgroupbpf.load_priority_program(self.priority,
                                               data_priority=self.data_priority)
        try:
            return _attach(self.path, prog, cgroupbpf.BPF_CGROUP_INET_EGRESS, {}, record)
        finally:
            os.close(prog)

    def apply(self) -> Any:
        return self.apply_with(lambda _r: None)

    def undo(self, old: Any, result: Any) -> None:
        _detach(self.path, result, cgroupbpf.BPF_CGROUP_INET_EGRESS)


@dataclass
class CgroupSockOps(Change):
    """A sock_ops program on a cgroup v2 group, over a map of its own: the job's TCP
    sockets get the window clamp and initial window the map holds (`clamp` bytes and
    `initial` segments to start with; 0: the kernel's), and congestion control `cc`
    (None: the system's). A controller moves the window later through the map, found by
    its id in the result.

    Before the program goes, the undo sets the released clamp and gives a job that still
    runs (after `restore`) a moment to send, so its sockets are not left clamped; a socket
    keeps its congestion control for its life."""

    kind: ClassVar[str] = "cgroup-bpf-sock-ops"
    path: str
    cc: str | None = None
    clamp: int = 0
    initial: int = 0

    def describe(self) -> str:
        what = [f"window clamp {self.clamp}" if self.clamp else "window",
                *([f"congestion control {self.cc}"] if self.cc else [])]
        return f"{', '.join(what)} for the TCP sockets of cgroup {self.path}"

    def apply_with(self, record: Callable[[Any], None]) -> Any:
        if not os.path.isdir(self.path):
            raise SystemStateError(f"no cgroup {self.path}")
        window = cgroupbpf.create_window_map()
        try:
            cgroupbpf.set_window(window, self.clamp, self.initial)
            prog = cgroupbpf.load_sock_ops_program(window, self.cc)
            try:
                return _attach(self.path, prog, cgroupbpf.BPF_CGROUP_SOCK_OPS,
                               {"map": cgroupbpf.map_id(window)}, record)
            finally:
                os.close(prog)
        finally:
            os.close(window)

    def apply(self) -> Any:
        return self.apply_with(lambda _r: None)

    def undo(self, old: Any, result: Any) -> None:
        def release() -> None:
            window = cgroupbpf.map_fd(result.get("map", 0))
            if window is None:
                return
            try:
                cgroupbpf.set_window(window, RELEASE_CLAMP, 0)
            finally:
                os.close(window)
            if cgroup_procs(self.path):
                time.sleep(RELEASE_S)

        _detach(self.path, result, cgroupbpf.BPF_CGROUP_SOCK_OPS, release)


def window_map(result: Any) -> int | None:
    """A descriptor of the map of a `CgroupSockOps` change's result (the caller closes
    it); None when it is gone."""
    return cgroupbpf.map_fd(result["map"]) if result else None
