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

from ..base.errors import ExistsError, SystemStateError, UnavailableError
from ..files import safepath
from ..kernel import cgroups
from ..kernel.bpf import calls as bpf
from ..kernel.bpf import cgroup_programs
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
        result = {**result, "prog": bpf.program_id(prog),
                  "group": [st.st_dev, st.st_ino]}
        record(result)  # journaled before the attach
        try:
            bpf.attach(group, prog, attach_type)
        except OSError as err:
            raise SystemStateError(f"could not attach a BPF program to {path}: "
                                   f"{err.strerror}") from None
    finally:
        os.close(group)
    return result


def _load_and_attach(path: str, load: Callable[[], int], attach_type: int,
                     record: Callable[[Any], None]) -> dict[str, Any]:
    """Load a program (`load` returns its descriptor) and attach it to the group at
    `path`, which must exist; our descriptor is closed after (the group holds it)."""
    if not os.path.isdir(path):
        raise SystemStateError(f"no cgroup {path}")
    prog = load()
    try:
        return _attach(path, prog, attach_type, {}, record)
    finally:
        os.close(prog)


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
        if result["prog"] not in bpf.attached(group, attach_type):
            return
        prog = bpf.program_fd(result["prog"])
        if prog is None:
            return
        try:
            before()
            bpf.detach(group, prog, attach_type)
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
    makes: ClassVar[bool] = True  # a program just loaded: none can be there before
    path: str
    priority: int
    data_priority: int | None = None

    def describe(self) -> str:
        data = "" if self.data_priority is None else \
            f" (ACKs; data {self.data_priority:#x})"
        return f"packet priority {self.priority:#x}{data} for cgroup {self.path}"

    def apply_with(self, record: Callable[[Any], None]) -> Any:
        return _load_and_attach(self.path, lambda: cgroup_programs.load_priority_program(
            self.priority, data_priority=self.data_priority),
            bpf.BPF_CGROUP_INET_EGRESS, record)

    def apply(self) -> Any:
        return self.apply_with(lambda _r: None)

    def undo(self, old: Any, result: Any) -> None:
        _detach(self.path, result, bpf.BPF_CGROUP_INET_EGRESS)


@dataclass
class CgroupSocketPriority(Change):
    """A cgroup sock-create program on a cgroup v2 group: every socket made in it (or
    below it) gets the socket priority `priority`, by which the ingress classifier
    (`kernel.bpf.tc_programs`) knows the job's packets on their way in."""

    kind: ClassVar[str] = "cgroup-bpf-sock-priority"
    makes: ClassVar[bool] = True
    path: str
    priority: int

    def describe(self) -> str:
        return f"socket priority {self.priority:#x} for cgroup {self.path}"

    def apply_with(self, record: Callable[[Any], None]) -> Any:
        return _load_and_attach(self.path,
                                lambda: cgroup_programs.load_socket_priority_program(self.priority),
                                bpf.BPF_CGROUP_INET_SOCK_CREATE, record)

    def apply(self) -> Any:
        return self.apply_with(lambda _r: None)

    def undo(self, old: Any, result: Any) -> None:
        _detach(self.path, result, bpf.BPF_CGROUP_INET_SOCK_CREATE)


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
    makes: ClassVar[bool] = True
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
        window = cgroup_programs.create_window_map()
        try:
            cgroup_programs.set_window(window, self.clamp, self.initial)
            prog = cgroup_programs.load_sock_ops_program(window, self.cc)
            try:
                return _attach(self.path, prog, bpf.BPF_CGROUP_SOCK_OPS,
                               {"map": bpf.map_id(window)}, record)
            finally:
                os.close(prog)
        finally:
            os.close(window)

    def apply(self) -> Any:
        return self.apply_with(lambda _r: None)

    def undo(self, old: Any, result: Any) -> None:
        def release() -> None:
            window = bpf.map_fd(result.get("map", 0))
            if window is None:
                return
            try:
                cgroup_programs.set_window(window, RELEASE_CLAMP, 0)
            finally:
                os.close(window)
            if cgroups.pids(self.path):
                time.sleep(RELEASE_S)

        _detach(self.path, result, bpf.BPF_CGROUP_SOCK_OPS, release)


def window_map(result: Any) -> int | None:
    """A descriptor of the map of a `CgroupSockOps` change's result (the caller closes
    it); None when it is gone."""
    return bpf.map_fd(result["map"]) if result else None


#: What `PinnedPrograms` pins in its directory: the egress program, the sock_ops program,
#: and the sock_ops program's map (the name is the kind's, so the undo knows which is which).
PIN_EGRESS = "ack_egress"
PIN_SOCK_OPS = "window_sock_ops"
PIN_WINDOW = "window"
PIN_DIR = "backburner"
#: The attach types systemd's BPFProgram= names, for each pinned program.
SYSTEMD_ATTACH = {PIN_EGRESS: "egress", PIN_SOCK_OPS: "sock_ops"}


def bpf_program_settings(root: str = bpf.BPFFS, name: str = PIN_DIR) -> list[str]:
    """The values of a unit's BPFProgram= lines (type:path) for what `PinnedPrograms`
    pins under `root` (in its directory `name`)."""
    return [f"{kind}:{os.path.join(root, name, pin)}" for pin, kind in SYSTEMD_ATTACH.items()]


@dataclass
class PinnedPrograms(Change):
    """The network policy's two programs and the window map, loaded and pinned in a
    directory of bpffs (`root`/`name`, mode 0700) for systemd to attach to units'
    groups (`BPFProgram=egress:…`, `BPFProgram=sock_ops:…`) and for a controller to move
    the window through the map. The egress program gives packets without data `priority`
    (and those with data `data_priority`, 0: their own); the sock_ops program clamps the
    window from the map (all zero at first: nothing clamped) and sets congestion control
    `cc`.

    `root` must be a mount of bpffs that nobody else controls; the directory is made
    there when missing (never through a path another user could have planted: bpffs is
    root's, and the chain is checked), and pins already in it are refused (another
    service holds them, or a crash left them: `restore`). The ids of what is pinned are
    journaled before the first pin; the undo unpins only a pin that still holds the
    journaled id, first setting the map's clamp to the released one (a unit that keeps
    the program attached after we go then has its sockets unclamped with their next
    segment), and removes the directory if it made it and it is empty."""

    kind: ClassVar[str] = "bpf-pinned-programs"
    makes: ClassVar[bool] = True  # pins already there are refused by `read`
    root: str
    priority: int
    data_priority: int = 0
    cc: str | None = None
    name: str = PIN_DIR  # the directory's name under root (a service's, or one run's)

    @property
    def directory(self) -> str:
        return os.path.join(self.root, self.name)

    def describe(self) -> str:
        return f"the network policy's BPF programs pinned in {self.directory}"

    def read(self) -> None:
        if not bpf.bpffs_mounted(self.root):
            raise UnavailableError(f"no BPF filesystem is mounted at {self.root}",
                                   f"mount -t bpf bpf {self.root} (systemd mounts it)")
        safepath.check_chain(self.directory, "BPF pin directory")
        taken = [n for n in (PIN_EGRESS, PIN_SOCK_OPS, PIN_WINDOW)
                 if os.path.lexists(os.path.join(self.directory, n))]
        if taken:
            raise ExistsError(f"{self.directory} already holds {', '.join(taken)}: another "
                              "backburner network service runs, or one was killed",
                              "stop it, or run `backburner restore`")

    def apply_with(self, record: Callable[[Any], None]) -> Any:
        result: dict[str, Any] = {"made": None, "ids": {}}
        if not os.path.lexists(self.directory):
            record(result)
            os.mkdir(self.directory, 0o700)
            st = os.lstat(self.directory)
            result["made"] = [st.st_dev, st.st_ino]
        safepath.check_chain(self.directory, "BPF pin directory")
        fds: dict[str, int] = {}
        try:
            fds[PIN_WINDOW] = cgroup_programs.create_window_map()
            cgroup_programs.set_window(fds[PIN_WINDOW], 0, 0)
            fds[PIN_SOCK_OPS] = cgroup_programs.load_sock_ops_program(fds[PIN_WINDOW], self.cc)
            fds[PIN_EGRESS] = cgroup_programs.load_priority_program(
                self.priority, data_priority=self.data_priority)
            result["ids"] = {PIN_WINDOW: bpf.map_id(fds[PIN_WINDOW]),
                             **{n: bpf.program_id(fds[n])
                                for n in (PIN_SOCK_OPS, PIN_EGRESS)}}
            record(result)  # journaled before the first pin
            for name, fd in fds.items():
                try:
                    bpf.pin(fd, os.path.join(self.directory, name))
                except OSError as err:
                    raise SystemStateError(f"could not pin a BPF object at "
                                           f"{self.directory}/{name}: {err.strerror}") from None
        finally:
            for fd in fds.values():
                os.close(fd)
        return result

    def apply(self) -> Any:
        return self.apply_with(lambda _r: None)

    def undo(self, old: Any, result: Any) -> None:
        if not result:
            return
        for name, ident in result.get("ids", {}).items():
            path = os.path.join(self.directory, name)
            if not os.path.lexists(path):
                continue
            try:
                fd = bpf.pinned(path)
            except OSError:
                continue  # not a pin of bpffs: not ours
            try:
                is_map = name == PIN_WINDOW
                if (bpf.map_id(fd) if is_map else bpf.program_id(fd)) != ident:
                    continue  # pinned there by someone else since
                if is_map:
                    cgroup_programs.set_window(fd, RELEASE_CLAMP, 0)
            finally:
                os.close(fd)
            os.unlink(path)
        made = result.get("made")
        if made:
            try:
                st = os.lstat(self.directory)
            except FileNotFoundError:
                return
            if [st.st_dev, st.st_ino] == made and not os.listdir(self.directory):
                os.rmdir(self.directory)


def pinned_ids(root: str, directory: str = PIN_DIR) -> dict[str, int]:
    """The ids of what `PinnedPrograms` pinned under `root` now (by pin name), for those
    pins that are there."""
    found = {}
    for name in (PIN_EGRESS, PIN_SOCK_OPS, PIN_WINDOW):
        try:
            fd = bpf.pinned(os.path.join(root, directory, name))
        except OSError:
            continue
        try:
            found[name] = bpf.map_id(fd) if name == PIN_WINDOW else \
                bpf.program_id(fd)
        finally:
            os.close(fd)
    return found
