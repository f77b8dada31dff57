"""Loop devices over our image files, attached and found through the loop driver's own
ioctls (loop(4)), not through losetup and paths.

A loop device is known here by what its backing file *is* (device and inode, which the
kernel reports for a bound loop device), never by the path it was given: a path can be
swapped for a symlink to another user's image between the attach and a `restore` after a
crash, and a file served from a FUSE mount that is lazily unmounted has no path at all. The
identity is journaled before the attach, from the descriptor the loop device is bound to,
so a SIGKILL at any moment leaves a journal that finds exactly the device we made.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from ..base.errors import SystemStateError, UnsafePathError
from ..kernel import procfs
from .change import Change

# <linux/loop.h>
LOOP_CLR_FD = 0x4C01
LOOP_GET_STATUS64 = 0x4C05
LOOP_CONFIGURE = 0x4C0A
LOOP_CTL_GET_FREE = 0x4C82
LO_FLAGS_READ_ONLY = 1
LO_FLAGS_DIRECT_IO = 16
_LO_NAME_SIZE = 64


class _LoopInfo64(ctypes.Structure):
    _fields_ = [("lo_device", ctypes.c_uint64), ("lo_inode", ctypes.c_uint64),
                ("lo_rdevice", ctypes.c_uint64), ("lo_offset", ctypes.c_uint64),
                ("lo_sizelimit", ctypes.c_uint64), ("lo_number", ctypes.c_uint32),
                ("lo_encrypt_type", ctypes.c_uint32), ("lo_encrypt_key_size", ctypes.c_uint32),
                ("lo_flags", ctypes.c_uint32), ("lo_file_name", ctypes.c_char * _LO_NAME_SIZE),
                ("lo_crypt_name", ctypes.c_char * _LO_NAME_SIZE),
                ("lo_encrypt_key", ctypes.c_char * 32), ("lo_init", ctypes.c_uint64 * 2)]


class _LoopConfig(ctypes.Structure):
    _fields_ = [("fd", ctypes.c_uint32), ("block_size", ctypes.c_uint32),
                ("info", _LoopInfo64), ("reserved", ctypes.c_uint64 * 8)]


Identity = tuple[int, int]  # (st_dev, st_ino) of a backing file


def _decode_dev(encoded: int) -> int:
    """The kernel's huge_encode_dev() form (lo_device) as a st_dev value."""
    major = (encoded & 0xFFF00) >> 8
    minor = (encoded & 0xFF) | ((encoded >> 12) & 0xFFF00)
    return os.makedev(major, minor)


class Unreadable(Exception):
    """A bound loop device whose backing file's status the kernel cannot read: a file on a
    FUSE mount whose daemon is gone (getattr fails with ENOTCONN)."""


def backing_of(device: str) -> Identity | None:
    """(st_dev, st_ino) of the file bound to a loop device; None when nothing is bound.
    Raises `Unreadable` when something is bound but its status cannot be read."""
    try:
        fd = os.open(device, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        info = _LoopInfo64()
        fcntl.ioctl(fd, LOOP_GET_STATUS64, info)
    except OSError as err:
        if err.errno == errno.ENXIO:  # unbound
            return None
        raise Unreadable(err.strerror) from None
    finally:
        os.close(fd)
    return _decode_dev(info.lo_device), int(info.lo_inode)


def _named(device: str) -> str | None:
    """The backing file's name as sysfs gives it (None: unbound)."""
    try:
        text = Path("/sys/block", os.path.basename(device), "loop", "backing_file").read_text()
    except OSError:
        return None
    return text.strip().removesuffix(" (deleted)")


def bound_to(device: str, identity: Identity, name: str) -> bool:
    """Whether `device` is bound to the file with `identity`; when the kernel cannot read
    that file's status (its FUSE daemon died), to a file of this name. The name decides
    only then, and only for files in our own private directories, where nobody else can
    rename anything."""
    try:
        return backing_of(device) == tuple(identity)
    except Unreadable:
        return _named(device) == os.path.realpath(name)


def _bound_loops() -> list[str]:
    """Loop devices with a backing file (sysfs lists the bound ones)."""
    return [f"/dev/{d.name}" for d in sorted(Path("/sys/block").glob("loop*"))
            if (d / "loop" / "backing_file").exists()]


def loops_over(identity: Identity, name: str) -> list[str]:
    """Every loop device bound to the file with this identity (see `bound_to`). Each bound
    device is opened for its status: only for the undo of an attach whose device was not
    journaled (killed between the attach and the journal line)."""
    return [dev for dev in _bound_loops() if bound_to(dev, identity, name)]


def loops_backed_by(path: str) -> list[str]:
    """Loop devices whose backing file's name (sysfs) is `path`: for what lives in our own
    private directories, where nobody else can rename a file."""
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


def is_loop_over(device: str, path: str) -> bool:
    """Whether `device` is bound to the very file at `path` (symlinks not followed)."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    try:
        return stat.S_ISREG(st.st_mode) and backing_of(device) == (st.st_dev, st.st_ino)
    except Unreadable:
        return False


def open_backing(path: str, read_only: bool) -> int:
    """The image to bind, opened without following a symlink, checked to be a file."""
    flags = (os.O_RDONLY if read_only else os.O_RDWR) | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise UnsafePathError(f"{path} is a symbolic link", "give the real path") from None
        raise SystemStateError(f"cannot open {path} for a loop device: {err.strerror}"
                               ) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise SystemStateError(f"{path} is not a regular file: no loop device over it")
    return fd


def attach(fd: int, name: str, read_only: bool, direct_io: bool) -> str:
    """Bind a free loop device to the open file `fd` (LOOP_CONFIGURE, as losetup does);
    returns its path. Another attach racing for the same free device makes us try the next."""
    flags = (LO_FLAGS_READ_ONLY if read_only else 0) | (LO_FLAGS_DIRECT_IO if direct_io else 0)
    config = _LoopConfig(fd=fd, block_size=0)
    config.info.lo_flags = flags
    config.info.lo_file_name = os.fsencode(name)[:_LO_NAME_SIZE - 1]
    ctl = os.open("/dev/loop-control", os.O_RDWR | os.O_CLOEXEC)
    try:
        for _ in range(100):
            device = f"/dev/loop{fcntl.ioctl(ctl, LOOP_CTL_GET_FREE)}"
            dev_fd = os.open(device, (os.O_RDONLY if read_only else os.O_RDWR) | os.O_CLOEXEC)
            try:
                fcntl.ioctl(dev_fd, LOOP_CONFIGURE, config)
                return device
            except OSError as err:
                if err.errno != errno.EBUSY:
                    raise SystemStateError(f"attaching {device} to {name} failed: "
                                           f"{err.strerror}") from None
            finally:
                os.close(dev_fd)
    finally:
        os.close(ctl)
    raise SystemStateError(f"no free loop device for {name}: every one was taken meanwhile")


def detach(device: str) -> None:
    """LOOP_CLR_FD: unbound at once, or (still open, e.g. by a lazily unmounted
    filesystem) as soon as its last user closes it."""
    try:
        fd = os.open(device, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        return
    try:
        fcntl.ioctl(fd, LOOP_CLR_FD)
    except OSError as err:
        if err.errno != errno.ENXIO:  # ENXIO: nothing bound any more
            raise SystemStateError(f"detaching {device} failed: {err.strerror}") from None
    finally:
        os.close(fd)


#: How long a loop device's detach may take to complete (it waits for the last user and
#: for in-flight IO; a loaded machine took over 2 s)
LOOP_DETACH_WAIT_S = 15.0
#: ... and how long at most while its write counters still move (a lazily unmounted
#: filesystem writing back its dirty pages through it; a reader does not extend the wait)
LOOP_DETACH_MAX_S = 300.0


@dataclass
class LoopDevice(Change):
    """A loop device over a file of ours. Direct IO on, so reads reach the backing file's
    device. The journaled result is ``{"device", "dev", "ino"}`` (the backing file's
    identity first, before the attach); the caller gets the device's path."""

    kind: ClassVar[str] = "loop"
    makes: ClassVar[bool] = True  # a new device each time: none can be there before
    backing: str
    direct_io: bool = True
    read_only: bool = False

    def describe(self) -> str:
        return f"loop device on {self.backing}"

    def apply(self) -> dict[str, Any]:
        return self.apply_with(lambda _partial: None)

    def returned(self, result: Any) -> str:
        return str(result["device"])

    def apply_with(self, record: Any) -> dict[str, Any]:
        fd = open_backing(self.backing, self.read_only)
        try:
            st = os.fstat(fd)
            ident = {"dev": st.st_dev, "ino": st.st_ino}
            record(ident)  # before the attach: a SIGKILL after it still finds the device
            try:
                device = attach(fd, self.backing, self.read_only, self.direct_io)
            except Exception:
                record(None)  # nothing attached: a device bound to this file is another's
                raise
        finally:
            os.close(fd)
        return {"device": device, **ident}

    def undo(self, old: Any, result: Any) -> None:
        if isinstance(result, dict) and "ino" in result:
            identity = (int(result["dev"]), int(result["ino"]))
            device = result.get("device")
            if device:
                ours = [device] if bound_to(device, identity, self.backing) else []
            else:
                ours = loops_over(identity, self.backing)
        elif isinstance(result, str):  # a journal of a version that attached with losetup
            ours = [result] if result in loops_backed_by(self.backing) else []
            identity = (-1, -1)  # unknown: the name decides
        else:
            return  # nothing was opened, so nothing was attached
        for dev in ours:
            detach(dev)
        if ours:
            self._wait_detached(ours, identity)

    def _wait_detached(self, devices: list[str], identity: Identity) -> None:
        start = time.monotonic()
        deadline, last = start + LOOP_DETACH_WAIT_S, b""
        left: list[str] = []
        while time.monotonic() < deadline:  # detach is asynchronous while it is still open
            left = [d for d in devices if (bound_to(d, identity, self.backing)
                                           if identity != (-1, -1)
                                           else _named(d) == os.path.realpath(self.backing))]
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
