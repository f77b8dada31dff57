"""cgroup v2's own IO controls: the files that carry a policy's group-level knobs, the lines
written into them, and whether this machine has them.

A process's IO class (`ioprio_set`) covers the IO the process issues itself; the pages it
dirties are written back later by the kernel's flusher, which cgroup v2 charges to the group
that dirtied them. So the group-level knobs reach what the class cannot: `io.prio.class`
(blk-ioprio: every bio charged to the group, writeback included, gets the class),
`io.weight` / `io.bfq.weight`, an `io.latency` target on the group to protect (the kernel
throttles its siblings while it misses it) and `io.cost` (the root's `io.cost.qos` per
device, after which `io.weight` is honoured whatever the IO scheduler).

`missing` says, before anything is changed, which file a policy needs and the machine lacks,
in one line. Everything here only reads.
"""

from __future__ import annotations

import os
from pathlib import Path

from .base.errors import UnavailableError, UsageError
from .kernel import block, levers, procfs
from .priority import Policy

#: What each group-level knob is written to.
FILES = {"group-io": "io.prio.class", "io-latency": "io.latency", "io-cost": "io.cost.qos"}


def unified_root(mountinfo: str = "/proc/self/mountinfo") -> str | None:
    """Where the cgroup2 hierarchy is mounted (None: nowhere): the kernel layer's answer."""
    return levers.cgroup2_root(mountinfo)


def _controllers(group: Path) -> set[str]:
    try:
        return set((group / "cgroup.controllers").read_text().split())
    except OSError:
        return set()


def _child_with_io(root: Path) -> Path | None:
    """A group under the root whose io controller is on: where the per-group io files of
    this kernel can be seen without making a group (the root has none of them)."""
    try:
        children = sorted(p for p in root.iterdir() if p.is_dir() and not p.is_symlink())
    except OSError:
        return None
    return next((c for c in children if "io" in _controllers(c)), None)


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
    if "io" not in _controllers(top):
        return f"{what}: {top / 'cgroup.controllers'} does not list the io controller"
    if policy.io_cost and not (top / "io.cost.qos").exists():
        return f"{what}: {top / 'io.cost.qos'} is missing (a kernel without io.cost)"
    sample = _child_with_io(top)
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


def devno_of(name: str, sys_block: str = "/sys/block") -> str:
    """A block device's MAJ:MIN, as the per-device io files key their lines."""
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


def group_of(pid: int, root: str) -> str | None:
    """The directory of a process's group in the unified hierarchy."""
    for num, ctrls, rel in procfs.cgroup_lines(pid):
        if num == "0" and not ctrls:
            return os.path.join(root, rel.lstrip("/")).rstrip("/") or root
    return None
