"""cgroups as the kernel shows them: where the v1 and v2 hierarchies are mounted, which
group a process is in, a group's controllers and members, and the lines of the per-device
io files (io.latency, io.cost.qos, io.stat).

Everything here only reads; `system/` makes groups and writes their files, and spawn's
pre-exec hook writes a child into its group (`procs_file` names where).
"""

from __future__ import annotations

import os
from pathlib import Path

from . import block, procfs

PROCS = "cgroup.procs"
CONTROLLERS = "cgroup.controllers"
SUBTREE_CONTROL = "cgroup.subtree_control"


# --- hierarchies: where each is mounted ---------------------------------------------------


def unified_root(mountinfo: str = procfs.MOUNTINFO) -> str | None:
    """Where the cgroup2 hierarchy is mounted (None: nowhere)."""
    return next((m.mountpoint for m in procfs.mounts(mountinfo) if m.fstype == "cgroup2"),
                None)


def v1_mount(controller: str, mountinfo: str = procfs.MOUNTINFO) -> str | None:
    """Where the v1 hierarchy of `controller` (blkio, cpu, freezer, net_cls) is mounted
    (None: it is not, or only v2 is)."""
    return next((m.mountpoint for m in procfs.mounts(mountinfo)
                 if m.fstype == "cgroup" and controller in m.all_options), None)


def v1_controllers(mountinfo: str = procfs.MOUNTINFO) -> tuple[str, ...]:
    """The controllers of every mounted v1 hierarchy (named ones, name=systemd, left out)."""
    found = {o for m in procfs.mounts(mountinfo) if m.fstype == "cgroup"
             for o in m.super_options if o not in ("rw", "ro") and "=" not in o}
    return tuple(sorted(found))


def mount_of(path: str) -> tuple[str, int, set[str]] | None:
    """(mount point, cgroup version, options: a v1 hierarchy's controllers) of the
    hierarchy holding `path`."""
    best: tuple[str, int, set[str]] | None = None
    for m in procfs.mounts():
        if m.fstype not in ("cgroup", "cgroup2"):
            continue
        mnt = m.mountpoint
        if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and (
                best is None or len(mnt) > len(best[0])):
            best = (mnt, 2 if m.fstype == "cgroup2" else 1, set(m.all_options))
    return best


# --- a process's group ------------------------------------------------------------------


def group_of(pid: int, root: str) -> str | None:
    """The directory of a process's group in the unified hierarchy mounted at `root`."""
    for num, ctrls, rel in procfs.cgroup_lines(pid):
        if num == "0" and not ctrls:
            return os.path.join(root, rel.lstrip("/")).rstrip("/") or root
    return None


def unified_dir(pid: int) -> str | None:
    """The directory of a process's group in the unified (v2) hierarchy; None where no
    cgroup2 is mounted."""
    root = unified_root()
    return group_of(pid, root) if root is not None else None


def dir_of(pid: int, path_in_hierarchy: str) -> str | None:
    """The group directory of `pid` in the hierarchy (v1 or v2) that holds
    `path_in_hierarchy`."""
    found = mount_of(path_in_hierarchy)
    if found is None:
        return None
    mnt, version, opts = found
    for num, ctrls, rel in procfs.cgroup_lines(pid):
        mine = (num == "0" and not ctrls) if version == 2 else bool(set(ctrls.split(",")) & opts)
        if mine:
            return os.path.join(mnt, rel.lstrip("/")).rstrip("/") or mnt
    return None


# --- a group's files ----------------------------------------------------------------------


def procs_file(group: str) -> str:
    """The file a process is written into to join `group` (and that lists its members)."""
    return os.path.join(group, PROCS)


def pids(group: str) -> list[int]:
    """The processes in `group` itself; none when the group is gone."""
    try:
        return [int(p) for p in Path(group, PROCS).read_text().split()]
    except FileNotFoundError:
        return []


def pids_below(group: str) -> list[int]:
    """The processes of `group` and of every group below it."""
    found: set[int] = set()
    for procs in Path(group).glob(f"**/{PROCS}"):
        try:
            found.update(int(x) for x in procs.read_text().split())
        except OSError:
            continue  # a group removed while we walked
    return sorted(found)


def controllers(group: str | Path) -> set[str]:
    """The controllers `group` may use (its cgroup.controllers); none when unreadable."""
    try:
        return set(Path(group, CONTROLLERS).read_text().split())
    except OSError:
        return set()


def subtree_control(group: str | Path) -> set[str]:
    """The controllers switched on for the groups below `group`."""
    try:
        return set(Path(group, SUBTREE_CONTROL).read_text().split())
    except OSError:
        return set()


def child_with(root: str | Path, controller: str) -> Path | None:
    """A group right under `root` whose `controller` is on: where the per-group files of
    a controller can be seen without making a group (the root has none of them)."""
    try:
        children = sorted(p for p in Path(root).iterdir() if p.is_dir() and not p.is_symlink())
    except OSError:
        return None
    return next((c for c in children if controller in controllers(c)), None)


# --- the io controller's per-device files ----------------------------------------------


def devno_of(name: str, sys_block: str = "/sys/block") -> str:
    """A block device's MAJ:MIN, as the per-device io files key their lines (the block
    layer's fact, asked of `block`)."""
    return block.devno_text(name, sys_block)


def latency_line(devno: str, target_us: int | None) -> str:
    """An io.latency line: the target in µs, or "max" (none)."""
    return f"{devno} target={target_us if target_us is not None else 'max'}"


def qos_line(devno: str, enable: bool) -> str:
    """An io.cost.qos line: io.cost on or off for a device, with the kernel's own QoS
    parameters and device model (io.cost.model) left as they are."""
    return f"{devno} enable={1 if enable else 0}"


def device_line(text: str, devno: str) -> str | None:
    """The line of a per-device file (io.latency, io.cost.qos, io.stat) for one device."""
    return next((ln.strip() for ln in text.splitlines() if ln.split(" ", 1)[0] == devno),
                None)


def io_stat(group: str, devno: str) -> dict[str, int]:
    """One device's counters in a group's io.stat (rbytes, wbytes, rios, wios, ...)."""
    try:
        line = device_line(Path(group, "io.stat").read_text(), devno)
    except OSError:
        return {}
    out = {}
    for item in (line or "").split()[1:]:
        key, _, value = item.partition("=")
        if value.isdigit():
            out[key] = int(value)
    return out
