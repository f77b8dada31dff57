"""What `doctor` looks at, read from the machine without changing anything.

Everything here reads: /sys/block/*/queue/scheduler, /proc/self/mountinfo and the cgroup2
root's files, /dev nodes, PATH, importlib's finders (a module is found, not imported),
statvfs of the work directory (or of its nearest existing parent: nothing is created). Two
things talk to something else, and only to see that it answers: systemd's D-Bus API, where
systemd owns the cgroup tree, and the PostgreSQL server a result address names (opened
read-only). One command runs: `perf stat -e instructions true`, which counts and writes
nothing.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from .. import system, systemd
from ..base.errors import BackburnerError
from ..kernel import block, procfs
from ..kernel import cgroups as kcgroups
from ..net import netcls
from ..policy import cgroup_plan, disks, grammar
from ..policy.disks import DiskReport

#: the tools the checks name (bench's testbed, its loads and file discovery, trace, FUSE)
TOOLS = ("fio", "strace", "perf", "unshare", "mkfs.ext4", "fusermount3")
#: the Python modules the extras bring
MODULES = ("numpy", "scipy", "matplotlib", "rich", "mfusepy", "psycopg", "jeepney")
#: block devices that are not disks: their schedulers say nothing about the hardware
VIRTUAL = ("loop", "ram", "zram", "nbd", "dm-", "md", "sr")


@dataclass(frozen=True)
class Cgroups:
    """The cgroup hierarchies mounted, as the checks need them."""

    v1: tuple[str, ...] = ()  # v1 controllers mounted (blkio, cpu, freezer, ...)
    v2_root: str | None = None  # where cgroup2 is mounted (None: it is not)
    v2_available: tuple[str, ...] = ()  # its root's cgroup.controllers
    v2_enabled: tuple[str, ...] = ()  # its root's cgroup.subtree_control

    @property
    def version(self) -> str:
        if self.v1 and self.v2_root:
            return "hybrid (v1, and a cgroup2 mount)"
        return "v1" if self.v1 else "v2" if self.v2_root else "none"


@dataclass(frozen=True)
class Facts:
    """Everything the checks look at; `read()` fills it in, tests make it up."""

    euid: int
    kernel: str
    disks: dict[str, tuple[str, ...]]  # a real disk -> the IO schedulers it offers
    #: what a loop device offers: an existing one's list, else every blk-mq queue's
    #: elevators together (they are registered for all); None: nothing to tell from
    loop_schedulers: tuple[str, ...] | None
    loop_control: bool  # /dev/loop-control: loop devices can be made
    cgroups: Cgroups
    weights: str | None  # why cgroup IO/CPU weights cannot be applied; None: they can
    systemd_owns: bool
    systemd_bus: str | None  # why systemd's D-Bus API did not answer; None: it did
    fuse: bool  # /dev/fuse
    fanotify: bool
    tools: dict[str, str | None]  # name -> where on PATH (None: not found)
    modules: dict[str, bool]  # importable
    perf_trace: str | None  # why trace's perf engine cannot run here; None: it can
    work_dir: str
    free_bytes: int | None  # free in the work directory's filesystem
    net_cls: bool = False  # the cgroup v1 net_cls controller (/proc/cgroups): see netcls
    db: str | None = None  # a result database address that was asked about
    db_from_env: bool = False  # it is $BACKBURNER_DB: bench writes there by default
    db_error: str | None = None  # why it could not be opened; None: it was
    extra: dict[str, str] = field(default_factory=dict)
    #: what the background policy's IO levers do on each mounted disk (`disks.reports`)
    disk_reports: tuple[DiskReport, ...] = ()


def block_schedulers(sys_block: str = "/sys/block") -> tuple[dict[str, tuple[str, ...]],
                                                               tuple[str, ...] | None]:
    """(real disk -> schedulers, what loop devices offer)."""
    disks: dict[str, tuple[str, ...]] = {}
    loops: tuple[str, ...] | None = None
    registered: set[str] = set()
    for dev in sorted(Path(sys_block).iterdir()):
        offered = block.offered(dev.name, sys_block)
        if not offered:
            continue
        if len(offered) > 1 or offered != ("none",):
            registered.update(offered)
        if dev.name.startswith("loop"):
            loops = loops or offered
        elif not dev.name.startswith(VIRTUAL) and (dev / "device").exists():
            disks[dev.name] = offered
    if loops is None and registered:
        order = block.SCHEDULERS
        loops = tuple(sorted(registered, key=lambda s: (order.index(s) if s in order else 9, s)))
    return disks, loops


def cgroups(mountinfo: str = procfs.MOUNTINFO) -> Cgroups:
    v2_root = kcgroups.unified_root(mountinfo)
    available = enabled = ()
    if v2_root is not None:
        available = tuple(sorted(kcgroups.controllers(v2_root)))
        enabled = tuple(sorted(kcgroups.subtree_control(v2_root)))
    return Cgroups(kcgroups.v1_controllers(mountinfo), v2_root, available, enabled)


def weights_refused() -> str | None:
    """Why the background policy's weights could not be put in a cgroup here (as bench and
    run plan them), or None."""
    try:
        cgroup_plan.plan_cgroup(grammar.BUILTIN["background"], "doctor")
    except BackburnerError as err:
        return str(err)
    return None


def systemd_answer() -> str | None:
    from ..systemd.bus import Bus

    try:
        Bus.connect(timeout_s=3.0).close()
    except BackburnerError as err:
        return str(err)
    except OSError as err:
        return err.strerror or str(err)
    return None


def perf_trace(perf: str | None) -> str | None:
    """Why `trace`'s perf engine cannot run here, as `trace engines` says it (one answer
    for both: the engine's own); None: it can. A CPU counter (a hardware PMU) is not
    needed, and perf is not run (it leaves a file in /tmp behind for a moment)."""
    if perf is None:
        return "perf is not installed"
    from ..trace import engines

    return engines.ENGINES["perf"]().missing()


def free_bytes(path: str) -> int | None:
    """Free space of the filesystem `path` will be on (its nearest existing parent)."""
    where = os.path.abspath(path)
    while not os.path.exists(where):
        where = os.path.dirname(where)
    try:
        st = os.statvfs(where)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def database(target: str) -> str | None:
    """Why the result database could not be opened read-only; None when it could."""
    from ..store import backend_for

    try:
        backend = backend_for(target)
        backend.close(backend.open(True))
    except BackburnerError as err:
        return str(err)
    return None


def read(db: str | None = None, db_from_env: bool = False) -> Facts:
    """The machine, now. `db`: a result database address to try (a file is not tried: bench
    makes a new one); `db_from_env`: it is $BACKBURNER_DB, where bench writes by default."""
    offered, loops = block_schedulers()
    tools = {name: shutil.which(name) for name in TOOLS}
    owns = systemd.manages_cgroups(systemd.read_facts())
    here = os.getcwd() if os.path.isdir(".") else None
    asked = db if db and "://" in db else None
    work = str(system.work_root())
    return Facts(
        euid=os.geteuid(), kernel=f"Linux {platform.release()} ({platform.machine()})",
        disks=offered, loop_schedulers=loops, loop_control=os.path.exists("/dev/loop-control"),
        cgroups=cgroups(), weights=weights_refused(), systemd_owns=owns,
        systemd_bus=systemd_answer() if owns else None, fuse=os.path.exists("/dev/fuse"),
        fanotify=os.path.isdir("/proc/sys/fs/fanotify"), tools=tools,
        modules={m: importlib.util.find_spec(m) is not None for m in MODULES},
        perf_trace=perf_trace(tools["perf"]), work_dir=work, free_bytes=free_bytes(work),
        net_cls=netcls.available(), db=asked, db_from_env=asked is not None and db_from_env,
        db_error=database(asked) if asked else None,
        disk_reports=tuple(disks.reports(cwd=here, systemd_owns=owns)))
