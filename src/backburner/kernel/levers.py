"""What each lever of a policy does on one disk: the one model of it, read from sysfs and
cgroupfs (never from a table of kernel versions).

A policy pulls levers; whether one moves anything depends on the disk's scheduler in force
and on the groups the job runs in:

- **the IO class** of the job's processes (ioprio_set): BFQ orders requests by it, and so
  does mq-deadline where it has I/O priorities (its `iosched/prio_aging_expire` exists,
  and is not 0, which turns them off); `none` and `kyber` ignore it. It never reaches
  buffered writeback: the kernel's flusher writes those pages, at its own class.
- **a group's IO weight**: BFQ's (`io.bfq.weight` on cgroup v2, `blkio.bfq.weight` on v1)
  where BFQ is in force; `io.weight` where io.cost is on for the disk (its line in the
  cgroup2 root's `io.cost.qos` says `enable=1`), whatever the scheduler; otherwise none.
- **buffered writeback charged to the job's group**: only cgroup v2 with the io and memory
  controllers on the path to the group; then a weight (and io.prio.class) reaches the pages
  the job dirtied. On v1, or with memory off, the flusher's writes belong to the root.
- **cgroup v2's own IO files**: `io.prio.class` (blk-ioprio: the class of every bio of the
  group, writeback included; it acts where the IO class does), `io.latency`, `io.cost`.
  Whether this kernel has them is read from a group with the io controller on (the root
  has none of the per-group files); a distribution may build without them (Debian 12 has
  neither io.prio.class nor io.latency).

`read_disk` and `read_groups` read the machine; `Effect` is pure: made-up disks and groups
test every answer. Only the IO side is modelled here: a CPU policy or weight acts on any
disk.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from . import block, cgroups

#: The disk levers of a policy, by the key `Policy.settings()` names them with.
IO_CLASS, IO_WEIGHT, GROUP_IO, IO_LATENCY, IO_COST = (
    "io", "io-weight", "group-io", "io-latency", "io-cost")
LEVERS = (IO_CLASS, IO_WEIGHT, GROUP_IO, IO_LATENCY, IO_COST)


@dataclass(frozen=True)
class Disk:
    """One whole disk, as far as priorities go."""

    name: str
    devno: str  # MAJ:MIN
    kind: str | None  # block.ROTATIONAL, NON_ROTATIONAL, NVME; None: no queue
    scheduler: str | None  # in force; None: no scheduler (a bio-based device)
    offered: tuple[str, ...] = ()
    classes: bool | None = False  # the scheduler orders requests by IO class (None: unknown)
    iocost: bool = False  # io.cost is on for this disk


@dataclass(frozen=True)
class GroupIO:
    """The groups a job would run in, as far as its IO goes."""

    hierarchy: str  # "v2" (cgroup v2's io controller), "v1" (blkio), "none"
    writeback: bool = False  # its buffered writeback is charged to its group
    prio_class: bool | None = None  # io.prio.class exists (None: no group to tell from)
    latency: bool | None = None  # io.latency exists (None: no group to tell from)
    cost: bool = False  # io.cost exists (the root's io.cost.qos)


@dataclass(frozen=True)
class Effect:
    """What each lever does on `disk` for a job in `groups` (pure)."""

    disk: Disk
    groups: GroupIO

    @property
    def io_class(self) -> bool:
        """The job's own IO class orders its requests."""
        return bool(self.disk.classes)

    @property
    def weight(self) -> str | None:
        """The file through which a group IO weight acts here; None: no weight acts."""
        if self.disk.iocost and self.groups.hierarchy == "v2":
            return "io.weight"
        if self.disk.scheduler == "bfq":
            return {"v2": "io.bfq.weight", "v1": "blkio.bfq.weight"}.get(self.groups.hierarchy)
        return None

    @property
    def writeback(self) -> bool:
        """The job's buffered writeback is held back by its group's weight here."""
        return self.weight is not None and self.groups.writeback

    @property
    def group_class(self) -> bool:
        """io.prio.class exists and the scheduler honours the class it gives."""
        return bool(self.groups.prio_class) and self.io_class

    def acts(self, lever: str) -> bool:
        """Whether one lever (`LEVERS`) moves anything on this disk."""
        return {IO_CLASS: self.io_class, IO_WEIGHT: self.weight is not None,
                GROUP_IO: self.group_class, IO_LATENCY: bool(self.groups.latency),
                IO_COST: self.groups.cost}[lever]

    def ignored(self, levers: Iterable[str]) -> tuple[str, ...]:
        """Of the levers asked for, those that do nothing on this disk."""
        return tuple(lever for lever in levers if not self.acts(lever))

    def as_dict(self) -> dict[str, Any]:
        """The facts and the answers, for JSON (a status view, a bench run's record)."""
        return {**asdict(self.disk), "groups": asdict(self.groups),
                "acts": {"io-class": self.io_class, "io-weight": self.weight,
                         "writeback": self.writeback, "group-io": self.group_class}}


# --- reading the machine ------------------------------------------------------------------------


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def honours_classes(scheduler: str | None, iosched: Path) -> bool | None:
    """Whether the scheduler in force orders requests by IO class, from what it exposes:
    BFQ does; mq-deadline where it has priorities (`prio_aging_expire`, not 0); `none`
    and `kyber` do not; another (a module outside mainline): None, unknown."""
    if scheduler == "bfq":
        return True
    if scheduler == "mq-deadline":
        aging = _read(iosched / "prio_aging_expire")
        return aging is not None and aging.isdigit() and int(aging) > 0
    if scheduler in (None, "none", "kyber"):
        return False
    return None


def iocost_on(devno: str, cgroup2_root: str | None) -> bool:
    """Whether io.cost is enabled for a disk: its line in the root's io.cost.qos."""
    if cgroup2_root is None or not devno:
        return False
    text = _read(Path(cgroup2_root, "io.cost.qos")) or ""
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0] == devno:
            return "enable=1" in fields[1:]
    return False


def read_disk(name: str, sys_block: str = block.SYS_BLOCK,
              cgroup2_root: str | None = None) -> Disk:
    """A disk's facts now (`cgroup2_root`: where cgroup v2 is mounted, for io.cost)."""
    text = _read(Path(sys_block, name, "queue", "scheduler"))
    offered, active = block.parse_schedulers(text) if text is not None else ((), None)
    devno = block.devno_text(name, sys_block)
    return Disk(name, devno, block.disk_class(name, sys_block), active, offered,
                honours_classes(active, Path(sys_block, name, "queue", "iosched")),
                iocost_on(devno, cgroup2_root))


def read_groups(enables: Iterable[str] = (), mountinfo: str = "/proc/self/mountinfo"
                ) -> GroupIO:
    """The groups a job would get here: cgroup v2 where its root offers the io controller
    (as `priority.plan_cgroup` and systemd choose), else v1 blkio. `enables`: the
    controllers the command turns on along the job's path itself (its plan's, or what
    systemd turns on for the unit's settings); the rest must be on in the root already."""
    unified = cgroups.unified_root(mountinfo)
    root = Path(unified) if unified else None
    available = cgroups.controllers(root) if root else set()
    if root is not None and "io" in available:
        on = cgroups.subtree_control(root) | set(enables)
        sample = cgroups.child_with(root, "io")
        return GroupIO("v2", writeback={"io", "memory"} <= available & on,
                      prio_class=(sample / "io.prio.class").exists() if sample else None,
                      latency=(sample / "io.latency").exists() if sample else None,
                      cost=(root / "io.cost.qos").exists())
    return GroupIO("v1" if cgroups.v1_mount("blkio", mountinfo) else "none")


def effect(name: str, groups: GroupIO, sys_block: str = block.SYS_BLOCK,
           cgroup2: str | None = None) -> Effect:
    """What every lever does on disk `name` for a job in `groups`, now."""
    return Effect(read_disk(name, sys_block, cgroup2), groups)
