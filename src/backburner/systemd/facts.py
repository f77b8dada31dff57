"""systemd as the owner of the cgroup tree: whether it is, and how a policy reads as unit
settings and slice weights.

Where systemd is PID 1 it owns the cgroup hierarchy ("a single writer"): groups that others
make at its root are moved or removed behind their backs. There a job with cgroup weights
goes into a transient scope that systemd makes for it (`job.run_in_scope`, through the
D-Bus client in `bus`), and only where systemd does not manage cgroups does `run` write
cgroup files itself.

Everything here is pure (data in, data out) except `read_facts`, which only looks.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path

from ..base.errors import UsageError
from ..kernel.priorities import CPUPolicy, IOPrio
from ..policy.grammar import Policy

log = logging.getLogger(__name__)

#: sd_booted(3): "systemd is the init system" is exactly "this directory exists".
BOOTED_DIR = "/run/systemd/system"

_IO_CLASS = {"rt": "realtime", "be": "best-effort", "idle": "idle"}
_CPU_POLICY = {"idle": "idle", "batch": "batch", "normal": "other"}
_UNIT_NAME = re.compile(r"[A-Za-z0-9:_.\\@-]+")
_UNIT_TYPES = (".service",)


@dataclass(frozen=True)
class Facts:
    """What decides whether systemd owns the cgroup tree (read by `read_facts`)."""

    booted: bool  # /run/systemd/system exists
    pid1_cgroup: str  # the text of /proc/1/cgroup


def read_facts(booted_dir: str = BOOTED_DIR, pid1_cgroup: str = "/proc/1/cgroup") -> Facts:
    try:
        cgroup = Path(pid1_cgroup).read_text()
    except OSError:
        cgroup = ""
    return Facts(os.path.isdir(booted_dir), cgroup)


def manages_cgroups(facts: Facts) -> bool:
    """systemd is PID 1 (sd_booted) and has put itself into its own ``init.scope`` — the
    group it creates when it takes over the tree, in the unified hierarchy (``0::``) or in
    its named v1 one (``name=systemd``). A container's systemd shows the same, relative to
    its cgroup namespace. Anything else (another init, systemd without cgroup management)
    leaves the groups to us."""
    if not facts.booted:
        return False
    for line in facts.pid1_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        num, controllers, path = parts
        ours = (num == "0" and controllers == "") or controllers == "name=systemd"
        if ours and (path.rstrip("/") + "/").endswith("/init.scope/"):
            return True
    return False


def scope_properties(policy: Policy) -> dict[str, str]:
    """The cgroup settings of a policy as unit properties. A scope takes only cgroup and
    kill settings (IOSchedulingClass=, Nice= and friends belong to services: systemd-run
    refuses them for --scope), so the IO class and CPU policy are applied to systemd-run
    itself before it starts, and the job inherits them across its exec."""
    props = {}
    if policy.io_weight is not None:
        props["IOWeight"] = str(policy.io_weight)
    if policy.cpu_weight is not None:
        props["CPUWeight"] = str(policy.cpu_weight)
    return props


def service_properties(policy: Policy) -> dict[str, str]:
    """A policy as [Service] settings of a unit drop-in (systemd.exec(5), systemd.resource-
    control(5)): what a distribution would ship for a bulk-work unit."""
    props: dict[str, str] = {}
    if policy.io is not None:
        props.update(_io_properties(policy.io))
    if policy.cpu is not None:
        props.update(_cpu_properties(policy.cpu))
    props.update(scope_properties(policy))
    return props


def _io_properties(io: IOPrio) -> dict[str, str]:
    if io.klass == "none":  # "no class": the kernel derives it from the CPU nice value
        return {}
    props = {"IOSchedulingClass": _IO_CLASS[io.klass]}
    if io.klass in ("be", "rt"):
        props["IOSchedulingPriority"] = str(io.level)
    return props


def _cpu_properties(cpu: CPUPolicy) -> dict[str, str]:
    props = {"CPUSchedulingPolicy": _CPU_POLICY[cpu.kind]}
    if cpu.nice is not None:
        props["Nice"] = str(cpu.nice)
    return props


def scope_unit_name(pid: int) -> str:
    """A name no other run can have at the same time: our PID plus a random part."""
    return f"backburner-run-{pid}-{secrets.token_hex(4)}.scope"


#: Where `run` puts a job by default: a slice beside user.slice and system.slice, so its
#: weights rank it against the desktop, not only against other system services.
DEFAULT_SLICE = "backburner.slice"


def slice_properties(policy: Policy) -> dict[str, int]:
    """The weights a policy gives the slice its jobs run in (systemd.resource-control(5))."""
    props = {}
    if policy.io_weight is not None:
        props["IOWeight"] = policy.io_weight
    if policy.cpu_weight is not None:
        props["CPUWeight"] = policy.cpu_weight
    return props


def check_unit_name(name: str) -> str:
    """A service unit name as systemctl would take it ("foo" -> "foo.service"); refused
    when it could not be a unit name (a path, a newline, another unit type)."""
    name = name.strip()
    if name and "." not in name:
        name += ".service"
    if not name or len(name) > 255 or not _UNIT_NAME.fullmatch(name) or name.startswith("."):
        raise UsageError(f"{name!r} is not a unit name",
                         "give a service unit such as apt-daily-upgrade.service")
    if not name.endswith(_UNIT_TYPES):
        raise UsageError(f"{name}: only service units take [Service] settings",
                         "give a .service unit")
    return name


def check_slice_name(name: str) -> str:
    """A slice name: `backburner.slice`, or a nested one (`bulk-updates.slice` lives in
    `bulk.slice`). Not a path: systemd builds the path from the name's dashes."""
    if "/" in name:
        raise UsageError(f"{name!r} is not a slice name: a slice is named, not given as a path",
                         "e.g. --slice backburner.slice (a dash nests: a-b.slice is in a.slice)")
    if not name.endswith(".slice") or name in (".slice", "-.slice") or name.startswith("-") \
            or "--" in name or not all(c.isalnum() or c in "-_.:\\" for c in name):
        raise UsageError(f"{name!r} is not a slice name", "e.g. --slice backburner.slice")
    return name
