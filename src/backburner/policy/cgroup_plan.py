"""The groups a policy's weights and group-level knobs need: which hierarchy, which
directories and which files (`plan_cgroup`, `group_files`), and, before anything is
changed, what this machine or this command cannot honour, in one line (`missing`,
`refuse_for_job`).

A process's IO class (`ioprio_set`) covers the IO the process issues itself; the pages it
dirties are written back later by the kernel's flusher, which cgroup v2 charges to the
group that dirtied them. So the group-level knobs reach what the class cannot:
`io.prio.class` (blk-ioprio: every bio charged to the group, writeback included, gets the
class), `io.weight` / `io.bfq.weight`, an `io.latency` target on the group to protect (the
kernel throttles its siblings while it misses it) and `io.cost` (the root's `io.cost.qos`
per device, after which `io.weight` is honoured whatever the IO scheduler).

Groups are created by `system` (they are system state with an undo); this module only
decides, reading where the hierarchies are mounted from `kernel.cgroups`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..base.errors import UnavailableError, UsageError
from ..kernel import cgroups, procfs
from .grammar import Policy


@dataclass(frozen=True)
class CgroupPlan:
    """Directories to create and the weight files to write in each (all under cgroupfs)."""

    version: int
    dirs: dict[str, dict[str, str]]  # path -> {file or "a|b" alternatives: value}
    # cgroup v2 only: controllers that must be on in the root's and in our parent group's
    # cgroup.subtree_control for the job's group to have weight files at all.
    enable: tuple[str, ...] = ()
    root: str = ""

    @property
    def procs_files(self) -> list[str]:
        return [cgroups.procs_file(d) for d in self.dirs]


def plan_cgroup(policy: Policy, name: str, mountinfo: str = procfs.MOUNTINFO) -> CgroupPlan:
    """Choose cgroup v2 where its io/cpu controllers are available, else v1 blkio/cpu.

    v1 needs a child group for BFQ weights (the root has no blkio.bfq.weight), so the job
    always gets its own group ``backburner/<name>`` in each hierarchy used.
    """
    root = cgroups.unified_root(mountinfo)
    v2 = Path(root) if root is not None else None
    v2_controllers = cgroups.controllers(v2) if v2 is not None else set()
    need = {"io"} if policy.io_weight or policy.group_io else set()
    need |= {"cpu"} if policy.cpu_weight else set()
    if v2 is not None and need and need <= v2_controllers:
        if "io" in need and "memory" in v2_controllers:  # writeback charged to the job's
            need.add("memory")  # group only with both on (cgroup-v2.rst, "Writeback")
        files: dict[str, str] = {}
        if policy.io_weight:
            files["io.bfq.weight|io.weight"] = str(policy.io_weight)
        if policy.cpu_weight:
            files["cpu.weight"] = str(policy.cpu_weight)
        if policy.group_io:  # blk-ioprio: the group's bios, its writeback included
            files["io.prio.class"] = policy.group_io
        return CgroupPlan(2, {str(v2 / "backburner" / name): files},
                          enable=tuple(sorted(need)), root=str(v2))
    if policy.group_io:
        where = f"{v2 / cgroups.CONTROLLERS} does not list io" if v2 else "no cgroup2 mount"
        raise UnavailableError(f"group-io needs cgroup v2's io.prio.class: {where}",
                               "use io=idle for the job's own IO")
    dirs: dict[str, dict[str, str]] = {}
    if policy.io_weight:
        blkio = cgroups.v1_mount("blkio", mountinfo)
        if blkio is None:
            raise UnavailableError(
                "an IO weight needs the cgroup blkio (v1) or io (v2) controller, and neither "
                "is mounted",
                "drop --io-weight (or use --no-cgroup), or mount the blkio controller",
            )
        dirs[os.path.join(blkio, "backburner", name)] = {"blkio.bfq.weight": str(policy.io_weight)}
    if policy.cpu_weight:
        cpu = cgroups.v1_mount("cpu", mountinfo)
        if cpu is None:
            raise UnavailableError(
                "a CPU weight needs the cgroup cpu controller (v1 or v2), and it is not mounted",
                "drop --cpu-weight (or use --no-cgroup), or mount the cpu controller",
            )
        shares = max(2, round(policy.cpu_weight * 1024 / 100))
        dirs[os.path.join(cpu, "backburner", name)] = {"cpu.shares": str(shares)}
    return CgroupPlan(1, dirs)


#: What each group-level knob is written to.
FILES = {"group-io": "io.prio.class", "io-latency": "io.latency", "io-cost": "io.cost.qos"}


def missing(policy: Policy, root: str | None) -> str | None:
    """Why this machine cannot apply the policy's cgroup v2 knobs, naming the missing file;
    None when it can (or the policy has none)."""
    knobs = policy.group_controls
    if not knobs:
        return None
    files = ", ".join(FILES[k] for k in knobs)
    what = f"policy {policy.spec()} needs cgroup v2's {files}"
    if root is None:
        return f"{what}, and no cgroup2 hierarchy is mounted"
    top = Path(root)
    if "io" not in cgroups.controllers(top):
        return f"{what}: {top / cgroups.CONTROLLERS} does not list the io controller"
    if policy.io_cost and not (top / "io.cost.qos").exists():
        return f"{what}: {top / 'io.cost.qos'} is missing (a kernel without io.cost)"
    sample = cgroups.child_with(top, "io")
    return missing_in(str(sample), policy) if sample is not None else None


def missing_in(group: str, policy: Policy) -> str | None:
    """The same, seen from a group whose io controller is on: the per-group files exist
    only there (a kernel built without CONFIG_BLK_CGROUP_IOPRIO has no io.prio.class,
    without CONFIG_BLK_CGROUP_IOLATENCY no io.latency; Debian 12's has neither). Where no
    such group exists yet, `missing` cannot tell, and the command asks this of its first
    group, before the groups of its jobs."""
    for knob in ("group-io", "io-latency"):
        path = Path(group, FILES[knob])
        if knob in policy.group_controls and not path.exists():
            return (f"policy {policy.spec()} needs cgroup v2's {FILES[knob]}: {path} is "
                    f"missing (this kernel has no {knob})")
    return None


#: Knobs that need what only bench has: the group to protect (the probe's) and one device
#: (the device under test).
BENCH_ONLY = ("io-latency", "io-cost")


def refuse_for_job(policy: Policy, command: str, under_systemd: bool = False) -> None:
    """What a command that places bulk work (run, govern, apply) cannot honour, in one
    line before anything is changed: an io.latency target belongs on the group to protect
    and io.cost is switched on per device, and such a command has neither; under systemd,
    io.prio.class has no unit property (systemd 252) and the command's groups are
    systemd's, so it would be written behind systemd's back."""
    only = [k for k in policy.group_controls if k in BENCH_ONLY]
    if only:
        verb = "applies" if len(only) == 1 else "apply"
        raise UsageError(f"{command}: {' and '.join(only)} of policy {policy.spec()} "
                         f"{verb} only in bench (the probe's group, the device under test)",
                         "compare them with backburner bench --policy")
    if under_systemd and policy.group_io is not None:
        raise UnavailableError(
            f"{command}: group-io (io.prio.class) has no systemd unit property, and the "
            "groups here are systemd's: it is not written behind systemd's back",
            "io=idle sets the class of the job's own IO; bench compares group-io")


def group_files(policy: Policy) -> dict[str, str]:
    """The files of a job's own group and their values (CgroupDir's settings: "a|b" is the
    first of them that exists, "a?" one written only where it exists). The weight goes to
    `io.weight` (io.cost's, and what systemd's IOWeight= writes) and to `io.bfq.weight`
    where BFQ serves a device."""
    files: dict[str, str] = {}
    if policy.io_weight is not None:
        files["io.weight"] = str(policy.io_weight)
        files["io.bfq.weight?"] = str(policy.io_weight)
    if policy.cpu_weight is not None:
        files["cpu.weight"] = str(policy.cpu_weight)
    if policy.group_io is not None:
        files["io.prio.class"] = policy.group_io
    return files
