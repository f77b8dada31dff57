"""The block device a file's filesystem lives on: node, partition start, size, identity.

st_dev names the filesystem's device for ext4 and xfs; /sys/dev/block/MAJ:MIN tells
whether it is a partition (its ``start`` file, in 512-byte sectors, is where it begins on
the whole disk, its parent directory) and its ``uevent`` names the /dev node. btrfs hands
out anonymous st_dev numbers (major 0), so for it the device is the source of the mount
that holds the file, and the filesystem must sit on that one device.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from .. import spawn
from ..base.errors import NotFoundError, UnavailableError
from ..kernel import block, procfs

log = logging.getLogger(__name__)

SYS_DEV_BLOCK = "/sys/dev/block"


@dataclass(frozen=True)
class BlockDevice:
    """Where FIEMAP's device offsets point: ``path`` (a partition or a whole disk).

    ``start`` is the partition's first byte on ``disk`` (0 for a whole disk), so an offset
    ``x`` on ``path`` is byte ``start + x`` of ``disk``.
    """

    path: str
    devno: int
    disk: str
    start: int
    size: int
    logical_block_size: int
    fstype: str
    mountpoint: str

    @property
    def major_minor(self) -> str:
        return f"{os.major(self.devno)}:{os.minor(self.devno)}"

    @property
    def is_partition(self) -> bool:
        return self.path != self.disk


#: the mount table's entries (kept under the names this module's callers use)
MountEntry = procfs.MountInfo
parse_mountinfo = procfs.parse_mountinfo


def mount_of(path: str, devno: int) -> MountEntry | None:
    """The mount holding ``path``: matching st_dev when the filesystem has a real one,
    else the deepest mount point above the path (btrfs subvolumes, anonymous st_dev)."""
    mounts = procfs.mounts()
    real = os.path.realpath(path)
    above = [m for m in mounts
             if real == m.mountpoint or real.startswith(m.mountpoint.rstrip("/") + "/")]
    by_dev = [m for m in above if m.devno == devno]
    pool = by_dev or (above if os.major(devno) == 0 else [])
    return max(pool, key=lambda m: len(m.mountpoint), default=None)


def _sysfs_read(path: str, default: str = "") -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return default


def _node(sysdir: str, devno: int) -> str:
    node = block.devname(sysdir)
    try:
        st = os.stat(node)
    except OSError:
        raise NotFoundError(f"{node} (device {os.major(devno)}:{os.minor(devno)}) does not "
                            "exist", "is /dev populated (devtmpfs)?") from None
    if not stat.S_ISBLK(st.st_mode) or st.st_rdev != devno:
        raise NotFoundError(f"{node} is not block device {os.major(devno)}:{os.minor(devno)}")
    return node


def block_device(devno: int, fstype: str = "", mountpoint: str = "") -> BlockDevice:
    """The /dev node, partition start and geometry of block device ``devno``."""
    sysdir = block.sysfs_dir(devno)
    if sysdir is None:
        raise UnavailableError(f"device {os.major(devno)}:{os.minor(devno)} is not a block "
                               "device", "the file must be on a block-device filesystem")
    path = _node(sysdir, devno)
    disk_dir, start = block.whole_disk_dir(sysdir), block.partition_start(sysdir)
    disk_devno = _sysfs_read(os.path.join(disk_dir, "dev"))
    disk = path if disk_dir == sysdir else _node(
        disk_dir, os.makedev(*(int(x) for x in disk_devno.split(":"))))
    lbs = int(_sysfs_read(os.path.join(disk_dir, "queue", "logical_block_size"), "512"))
    log.debug("device %d:%d is %s on %s from byte %d", os.major(devno), os.minor(devno), path,
              disk, start)
    return BlockDevice(path=path, devno=devno, disk=disk, start=start,
                       size=int(_sysfs_read(os.path.join(sysdir, "size"), "0")) * 512,
                       logical_block_size=lbs, fstype=fstype, mountpoint=mountpoint)


def device_of(path: str | os.PathLike[str], st_dev: int | None = None) -> BlockDevice:
    """The block device holding ``path``'s data (see the module docstring)."""
    name = os.fspath(path)
    dev = os.stat(name).st_dev if st_dev is None else st_dev
    mount = mount_of(name, dev)
    fstype = mount.fstype if mount else "?"
    where = mount.mountpoint if mount else ""
    if os.major(dev) != 0:
        return block_device(dev, fstype, where)
    if mount is None or fstype != "btrfs":
        raise UnavailableError(f"{name} is on {fstype}, which is not on a block device",
                               "extents maps files on ext4, xfs or btrfs")
    try:
        src = os.stat(mount.source)
    except OSError:
        raise NotFoundError(f"{mount.source}, the device of {where}, does not exist") from None
    if not stat.S_ISBLK(src.st_mode):
        raise UnavailableError(f"{where} is mounted from {mount.source}, not a block device")
    _require_one_btrfs_device(src.st_rdev, where)
    return block_device(src.st_rdev, fstype, where)


def _require_one_btrfs_device(devno: int, where: str) -> None:
    """A btrfs over several devices spreads a file over them: one device map cannot hold
    it."""
    members = block.btrfs_members(devno)
    if len(members) > 1:
        raise UnavailableError(f"the btrfs on {where} spans {len(members)} devices",
                               "extents maps single-device filesystems")


def fs_uuid(device: str) -> str | None:
    """The filesystem UUID on ``device`` (blkid), or None where blkid cannot tell."""
    try:
        res = spawn.run_tool(["blkid", "-p", "-o", "value", "-s", "UUID", device], 30.0)
    except FileNotFoundError:
        return None
    if res.status != 0:
        return None
    return res.stdout.strip() or None


def machine_id() -> str | None:
    """This installation's identity (/etc/machine-id): a map saved elsewhere is refused."""
    return _sysfs_read("/etc/machine-id") or None


@dataclass(frozen=True)
class Claim:
    """Whether device-mapper could take ``device`` now: a table naming a device that a
    mounted filesystem (or md, or a holder other than device-mapper) claims is refused by
    the kernel ("Device or resource busy"). ``free`` is None where it could not be told."""

    free: bool | None
    why: str


def claim_of(dev: BlockDevice) -> Claim:
    """Tried the way the kernel decides: an exclusive open fails while another holder has
    the device. device-mapper shares one claim among its tables, so a device held only by
    dm devices can still be named by another table. The probe holds the claim for the
    moment of an open and a close: a mount or table load racing it fails "busy" once."""
    try:
        fd = os.open(dev.path, os.O_RDONLY | os.O_EXCL | os.O_CLOEXEC)
    except PermissionError as err:
        if os.geteuid() != 0:
            return Claim(None, f"could not tell whether {dev.path} is claimed (needs root)")
        return Claim(None, f"could not tell whether {dev.path} is claimed: {err.strerror} "
                     "even as root (a device cgroup, a security module or a missing "
                     "capability refuses the open)")
    except OSError as err:
        if err.errno != errno.EBUSY:
            return Claim(None, f"could not open {dev.path}: {err.strerror}")
        return _busy(dev)
    os.close(fd)
    return Claim(True, f"nothing claims {dev.path} now")


def _busy(dev: BlockDevice) -> Claim:
    mounted = sorted({m.mountpoint for m in procfs.mounts()  # btrfs: by source
                      if m.devno == dev.devno or os.path.realpath(m.source) == dev.path})
    if mounted:
        return Claim(False, f"{dev.path} is mounted at {', '.join(mounted)}: a mounted "
                     "filesystem claims its device, so dmsetup create fails with 'Device or "
                     "resource busy' until it is unmounted")
    holders_dir = f"{SYS_DEV_BLOCK}/{dev.major_minor}/holders"
    holders = sorted(os.listdir(holders_dir)) if os.path.isdir(holders_dir) else []
    if holders and all(h.startswith("dm-") for h in holders):
        return Claim(True, f"{dev.path} is held by device-mapper ({', '.join(holders)}), "
                     "which shares its claim with a new table")
    held = f" by {', '.join(holders)}" if holders else ""
    return Claim(False, f"{dev.path} is claimed{held}: dmsetup create fails with 'Device or "
                 "resource busy' while it is")
