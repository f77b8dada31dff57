"""Block devices and their IO schedulers, as sysfs shows them: the one place that names the
schedulers, checks a name, reads what a disk offers and runs, finds the whole disk holding
a file, and tells a spinning disk from a solid-state one and an NVMe drive.

A scheduler acts on a request queue, and a queue belongs to a whole disk
(`/sys/block/NAME/queue`): a partition shares its disk's, and a device-mapper or md device
(LVM, LUKS, RAID) passes its IO to the disks beneath it (`slaves/`), whose schedulers
decide. So "the disk holding a file" is followed down to those disks.

Everything here reads, and cheaply (a background replay's own start uses it): no import
beyond the standard library and `errors`, `procfs`. The names of the classes of disk and
of whole disks are `disk_names`' (light, for the command line's parser), said here too.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path

from ..base.errors import NotFoundError, UsageError
from . import procfs
from .disk_names import DISK_CLASSES as DISK_CLASSES
from .disk_names import DISK_GLOBS as DISK_GLOBS
from .disk_names import NON_ROTATIONAL as NON_ROTATIONAL
from .disk_names import NVME as NVME
from .disk_names import NVME_GLOB as NVME_GLOB
from .disk_names import ROTATIONAL as ROTATIONAL

SYS_BLOCK = "/sys/block"
SYS_DEV_BLOCK = "/sys/dev/block"

#: The multi-queue IO schedulers (elevators) of mainline Linux (block/Kconfig.iosched).
SCHEDULERS = ("none", "mq-deadline", "kyber", "bfq")
#: Other names the kernel takes when one is written to queue/scheduler.
ALIASES = {"deadline": "mq-deadline"}
#: BFQ's stable merging (block/bfq-iosched.c, bfq_activation_stable_merging): a queue made
#: within this long of the last one made, in the same group at the same IO class and
#: level, may be merged into it and then shares its service, weight raising lost. A start
#: that soon after a bulk job's start is served as part of the bulk job.
BFQ_STABLE_MERGE_S = 0.6


# --- schedulers -------------------------------------------------------------------------------


def parse_schedulers(text: str) -> tuple[tuple[str, ...], str | None]:
    """'none [mq-deadline] kyber bfq' -> (every one offered, the one in force)."""
    offered = tuple(text.replace("[", " ").replace("]", " ").split())
    active = text.partition("[")[2].partition("]")[0].strip() if "[" in text else None
    if active is None and len(offered) == 1:  # a queue with one choice shows it bare
        active = offered[0]
    return offered, active or None


def _scheduler_text(disk: str, sys_block: str) -> str | None:
    try:
        return Path(sys_block, disk, "queue", "scheduler").read_text()
    except OSError:
        return None


def offered(disk: str, sys_block: str = SYS_BLOCK) -> tuple[str, ...]:
    """The schedulers a disk offers (empty: it has no scheduler file)."""
    text = _scheduler_text(disk, sys_block)
    return parse_schedulers(text)[0] if text is not None else ()


def in_force(disk: str, sys_block: str = SYS_BLOCK) -> str | None:
    """The scheduler in force on a disk; None when it has none (a bio-based device)."""
    text = _scheduler_text(disk, sys_block)
    return parse_schedulers(text)[1] if text is not None else None


def offered_anywhere(sys_block: str = SYS_BLOCK) -> set[str]:
    """Every scheduler some disk of this machine offers (a module outside mainline too)."""
    found: set[str] = set()
    for queue in Path(sys_block).glob("*/queue/scheduler"):
        try:
            found.update(parse_schedulers(queue.read_text())[0])
        except OSError:
            continue
    return found


def known_schedulers(sys_block: str = SYS_BLOCK) -> tuple[str, ...]:
    """Mainline's schedulers, then any other one a disk here offers right now."""
    return tuple(dict.fromkeys([*SCHEDULERS, *sorted(offered_anywhere(sys_block))]))


def check_scheduler(name: str, sys_block: str = SYS_BLOCK, hint: str = "") -> str:
    """A scheduler name, refused unless it is mainline's (or an alias the kernel takes) or
    offered by a disk here: a name no kernel has selects nothing, silently (a udev rule at
    every boot, a sysfs write with EINVAL in the middle of a run). Returns the kernel's own
    name (an alias resolved)."""
    name = name.strip()
    if name in ALIASES:
        return ALIASES[name]
    known = known_schedulers(sys_block)
    if name in known:
        return name
    near = [k for k in known if k.replace("-", "") == name.lower().replace("-", "")]
    raise UsageError(f"unknown IO scheduler {name!r}",
                     f"did you mean {near[0]}?" if near else
                     f"use one of {', '.join(known)}" + (f"{hint}" if hint else ""))


# --- disks -------------------------------------------------------------------------------------


def _read(path: str | Path, default: str = "") -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return default


def sysfs_dir(devno: int) -> str | None:
    """The sysfs directory of block device `devno` (a partition's lies in its disk's)."""
    node = os.path.realpath(f"{SYS_DEV_BLOCK}/{os.major(devno)}:{os.minor(devno)}")
    return node if os.path.isdir(node) else None


def is_partition(sysdir: str) -> bool:
    return os.path.exists(os.path.join(sysdir, "partition"))


def whole_disk_dir(sysdir: str) -> str:
    """The whole disk's sysfs directory for a device's (its parent, for a partition)."""
    return os.path.dirname(sysdir) if is_partition(sysdir) else sysdir


def partition_start(sysdir: str) -> int:
    """Where a partition begins on its disk, in bytes (0 for a whole disk)."""
    return int(_read(os.path.join(sysdir, "start"), "0")) * 512 if is_partition(sysdir) else 0


def devname(sysdir: str) -> str:
    """/dev/NAME of a device's sysfs directory, as its uevent names it (dm-0 is
    /dev/dm-0, a name in a subdirectory keeps it: /dev/mapper/... is a link)."""
    for line in _read(os.path.join(sysdir, "uevent")).splitlines():
        if line.startswith("DEVNAME="):
            return "/dev/" + line.split("=", 1)[1]
    return "/dev/" + os.path.basename(sysdir)


def node_of(devno: int) -> str | None:
    """/dev/NAME of block device `devno`, or None when sysfs does not know it."""
    sysdir = sysfs_dir(devno)
    return devname(sysdir) if sysdir is not None else None


def size_bytes(devno: int) -> int:
    """The size of block device `devno` in bytes (-1 when sysfs does not know it)."""
    sectors = _read(f"{SYS_DEV_BLOCK}/{os.major(devno)}:{os.minor(devno)}/size")
    return int(sectors) * 512 if sectors.isdigit() else -1


def whole_disk(devno: int) -> str | None:
    """The name of the whole disk holding block device `devno` (sda for sda2), or None."""
    sysdir = sysfs_dir(devno)
    return os.path.basename(whole_disk_dir(sysdir)) if sysdir is not None else None


def whole_disk_with_queue(devno: int) -> str:
    """The same, refused (one line) when it has no request queue: not a block device."""
    sysdir = sysfs_dir(devno)
    disk = whole_disk_dir(sysdir) if sysdir is not None else None
    if disk is None or not os.path.exists(os.path.join(disk, "queue")):
        raise NotFoundError(f"no block device queue for device {os.major(devno)}:"
                            f"{os.minor(devno)}", "the path must be on a block device")
    return os.path.basename(disk)


def disks_beneath(name: str, sys_block: str = SYS_BLOCK) -> tuple[str, ...]:
    """The whole disks whose queues serve a device's IO: itself for a disk, the disks
    beneath a device-mapper or md device (through every level of `slaves/`)."""
    out: list[str] = []
    seen: set[str] = set()

    def walk(disk: str) -> None:
        if disk in seen:
            return
        seen.add(disk)
        slaves = Path(sys_block, disk, "slaves")
        below = sorted(p.name for p in slaves.iterdir()) if slaves.is_dir() else []
        if not below:
            out.append(disk)
        for part in below:  # a partition's name: its disk is the directory holding it
            real = os.path.realpath(Path(sys_block, disk, "slaves", part))
            walk(os.path.basename(whole_disk_dir(real)))

    walk(name)
    return tuple(out)


def btrfs_members(devno: int) -> list[int]:
    """Every device of the btrfs whose member `devno` is (/sys/fs/btrfs/FSID/devices/NAME
    links to each member's sysfs directory)."""
    sysdir = sysfs_dir(devno)
    name = os.path.basename(sysdir) if sysdir else ""
    for fs in Path("/sys/fs/btrfs").glob("*/devices"):
        try:
            members = sorted(p.name for p in fs.iterdir())
        except OSError:
            continue
        if name not in members:
            continue
        found = []
        for member in members:
            major, _, minor = _read(Path(fs, member, "dev")).partition(":")
            if major.isdigit() and minor.isdigit():
                found.append(os.makedev(int(major), int(minor)))
        return found or [devno]
    return [devno]


def filesystem_devices(path: str | os.PathLike[str]) -> list[int]:
    """The block devices holding the filesystem of `path`: its st_dev; for btrfs (which
    hands out anonymous st_dev numbers) the source of its mount and the filesystem's other
    members. Empty where no block device holds it (tmpfs, overlay, NFS, FUSE)."""
    name = os.fspath(path)
    try:
        dev = os.stat(name).st_dev
    except OSError:
        return []
    if os.major(dev) != 0:
        return [dev]
    real = os.path.realpath(name)
    above = [m for m in procfs.mounts()
             if real == m.mountpoint or real.startswith(m.mountpoint.rstrip("/") + "/")]
    mount = max(above, key=lambda m: len(m.mountpoint), default=None)
    if mount is None or mount.fstype != "btrfs":
        return []
    try:
        src = os.stat(mount.source)
    except OSError:
        return []
    return btrfs_members(src.st_rdev) if stat.S_ISBLK(src.st_mode) else []


def disks_of(path: str | os.PathLike[str], sys_block: str = SYS_BLOCK) -> tuple[str, ...]:
    """The whole disks whose schedulers serve the filesystem holding `path` (empty where
    no block device holds it)."""
    return disks_of_devices(filesystem_devices(path), sys_block)


def disks_of_devices(devnos: Iterable[int], sys_block: str = SYS_BLOCK) -> tuple[str, ...]:
    """The whole disks whose schedulers serve these block devices (through partitions,
    device-mapper and md)."""
    out: list[str] = []
    for dev in devnos:
        disk = whole_disk(dev)
        if disk is not None:
            out += disks_beneath(disk, sys_block)
    return tuple(dict.fromkeys(out))


def is_hardware(name: str) -> bool:
    """Whether a disk's kernel name is one of `DISK_GLOBS` (what a udev rule can match)."""
    return any(Path(name).match(glob) for glob in DISK_GLOBS)


def rotational(name: str, sys_block: str = SYS_BLOCK) -> bool | None:
    """queue/rotational: whether the kernel takes the disk for a spinning one (None: no
    queue)."""
    return {"1": True, "0": False}.get(_read(Path(sys_block, name, "queue", "rotational")))


def disk_class(name: str, sys_block: str = SYS_BLOCK) -> str | None:
    """NVMe (by its kernel name, as a udev rule matches it), else rotational or
    non-rotational by queue/rotational; None when the disk has no queue."""
    if Path(name).match(NVME_GLOB):
        return NVME
    flag = rotational(name, sys_block)
    return None if flag is None else ROTATIONAL if flag else NON_ROTATIONAL


def devno_text(name: str, sys_block: str = SYS_BLOCK) -> str:
    """A disk's MAJ:MIN, as per-device cgroup files (io.stat, io.cost.qos) key lines."""
    return _read(Path(sys_block, name, "dev"))


def disks(sys_block: str = SYS_BLOCK) -> list[str]:
    """Every disk of /sys/block that has a request queue, by name."""
    try:
        names = sorted(p.name for p in Path(sys_block).iterdir())
    except OSError:
        return []
    return [n for n in names if Path(sys_block, n, "queue").is_dir()]
