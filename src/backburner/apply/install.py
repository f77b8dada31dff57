"""`apply`: write what a distribution would ship to keep bulk work on the back burner — a
udev rule that selects an IO scheduler for matching disks, and systemd drop-ins that put
bulk-work services (updates, backups, indexers) in the idle IO class with low weights, in
a slice of low weight beside user.slice.

Why all of them: with BFQ on cgroup v2, a desktop reader in user.slice against a bulk reader
got 50 % of the disk unprotected, 86 % with the bulk at the idle IO class in system.slice,
75 % with the bulk only in a slice of IOWeight=10, and 87 % with both (docs/guide/systemd.md,
benchmarks/slice_shares.py). BFQ serves groups by weight before it looks at the classes
inside them, so the class alone leaves the group's share to its slice's weight, and the
weight alone leaves the bulk competing inside its slice at the reader's class.

Rendering is pure (`udev_rule`, `dropin`, `plan`); installing goes through `system`: each
file is an `InstalledFile` change, journaled with the old content, in one transaction that
is committed only when every file is in place. An interrupted apply is undone whole, and
`apply --remove` takes out every file carrying our marker line.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .. import system, systemd
from ..base.errors import ExistsError, NotFoundError, UsageError
from ..files import safepath
from ..kernel import block, levers
from ..policy import cgroup_plan
from ..policy.grammar import Policy, parse_policy
from ..system.bpf import bpf_program_settings
from . import diskrules
from .diskrules import (  # what apply writes for disks; named here for its callers
    CGROUP2,
    IOCOST_RULE,
    MARKER,
    UDEV_DIR,
    UDEV_RULE,
    IoCostRule,
    SchedulerRule,
    check_scheduler,  # noqa: F401
    iocost_udev,
    recorded_iocost,  # noqa: F401
    recorded_rule,  # noqa: F401
    recorded_rules,  # noqa: F401
    udev_rule,  # noqa: F401
    udev_rules,
)
from .names import NET_MODES, NET_SERVICE

log = logging.getLogger(__name__)

Report = Callable[[str], None]

UNIT_DIR = "etc/systemd/system"
DROPIN = "50-backburner.conf"
#: The slice of the units apply puts on the back burner: a unit file of its own (written
#: with the drop-ins) carries the weights, at the level of user.slice and system.slice.
SLICE = systemd.DEFAULT_SLICE
#: Where systemd looks for unit files (systemd.unit(5), the system manager's search path).
UNIT_PATHS = ("etc/systemd/system", "run/systemd/system", "usr/local/lib/systemd/system",
              "usr/lib/systemd/system", "lib/systemd/system")


@dataclass(frozen=True)
class File:
    """A file to install: its path under the root, and its text."""

    path: str  # relative, e.g. etc/udev/rules.d/65-backburner-scheduler.rules
    content: str


#: Where systemd finds them: bpffs, as systemd mounts it.
NET_PROGRAMS = tuple(bpf_program_settings())


def check_net(net: str | None) -> None:
    if net is not None and net not in NET_MODES:
        raise UsageError(f"unknown --net mode {net!r}: {', '.join(NET_MODES)}")


def dropin(unit: str, policy: Policy, net: str | None = None) -> str:
    """A unit's drop-in: the policy's IO class, CPU policy and weights, and, when it has
    weights, the unit in our slice (which carries them against user.slice: a weight inside
    system.slice ranks the unit only against other system services). With `net`
    ("background"): the network service's pinned programs attached to the unit's group
    (BPFProgram=), and the service wanted and started first, so the pins are there when
    systemd attaches them."""
    check_net(net)
    props = systemd.service_properties(policy)
    if not props and net is None:
        raise UsageError(f"policy {policy.name!r} sets nothing for {unit}",
                         "give --policy background, or --io/--cpu/--io-weight/--cpu-weight, "
                         "or --net background")
    if systemd.slice_properties(policy):
        props["Slice"] = SLICE
    what = f"policy {policy.spec()}" + (f"; net {net}" if net else "")
    lines = [MARKER, f"# {unit}: bulk work on the back burner ({what}).",
             *(["[Unit]", f"Wants={NET_SERVICE}", f"After={NET_SERVICE}"] if net else []),
             "[Service]", *(f"{k}={v}" for k, v in props.items()),
             *(f"BPFProgram={p}" for p in (NET_PROGRAMS if net else ()))]
    return "\n".join(lines) + "\n"


def slice_unit(policy: Policy) -> str:
    """The slice's unit file: the policy's weights at the level of user.slice. Stopped by
    systemd when no unit in it runs, as `run`'s transient slice is: nothing of it lingers
    once its units have left (after `--remove`, a reload and their restart)."""
    props = systemd.slice_properties(policy)
    lines = [MARKER, f"# {SLICE}: bulk work beside user.slice and system.slice "
             f"(policy {policy.spec()}).", "[Unit]", "Description=backburner: bulk work",
             "Before=slices.target", "StopWhenUnneeded=yes", "[Slice]",
             *(f"{k}={v}" for k, v in props.items())]
    return "\n".join(lines) + "\n"


def plan(rule: SchedulerRule | Sequence[SchedulerRule] | None, units: Sequence[str],
         policy: Policy, net: str | None = None, iocost: Sequence[IoCostRule] = ()
         ) -> list[File]:
    """The files `apply` writes, from explicit choices: the scheduler rules (one, or one
    per class of disk), io.cost's, and the units' drop-ins with their slice."""
    check_net(net)
    rules = [rule] if isinstance(rule, SchedulerRule) else list(rule or [])
    if not rules and not units and not iocost:
        raise UsageError("nothing to apply", "give --scheduler, --iocost and/or --unit")
    if net is not None and not units:
        raise UsageError("--net is for units' drop-ins", "give --unit UNIT")
    if units:  # unit drop-ins: systemd's groups, and no unit property for io.prio.class
        cgroup_plan.refuse_for_job(policy, "apply", under_systemd=True)
    files = [File(f"{UDEV_DIR}/{UDEV_RULE}", udev_rules(rules))] if rules else []
    if iocost:
        files.append(File(f"{UDEV_DIR}/{IOCOST_RULE}", iocost_udev(iocost)))
    for name in dict.fromkeys(systemd.check_unit_name(u) for u in units):
        files.append(File(f"{UNIT_DIR}/{name}.d/{DROPIN}", dropin(name, policy, net)))
    if units and systemd.slice_properties(policy):
        files.append(File(f"{UNIT_DIR}/{SLICE}", slice_unit(policy)))
    return files


_RECORDED = re.compile(r"\(policy ([^();]+)(?:; net ([a-z]+))?\)\.$")


def recorded_policy(text: str) -> Policy | None:
    """The policy a drop-in or slice file of ours was written for (its second line)."""
    lines = text.splitlines()
    m = _RECORDED.search(lines[1]) if len(lines) > 1 else None
    if m is None:
        return None
    try:
        return parse_policy(m.group(1))
    except UsageError:
        return None


def recorded_net(text: str) -> str | None:
    """The network mode a drop-in of ours was written with (its second line), if any."""
    lines = text.splitlines()
    m = _RECORDED.search(lines[1]) if len(lines) > 1 else None
    return m.group(2) if m else None


def unit_file_exists(unit: str, root: str | Path) -> bool:
    """Whether a unit file (or, for an instance, its template) is in one of systemd's
    search paths under root: how an image is checked, where no systemd runs to ask."""
    names = [unit]
    if "@" in unit:  # foo@bar.baz.service comes from foo@.service
        names.append(f"{unit.partition('@')[0]}@.{unit.rsplit('.', 1)[1]}")
    return any(os.path.lexists(Path(root) / d / n) for d in UNIT_PATHS for n in names)


def check_units(units: Sequence[str], root: str = "/",
                known: Callable[[str], bool] | None = None) -> None:
    """Refuse a unit that does not exist, before anything is written: a drop-in for a
    misspelt name would change nothing, silently. On the running system systemd is asked
    (`known`: it knows generated and runtime units too); under another root, or where
    systemd is not PID 1, the unit's file is looked for."""
    for name in dict.fromkeys(systemd.check_unit_name(u) for u in units):
        found = known(name) if known is not None else unit_file_exists(name, root)
        if not found:
            raise NotFoundError(f"unit {name} does not exist",
                                "check the name (systemctl list-unit-files), or --force to "
                                "write its drop-in anyway")


def render(files: Sequence[File], root: str = "/") -> str:
    """What --dry-run prints: each file's full path and text."""
    return "\n".join(f"### {os.path.join(root, f.path)}\n{f.content}" for f in files)


def _root(root: str, *, as_root: bool = True) -> Path:
    path = Path(os.path.abspath(root))
    if not path.is_dir():
        raise NotFoundError(f"root {root} is not a directory", "create it first")
    safepath.check_chain(path, "root directory")
    if str(path) == "/" and as_root:
        system.require_root("installing udev rules and systemd drop-ins under /etc")
    return path


def _ours(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.readline().rstrip(b"\n") == MARKER.encode()
    except OSError:
        return False


def _missing_dirs(path: Path) -> list[Path]:
    """The directories that must be made for `path`, outermost first; refused when one of
    them exists as something else."""
    missing = []
    for parent in path.parents:
        if parent.is_dir() and not parent.is_symlink():
            break
        if os.path.lexists(parent):
            raise UsageError(f"{parent} is in the way: it is not a directory")
        missing.append(parent)
    return missing[::-1]


def preflight(files: Sequence[File], root: str = "/", *, force: bool = False,
              as_root: bool = True) -> list[tuple[Path, File]]:
    """What `install` refuses before it writes anything (the root, a file of someone
    else's in the way, a directory that is not one), for `--dry-run` to refuse the same;
    `as_root=False` leaves out only the need to be root (a dry run changes nothing)."""
    base = _root(root, as_root=as_root)
    targets = [(base / f.path, f) for f in files]
    for path, _ in targets:
        if os.path.lexists(path) and not _ours(path) and not force:
            raise ExistsError(f"{path} exists and was not written by backburner",
                              "move it away, or use --force to replace it")
        _missing_dirs(path)
    return targets


def install(files: Sequence[File], root: str = "/", *, force: bool = False,
            report: Report = lambda _m: None) -> list[str]:
    """Write every file under root, all or nothing; returns the paths written."""
    targets = preflight(files, root, force=force)
    done = []
    with system.Transaction("apply") as tx:
        for path, f in targets:
            for directory in _missing_dirs(path):
                tx.apply(system.MadeDir(str(directory)))
            tx.apply(system.InstalledFile(str(path), f.content))
            done.append(str(path))
            report(f"installed {path}")
        system.commit(tx)
    return done


def installed(root: str = "/") -> list[Path]:
    """Files under root that `apply` wrote (they start with our marker line)."""
    base = Path(os.path.abspath(root))
    found = [*(base / UDEV_DIR).glob("*backburner*.rules"),
             *(base / UNIT_DIR).glob(f"*.d/{DROPIN}"), base / UNIT_DIR / SLICE]
    return sorted(p for p in found if p.is_file() and not p.is_symlink() and _ours(p))


def remove(root: str = "/", report: Report = lambda _m: None) -> list[str]:
    """Take out every file `apply` wrote under root (and drop-in directories left empty),
    all or nothing."""
    base = _root(root)
    paths = installed(str(base))
    with system.Transaction("apply-remove") as tx:
        for path in paths:
            if path.name == IOCOST_RULE and str(base) == "/":
                _iocost_off(tx, path, report)
            tx.apply(system.InstalledFile(str(path), None,
                                          prune_parent=path.name == DROPIN))
            report(f"removed {path}")
        system.commit(tx)
    return [str(p) for p in paths]


def _iocost_off(tx: system.Transaction, path: Path, report: Report) -> None:
    """io.cost off again (and the kernel's model back) on every disk the rule turned it on
    for: the value goes with the file, not at the next boot."""
    rules = recorded_iocost(path.read_text(errors="replace")) or []
    qos, model = os.path.join(CGROUP2, "io.cost.qos"), os.path.join(CGROUP2, "io.cost.model")
    for rule in rules:
        for dev in diskrules.matches(rule.kernel, rule.rotational):
            devno = block.devno_text(dev.name)
            if not levers.iocost_on(devno, CGROUP2):
                continue
            tx.apply(system.DeviceLine(qos, f"{devno} enable=0", off="enable=0"))
            if rule.model is not None:
                tx.apply(system.DeviceLine(model, f"{devno} ctrl=auto", off="ctrl=auto"))
            report(f"io.cost off for {dev.name}")


RELOAD_HINT = ("to use them now: systemctl daemon-reload; udevadm control --reload && "
               "udevadm trigger --subsystem-match=block --action=change; a running unit "
               "takes its drop-in at its next start (systemctl restart UNIT)")
REMOVE_HINT = ("to take them out of the running system: systemctl stop UNIT; systemctl "
               "daemon-reload; systemctl start UNIT for each unit running with a drop-in "
               "(stopped first, backburner.slice stops with its last unit; a restart after "
               "the reload leaves it behind, empty, until systemctl stop backburner.slice)")
