"""Devices under test: a testbed loop device we create, or the device holding a path.

Everything here that changes the system goes through a `system.Transaction`: a private
work directory (0700, random name, under the root-owned work root), the testbed image, the
loop device, its queue settings, the filesystem (mkfs), its mount (nosuid, nodev), the
read-only bind mounts the chrooted probe needs. All of it is gone when the transaction ends,
or after `restore`. Nothing is created, followed or mounted through a path another user
could have planted.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import spawn, system
from ..base.errors import NotFoundError, SystemStateError, UsageError
from ..base.quantities import MiB, parse_size
from ..kernel import block, procfs

MIN_DEVICE = 64 * MiB
TESTBED_MOUNT_OPTIONS = "noatime,nosuid,nodev"
MKFS_OPTIONS = ["-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0"]
def _bench_size(text: str) -> int:
    """A bench device holds ext4, the probe's files and the load's files: 64M or more."""
    return parse_size(text, what="bench device size", minimum=MIN_DEVICE)


@dataclass(frozen=True)
class DeviceSpec:
    """A device as typed (`label`, the cell's device) and what it means."""

    kind: str  # testbed | path | slowdisk
    label: str
    size: int = 0
    path: str = ""
    profile: str = ""

    @classmethod
    def parse(cls, text: str) -> DeviceSpec:
        text = text.strip()
        if text.startswith("testbed:"):
            return cls("testbed", text, size=_bench_size(text.split(":", 1)[1]))
        if text.startswith("slowdisk:"):
            profile, sep, size = text.removeprefix("slowdisk:").rpartition(":")
            if not sep or not profile:
                raise UsageError(f"device {text!r} does not parse", "use slowdisk:PROFILE:SIZE")
            from ..slowdisk.profiles import get_profile

            get_profile(profile)  # an unknown profile is refused before anything starts
            return cls("slowdisk", text, size=_bench_size(size), profile=profile)
        path = text.removeprefix("path:")
        if not os.path.exists(path):
            raise UsageError(f"device {text!r}: no such path",
                             "use testbed:SIZE, slowdisk:PROFILE:SIZE or an existing path")
        if not os.path.isdir(path):
            raise UsageError(f"device {text!r} is not a directory",
                             "give a directory on the disk to test; the loads write there")
        return cls("path", text, path=os.path.abspath(path))


@dataclass
class Device:
    """A prepared device: where its queue is, where loads write, where the probe runs."""

    spec: str
    name: str  # kernel name, e.g. loop3
    queue: str  # /sys/block/NAME/queue
    load_dir: str
    chroot: str | None
    workdir: str  # a private directory of ours for scratch files (never in the chroot)
    facts: dict[str, Any] = field(default_factory=dict)
    #: raises SystemStateError when what serves the device has died (a slowdisk daemon)
    check_alive: Callable[[], None] = field(default=lambda: None, repr=False)

    @property
    def scheduler_file(self) -> str:
        return os.path.join(self.queue, "scheduler")

    def schedulers(self) -> list[str]:
        return list(block.offered(self.name))

    def current_scheduler(self) -> str:
        return block.in_force(self.name) or ""

    def counters(self) -> tuple[int, int]:
        """(bytes read, bytes written) from the device's own stat file."""
        fields = Path("/sys/block", self.name, "stat").read_text().split()
        return int(fields[2]) * 512, int(fields[6]) * 512


#: BFQ's weight raising lasts between 3 and 25 s (mainline computes it from the device's rate
#: and clamps it there, and exports no tunable for it unless patched with wr_max_time).
BFQ_WR_MAX_S = 25.0


def weight_raising_s(queue: str, scheduler: str) -> float:
    """How long BFQ favours a newly started queue on this device: its wr_max_time tunable
    (ms) where the kernel exports one, else the upper bound; 0 when low_latency is off or
    the scheduler is not BFQ."""
    if scheduler != "bfq":
        return 0.0
    iosched = Path(queue, "iosched")
    try:
        if (iosched / "low_latency").read_text().strip() == "0":
            return 0.0
    except OSError:
        return 0.0
    try:
        ms = int((iosched / "wr_max_time").read_text().split()[0])
        return ms / 1000 if ms > 0 else BFQ_WR_MAX_S
    except (OSError, ValueError, IndexError):
        return BFQ_WR_MAX_S


#: The least settle that leaves BFQ's stable-merge window behind with room for a load's
#: processes starting a little after the load itself (fio's jobs: up to ~0.1 s).
SETTLE_FLOOR_S = 1.0


def settle_warning(schedulers: tuple[str, ...], settle_s: float, loaded: bool,
                   lives_for_block: bool) -> str | None:
    """One line when a probe would start inside BFQ's stable-merge window of its load: it
    then measures a start merged into the load's queue (2-22x unloaded under 10 readers
    where 1.0-1.3x from 0.65 s on, docs/measurements/startup.md), not the load as it
    stays. A load kept for a block settles past weight raising anyway."""
    if "bfq" not in schedulers or not loaded or lives_for_block or settle_s >= SETTLE_FLOOR_S:
        return None
    return (f"--settle {settle_s:g} s under bfq: a start within {block.BFQ_STABLE_MERGE_S:g} s "
            "of its load's start, at the same IO class, can be merged into the load's queue "
            f"(BFQ's stable merging); settle {SETTLE_FLOOR_S:g} s or more to measure the "
            "load as it stays")


def queue_dir(name: str) -> str:
    """The sysfs queue directory of block device `name` (scheduler, rotational, ...)."""
    return f"/sys/block/{name}/queue"


def _sysfs_name(dev_path: str) -> str:
    return os.path.basename(os.path.realpath(dev_path))


def describe_block(name: str) -> dict[str, Any]:
    base = Path("/sys/block", name)

    def read(rel: str) -> str:
        try:
            return (base / rel).read_text().strip()
        except OSError:
            return ""

    facts: dict[str, Any] = {
        "name": name,
        "model": read("device/model") or read("device/name") or name,
        "size_bytes": int(read("size") or 0) * 512,
        "rotational": read("queue/rotational"),
        "schedulers": list(block.offered(name)),
        "nr_requests": read("queue/nr_requests"),
        "read_ahead_kb": read("queue/read_ahead_kb"),
    }
    backing = read("loop/backing_file")
    if backing:
        facts["loop_backing_file"] = backing
        facts["loop_direct_io"] = read("loop/dio")
        try:
            disk = block.whole_disk_with_queue(os.stat(backing).st_dev)
            facts["backing_device"] = describe_block(disk)
        except (OSError, NotFoundError):
            pass
    return facts


def _fs_of(mountpoint: str) -> str:
    return next((m.fstype for m in reversed(procfs.mounts()) if m.mountpoint == mountpoint),
                "?")


def setup(spec: DeviceSpec, tx: system.Transaction, rotational: int = 1,
          image: str | None = None) -> Device:
    """The device under test, ready: a testbed (made fresh, or from a copy of `image`, a
    filesystem image used as it is), a slowdisk testbed, or the disk holding a path."""
    if spec.kind == "path":
        return _on_path(spec, tx)
    if spec.kind == "slowdisk":
        from ..slowdisk import device as slowdevice

        if image is None:
            blank = slowdevice.serve_blank(tx, spec.profile, spec.size)
            dev = make_testbed(blank.loop, blank.served, blank.workdir, spec.label, tx,
                               rotational)
        else:  # the image's filesystem as it is, behind the simulated disk
            blank = slowdevice.serve_blank(tx, spec.profile, spec.size,
                                           fill=lambda dest: copy_image(image, dest))
            dev = _mount_image(blank.loop, blank.workdir, spec.label, tx, rotational, image)
        dev.facts["slowdisk"] = blank.facts
        dev.check_alive = blank.check_alive
        return dev
    work = str(tx.apply(system.PrivateDir(str(system.work_root()), "testbed-")))
    disk = os.path.join(work, "disk.img")
    if image is not None:
        copy_image(image, disk)
        loop = tx.apply(system.LoopDevice(disk, direct_io=True))
        return _mount_image(loop, work, spec.label, tx, rotational, image)
    tx.apply(system.MadeFile(disk, spec.size))
    loop = tx.apply(system.LoopDevice(disk, direct_io=True))
    return make_testbed(loop, disk, work, spec.label, tx, rotational)


def copy_image(source: str, disk: str) -> None:
    """A copy of a prepared filesystem image (sparse, reflinked where the filesystem can),
    into our private work directory: the user's image is never written to."""
    res = spawn.run_tool(["cp", "--sparse=always", "--reflink=auto", "--", source, disk],
                         timeout=3600)
    if res.status != 0:
        lines = res.stderr.strip().splitlines()
        raise SystemStateError(f"copying {source} failed: {lines[-1] if lines else 'timeout'}")


def _mount_image(loop: str, work: str, label: str, tx: system.Transaction, rotational: int,
                 source: str) -> Device:
    """A copied image's filesystem mounted as it is: its files lie exactly as in the image,
    and its root is the probe's root."""
    name = _sysfs_name(loop)
    queue = queue_dir(name)
    tx.apply(system.SysfsValue(f"{queue}/rotational", str(rotational)))
    mnt = os.path.join(work, "mnt")
    tx.apply(system.MadeDir(mnt))
    tx.apply(system.Mount(loop, mnt, "", TESTBED_MOUNT_OPTIONS))
    load_dir = str(tx.apply(system.PrivateDir(mnt, ".backburner-load-")))
    dev = Device(label, name, queue, load_dir, mnt, work)
    dev.facts = {**describe_block(name), "filesystem": _fs_of(mnt),
                 "mount_options": TESTBED_MOUNT_OPTIONS, "image": source}
    return dev


def _on_path(spec: DeviceSpec, tx: system.Transaction) -> Device:
    """The disk holding a user's directory: the loads write into a private directory made
    there (refused where another user controls the path)."""
    name = block.whole_disk_with_queue(os.stat(spec.path).st_dev)
    load_dir = str(tx.apply(system.PrivateDir(spec.path, ".backburner-load-")))
    dev = Device(spec.label, name, queue_dir(name), load_dir, None, load_dir)
    dev.facts = {**describe_block(name), "filesystem": _fs_of(_mount_of(spec.path))}
    return dev


def make_testbed(loop: str, image: str, work: str, label: str, tx: system.Transaction,
                 rotational: int) -> Device:
    """Queue settings, ext4, its mount (nosuid, nodev), the chroot's and loads' folders."""
    name = _sysfs_name(loop)
    queue = queue_dir(name)
    tx.apply(system.SysfsValue(f"{queue}/rotational", str(rotational)))
    tx.apply(system.Filesystem(loop, image, "ext4", MKFS_OPTIONS))
    mnt = os.path.join(work, "mnt")
    tx.apply(system.MadeDir(mnt))
    tx.apply(system.Mount(loop, mnt, "ext4", TESTBED_MOUNT_OPTIONS))
    root = os.path.join(mnt, "root")
    load_dir = os.path.join(mnt, "load")
    os.mkdir(root, 0o755)
    os.mkdir(load_dir, 0o700)
    dev = Device(label, name, queue, load_dir, root, work)
    dev.facts = {**describe_block(name), "filesystem": "ext4",
                 "mount_options": TESTBED_MOUNT_OPTIONS}
    return dev


def bind_virtual(root: str, tx: system.Transaction) -> None:
    """/proc, /sys and /dev inside the probe's chroot, read-only (device nodes such as
    /dev/null stay writable: a read-only mount does not stop writes to a device)."""
    for virtual in ("/proc", "/sys", "/dev"):
        target = os.path.join(root, virtual.lstrip("/"))
        os.makedirs(target, exist_ok=True)
        # /dev keeps its device nodes usable (dev); nothing is set-uid in any of them
        tx.apply(system.Mount(virtual, target, "", "bind,ro,nosuid"
                              + (",dev" if virtual == "/dev" else "")))


def _mount_of(path: str) -> str:
    path = os.path.realpath(path)
    while not os.path.ismount(path):
        path = os.path.dirname(path)
    return path


def busy_devices(interval: float = 1.0, threshold_mbps: float = 5.0) -> list[str]:
    """Devices doing heavy IO right now, from two reads of /proc/diskstats."""
    import time

    def snap() -> dict[str, int]:
        out = {}
        for line in Path("/proc/diskstats").read_text().splitlines():
            f = line.split()
            if f[2].startswith(("loop", "ram")) or len(f) < 10:
                continue
            out[f[2]] = (int(f[5]) + int(f[9])) * 512
        return out

    a = snap()
    time.sleep(interval)
    b = snap()
    rate = {d: (b[d] - a.get(d, b[d])) / interval / 1e6 for d in b}
    return [f"{d} ({r:.0f} MB/s)" for d, r in rate.items() if r > threshold_mbps]
