"""Devices under test: a testbed loop device we create, or the device holding a path.

Everything here that changes the system goes through a `system.Transaction`: the testbed
image, the loop device, its queue settings, the filesystem mount, the bind mounts the
chrooted probe needs. All of it is gone when the transaction ends, or after `restore`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import spawn, system
from ..errors import NotFoundError, SystemStateError, UnavailableError, UsageError
from ..units import MiB, parse_size

WORK_ROOT = "/var/tmp/backburner"
def _bench_size(text: str) -> int:
    """A bench device holds ext4, the probe's files and the load's files: 64M or more."""
    return parse_size(text, what="bench device size", minimum=64 * MiB)


@dataclass(frozen=True)
class DeviceSpec:
    kind: str  # testbed | path | slowdisk
    size: int = 0
    path: str = ""
    profile: str = ""
    rotational: int | None = None

    @classmethod
    def parse(cls, text: str) -> DeviceSpec:
        if text.startswith("testbed:"):
            return cls("testbed", size=_bench_size(text.split(":", 1)[1]))
        if text.startswith("slowdisk:"):
            parts = text.split(":")
            if len(parts) != 3:
                raise UsageError(f"device {text!r} does not parse", "use slowdisk:PROFILE:SIZE")
            from ..slowdisk.profiles import get_profile

            get_profile(parts[1])  # an unknown profile is refused before anything starts
            return cls("slowdisk", size=_bench_size(parts[2]), profile=parts[1])
        if text.startswith("path:"):
            text = text[5:]
        if not os.path.exists(text):
            raise UsageError(f"device {text!r}: no such path",
                             "use testbed:SIZE, slowdisk:PROFILE:SIZE or an existing path")
        return cls("path", path=os.path.abspath(text))


@dataclass
class Device:
    """A prepared device: where its queue is, where loads write, where the probe runs."""

    spec: str
    name: str  # kernel name, e.g. loop3
    queue: str  # /sys/block/NAME/queue
    load_dir: str
    chroot: str | None
    facts: dict[str, Any] = field(default_factory=dict)

    @property
    def scheduler_file(self) -> str:
        return os.path.join(self.queue, "scheduler")

    def schedulers(self) -> list[str]:
        return Path(self.scheduler_file).read_text().replace("[", "").replace("]", "").split()

    def current_scheduler(self) -> str:
        return system.selected(Path(self.scheduler_file).read_text())

    def counters(self) -> tuple[int, int]:
        """(bytes read, bytes written) from the device's own stat file."""
        fields = Path("/sys/block", self.name, "stat").read_text().split()
        return int(fields[2]) * 512, int(fields[6]) * 512


def _sysfs_name(dev_path: str) -> str:
    return os.path.basename(os.path.realpath(dev_path))


def _whole_disk(devno: int) -> str:
    """The disk (not partition) for a st_dev, via /sys/dev/block."""
    link = os.path.realpath(f"/sys/dev/block/{os.major(devno)}:{os.minor(devno)}")
    if os.path.exists(os.path.join(link, "partition")):
        link = os.path.dirname(link)
    if not os.path.exists(os.path.join(link, "queue")):
        raise NotFoundError(f"no block device queue for device {os.major(devno)}:"
                            f"{os.minor(devno)}", "the path must be on a block device")
    return os.path.basename(link)


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
        "schedulers": read("queue/scheduler").replace("[", "").replace("]", "").split(),
        "nr_requests": read("queue/nr_requests"),
        "read_ahead_kb": read("queue/read_ahead_kb"),
    }
    backing = read("loop/backing_file")
    if backing:
        facts["loop_backing_file"] = backing
        facts["loop_direct_io"] = read("loop/dio")
        try:
            facts["backing_device"] = describe_block(_whole_disk(os.stat(backing).st_dev))
        except (OSError, NotFoundError):
            pass
    return facts


def _fs_of(mountpoint: str) -> str:
    for line in Path("/proc/self/mounts").read_text().splitlines():
        parts = line.split()
        if parts[1] == mountpoint:
            return parts[2]
    return "?"


def setup(spec: DeviceSpec, tx: system.Transaction, rotational: int = 1) -> Device:
    if spec.kind == "path":
        name = _whole_disk(os.stat(spec.path).st_dev)
        load_dir = os.path.join(spec.path, f".backburner-load-{os.getpid()}")
        tx.apply(system.MadeDir(load_dir))
        tx.apply(system.TreeOwned(load_dir))
        dev = Device(spec.path, name, f"/sys/block/{name}/queue", load_dir, None)
        dev.facts = {**describe_block(name), "filesystem": _fs_of(_mount_of(spec.path))}
        return dev
    if spec.kind == "slowdisk":
        from ..slowdisk import device as slowdevice

        return slowdevice.bench_device(spec, tx, _make_testbed_on)
    work = os.path.join(WORK_ROOT, f"testbed-{os.getpid()}")
    # Shared by concurrent runs, so never undone: a run that created it must not fail its
    # undo (rmdir: not empty) because another run's testbed is still inside.
    os.makedirs(WORK_ROOT, exist_ok=True)
    tx.apply(system.MadeDir(work))
    image = os.path.join(work, "disk.img")
    tx.apply(system.MadeFile(image, spec.size))
    loop = tx.apply(system.LoopDevice(image, direct_io=True))
    return _make_testbed_on(loop, work, f"testbed:{spec.size >> 20}M", tx, rotational)


def _make_testbed_on(loop: str, work: str, label: str, tx: system.Transaction,
                     rotational: int) -> Device:
    """Queue settings, ext4, mount, chroot skeleton: shared by testbed and slowdisk."""
    name = _sysfs_name(loop)
    queue = f"/sys/block/{name}/queue"
    tx.apply(system.SysfsValue(f"{queue}/rotational", str(rotational)))
    mkfs(loop)
    mnt = os.path.join(work, "mnt")
    tx.apply(system.MadeDir(mnt))
    tx.apply(system.Mount(loop, mnt, "ext4", "noatime"))
    root = os.path.join(mnt, "root")
    load_dir = os.path.join(mnt, "load")
    os.makedirs(root)
    os.makedirs(load_dir)
    dev = Device(label, name, queue, load_dir, root)
    dev.facts = {**describe_block(name), "filesystem": "ext4", "mount_options": "noatime"}
    return dev


MKFS_TIMEOUT_S = 300.0


def mkfs(dev: str) -> None:
    """ext4 on `dev`, inode tables and journal written now (not lazily during the trials)."""
    argv = ["mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", dev]
    try:
        res = spawn.run_tool(argv, MKFS_TIMEOUT_S)
    except FileNotFoundError:
        raise UnavailableError("mkfs.ext4 is not installed", "apt-get install e2fsprogs") from None
    if res.status != 0:
        lines = [ln.strip() for ln in res.stderr.splitlines() if ln.strip()]
        if lines:
            why = f": {lines[-1]}"
        elif res.status is None:
            why = f" (timed out after {MKFS_TIMEOUT_S:.0f} s, or killed by a signal)"
        else:
            why = f" (exit status {res.status})"
        raise SystemStateError(f"mkfs.ext4 on {dev} failed{why}")


def bind_virtual(root: str, tx: system.Transaction) -> None:
    """/proc, /sys and /dev inside the probe's chroot (read-only where it can be)."""
    for virtual in ("/proc", "/sys", "/dev"):
        target = os.path.join(root, virtual.lstrip("/"))
        os.makedirs(target, exist_ok=True)
        tx.apply(system.Mount(virtual, target, "", "bind"))


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
