"""`apply --status`: what `apply` installed, whether each file is what apply would write
now, and whether it is live — like `tuned-adm verify`, read-only.

A file can be installed and do nothing: a udev rule acts only on the next uevent of a disk,
a drop-in only after systemd reloads its units, and its settings only from the unit's next
start. So liveness is read where it takes effect: the scheduler in force in
`/sys/block/*/queue/scheduler` for every disk the rule matches; the drop-in in the unit's
DropInPaths as systemd reports it over D-Bus (and no reload pending); and, for a running
unit, the IO class and CPU policy of each of its processes (ioprio_get, sched_getscheduler)
and the weights and place of its cgroup (io.weight, cpu.weight, its slice), as the kernel
has them — not the unit's properties, which say what systemd asked for.

The verdict is an exit status: `LIVE` (0), `NOT_LIVE` (1), `DRIFTED` (2: a file is not what
apply would write now — edited, or written by another version), `NOTHING` (3).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from .. import systemd
from ..base.errors import BackburnerError
from ..kernel import block, cgroups, priorities
from ..policy import disks, grammar
from ..policy.grammar import Policy
from ..policy.live import has_policy
from . import diskrules
from . import install as apply

LIVE, NOT_LIVE, DRIFTED, NOTHING = 0, 1, 2, 3
CGROUP_ROOT = "/sys/fs/cgroup"

ReadThread = Callable[[int], "dict[str, int] | None"]


@dataclass(frozen=True)
class Unit:
    """What systemd says of a unit (org.freedesktop.systemd1.Unit and .Service/.Slice)."""

    load_state: str  # loaded, not-found, masked, bad-setting, error
    active_state: str = "inactive"
    dropins: tuple[str, ...] = ()  # DropInPaths
    fragment: str = ""  # FragmentPath
    need_reload: bool = False  # NeedDaemonReload: a file changed since systemd read it
    cgroup: str = ""  # ControlGroup, e.g. /backburner.slice/x.service


class Systemd(Protocol):
    def unit(self, name: str) -> Unit: ...


@dataclass
class Item:
    """One installed file: whether it is what apply writes now, and whether it is live."""

    path: str
    what: str
    drift: str | None = None  # why it is not what apply would write now
    live: bool | None = None  # None: not checked (another root than the running system)
    notes: list[str] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        if self.drift:
            return "drifted"
        return {True: "live", False: "not live", None: "installed"}[self.live]


@dataclass(frozen=True)
class Status:
    items: list[Item]
    checked_live: bool
    leftover: str | None = None  # live state apply's files left behind when taken out
    #: what the installed policies' IO levers (the background policy's, with none) do on
    #: each mounted disk now (the running system only)
    disks: tuple[disks.DiskReport, ...] = ()

    @property
    def exit_status(self) -> int:
        if not self.items:
            return NOTHING
        if any(i.drift for i in self.items):
            return DRIFTED
        return NOT_LIVE if any(i.live is False for i in self.items) else LIVE


# --- systemd over D-Bus ------------------------------------------------------------------------


class BusSystemd:
    """`Systemd` through the D-Bus client: LoadUnit, then the unit's properties."""

    def __init__(self, bus: systemd.bus.Bus) -> None:
        self._bus = bus

    def unit(self, name: str) -> Unit:
        from ..systemd.bus import UNIT

        b = self._bus
        path = b.unit_path(name)
        load, active = str(b.get(path, UNIT, "LoadState")), str(b.get(path, UNIT, "ActiveState"))
        if load == "not-found":  # may still be active: a unit whose file went with a reload
            return Unit(load, active)
        kind = {"service": "Service", "slice": "Slice"}.get(name.rsplit(".", 1)[-1])
        cgroup = str(b.get(path, f"org.freedesktop.systemd1.{kind}", "ControlGroup")) \
            if kind else ""
        return Unit(load, active,
                    tuple(str(p) for p in b.get(path, UNIT, "DropInPaths")),
                    str(b.get(path, UNIT, "FragmentPath")),
                    bool(b.get(path, UNIT, "NeedDaemonReload")), cgroup)


@contextmanager
def running_systemd() -> Iterator[Systemd | None]:
    """The running system's systemd, or None where systemd is not PID 1 (no drop-in is
    live there)."""
    if not os.path.isdir(systemd.BOOTED_DIR):
        yield None
        return
    from ..systemd.bus import Bus

    with Bus.connect() as bus:
        yield BusSystemd(bus)


def unit_known(view: Systemd) -> Callable[[str], bool]:
    """For `apply.check_units`: a unit exists when systemd finds a file for it."""
    return lambda name: view.unit(name).load_state != "not-found"


# --- reading it all ------------------------------------------------------------------------------


def status(root: str = "/", view: Systemd | None = None, *, live: bool = True,
           sys_block: str = "/sys/block", cgroup_root: str = CGROUP_ROOT,
           read_thread: ReadThread = priorities.snapshot_thread) -> Status:
    """Every file apply wrote under root, checked against what apply would write now and,
    with `live` (the running system), against the kernel and systemd (`view`; None where
    systemd is not PID 1)."""
    base = Path(os.path.abspath(root))
    items = []
    for path in apply.installed(str(base)):
        item = _check_file(path, base)
        if live and not item.drift:  # systemd sees the file at its place under /
            _check_live(item, path, "/" + str(path.relative_to(base)), view, sys_block,
                        cgroup_root, read_thread)
        items.append(item)
    here = live and sys_block == block.SYS_BLOCK  # a made-up sysfs has no disks to say
    return Status(items, live, _leftover(items, view) if live else None,
                  _disks(items, view) if here else ())


def _disks(items: list[Item], view: Systemd | None) -> tuple[disks.DiskReport, ...]:
    """The per-disk facts for the policies the drop-ins were written for."""
    policies = [p for i in items if i.what.startswith("drop-in")
                and (p := apply.recorded_policy(Path(i.path).read_text(errors="replace")))]
    return tuple(disks.reports(policies or [grammar.BUILTIN["background"]],
                               systemd_owns=view is not None))


def _leftover(items: list[Item], view: Systemd | None) -> str | None:
    """Our slice still active after its file was taken out: systemd forgets its
    StopWhenUnneeded= with the file, so a unit restarted after the reload leaves it
    behind, empty, until it is stopped."""
    if view is None or any(i.what == f"slice {apply.SLICE}" for i in items):
        return None
    unit = view.unit(apply.SLICE)  # run's transient slice has its file under /run
    if unit.active_state == "active" and not unit.fragment:
        return (f"{apply.SLICE} is still active without its unit file: systemctl stop "
                f"{apply.SLICE} once no unit runs in it")
    return None


def _check_file(path: Path, base: Path) -> Item:
    text = path.read_text(errors="replace")
    rel = str(path.relative_to(base))
    if path.name == apply.IOCOST_RULE:
        costs = apply.recorded_iocost(text)
        item = Item(str(path), "udev io.cost rule")
        expected = apply.iocost_udev(costs) if costs else None
    elif path.suffix == ".rules":
        rules = apply.recorded_rules(text)
        item = Item(str(path), "udev scheduler rule" + ("s" if rules and len(rules) > 1
                                                          else ""))
        expected = apply.udev_rules(rules) if rules else None
    else:
        unit = apply.SLICE if path.name == apply.SLICE else path.parent.name.removesuffix(".d")
        item = Item(str(path), f"slice {unit}" if unit == apply.SLICE else f"drop-in of {unit}")
        policy = apply.recorded_policy(text)
        expected = None
        if policy is not None:
            try:
                expected = apply.slice_unit(policy) if unit == apply.SLICE \
                    else apply.dropin(unit, policy, apply.recorded_net(text))
            except BackburnerError:
                expected = None
    if expected is None:
        item.drift = f"{rel} does not say what apply wrote it for: edited by hand?"
    elif expected != text:
        item.drift = f"{rel} differs from what apply writes for it now: edited, or " \
                     "written by another version (apply again, or --remove)"
    return item


def _check_live(item: Item, path: Path, seen: str, view: Systemd | None, sys_block: str,
                cgroup_root: str, read_thread: ReadThread) -> None:
    text = path.read_text(errors="replace")
    if path.name == apply.IOCOST_RULE:
        for cost in apply.recorded_iocost(text) or []:
            live, notes = diskrules.iocost_live(cost, sys_block, cgroup_root)
            item.live, item.notes = (item.live is not False) and live, item.notes + notes
        return
    if path.suffix == ".rules":
        for rule in apply.recorded_rules(text) or []:  # not drifted: some
            live, notes = scheduler_live(rule, sys_block)
            item.live, item.notes = (item.live is not False) and live, item.notes + notes
        return
    policy = apply.recorded_policy(text)
    assert policy is not None
    if view is None:
        item.live, item.notes = False, ["systemd is not PID 1 here: nothing loads it"]
        return
    if path.name == apply.SLICE:
        item.live, item.notes = slice_live(view.unit(apply.SLICE), seen, policy, cgroup_root)
        return
    unit = path.parent.name.removesuffix(".d")
    state = view.unit(unit)
    item.live, item.notes = dropin_live(unit, state, seen, policy, cgroup_root, read_thread)
    if apply.recorded_net(text) and item.live:
        item.live, notes = net_live(unit, state, view.unit(apply.NET_SERVICE), cgroup_root)
        item.notes += notes


def matched_disks(rule: apply.SchedulerRule, sys_block: str = "/sys/block") -> list[Path]:
    """The disks of /sys/block the rule's matches select, as udev evaluates them."""
    return diskrules.matches(rule.kernel, rule.rotational, sys_block)


def scheduler_live(rule: apply.SchedulerRule, sys_block: str = "/sys/block"
                   ) -> tuple[bool, list[str]]:
    """Whether every disk the rule matches has its scheduler in force."""
    found = matched_disks(rule, sys_block)
    if not found:
        return True, ["matches no disk of this machine"]
    live, notes = True, []
    for dev in found:
        active = block.in_force(dev.name, sys_block)
        if active == rule.scheduler:
            notes.append(f"{dev.name}: {active} in force")
        else:
            live = False
            notes.append(f"{dev.name}: {active or '?'} in force, not {rule.scheduler} "
                         "(udevadm control --reload; udevadm trigger --action=change "
                         f"/sys/block/{dev.name})")
    return live, notes


def _loaded(unit: Unit, name: str, path: str, dropin: bool) -> tuple[bool, list[str]]:
    if unit.load_state == "not-found":
        return False, [f"{name}: systemd has no such unit"]
    if unit.load_state != "loaded":
        return False, [f"{name}: systemd says it is {unit.load_state}"]
    if (path not in unit.dropins) if dropin else (unit.fragment != path):
        return False, [f"{name}: systemd has not loaded {path} (systemctl daemon-reload)"]
    if unit.need_reload:
        return False, [f"{name}: changed since systemd read it (systemctl daemon-reload)"]
    return True, [f"{name}: loaded by systemd"]


def dropin_live(name: str, unit: Unit, path: str, policy: Policy, cgroup_root: str = CGROUP_ROOT,
                read_thread: ReadThread = priorities.snapshot_thread) -> tuple[bool, list[str]]:
    """Loaded by systemd; and, when the unit runs, every one of its processes at the
    policy's IO class and CPU policy, its group in our slice with the policy's weights."""
    live, notes = _loaded(unit, name, path, dropin=True)
    if not live:
        return live, notes
    if unit.active_state not in ("active", "reloading", "activating") or not unit.cgroup:
        notes.append(f"{name} is {unit.active_state}: the drop-in takes effect when it starts")
        return live, notes
    group = Path(cgroup_root + unit.cgroup)
    restart = f" (systemctl restart {name})"
    pids = _procs(group)
    wrong = [pid for pid in pids
             if (snap := read_thread(pid)) is not None and not at_policy(snap, policy)]
    if wrong:
        live = False
        notes.append(f"{name}: {len(wrong)} of {len(pids)} processes not at {_what(policy)}, "
                     f"e.g. PID {wrong[0]}{restart}")
    else:
        notes.append(f"{name}: {len(pids)} processes at {_what(policy)}")
    if systemd.slice_properties(policy):
        if not unit.cgroup.startswith(f"/{apply.SLICE}/"):
            live = False
            notes.append(f"{name} runs in {os.path.dirname(unit.cgroup)}, not in "
                         f"{apply.SLICE}{restart}")
        bad = _weights_off(group, policy)
        if bad:
            live = False
            notes.append(f"{name}: {bad}{restart}")
    return live, notes


def net_live(name: str, unit: Unit, service: Unit, cgroup_root: str = CGROUP_ROOT,
             pinned: Callable[[], set[int]] | None = None,
             attached: Callable[[str], set[int]] | None = None) -> tuple[bool, list[str]]:
    """A drop-in with --net: when the unit runs, the network service runs too and the
    programs it pinned are the ones attached to the unit's group (the kernel's word:
    BPF_PROG_QUERY), not ones of an earlier run of the service or none."""
    if unit.active_state not in ("active", "reloading", "activating") or not unit.cgroup:
        return True, []
    if service.active_state != "active":
        return False, [f"{name} runs but {apply.NET_SERVICE} is {service.active_state}: its "
                       f"traffic is not paced (systemctl restart {name})"]
    ids = (pinned or _pinned_programs)()
    on = (attached or _attached_programs)(cgroup_root + unit.cgroup)
    if not ids or not ids <= on:
        return False, [f"{name}: the programs {apply.NET_SERVICE} pinned are not attached to "
                       f"its group (systemctl restart {name})"]
    return True, [f"{name}: its traffic paced by {apply.NET_SERVICE}"]


def _pinned_programs() -> set[int]:
    from .. import system
    from ..kernel.bpf import calls as bpf
    from ..system.bpf import PIN_EGRESS, PIN_SOCK_OPS

    found = system.pinned_ids(bpf.BPFFS)
    return {found[n] for n in (PIN_EGRESS, PIN_SOCK_OPS) if n in found}


def _attached_programs(group: str) -> set[int]:
    from ..kernel.bpf import cgroup_programs

    return cgroup_programs.policy_programs_on(group)


def slice_live(unit: Unit, path: str, policy: Policy, cgroup_root: str = CGROUP_ROOT
               ) -> tuple[bool, list[str]]:
    """Loaded from our file; while active (a unit in it runs), its group has the weights."""
    live, notes = _loaded(unit, apply.SLICE, path, dropin=False)
    if live and unit.active_state == "active" and unit.cgroup:
        bad = _weights_off(Path(cgroup_root + unit.cgroup), policy)
        if bad:
            live = False
            notes.append(f"{apply.SLICE}: {bad}")
        else:
            notes.append(f"{apply.SLICE}: {', '.join(_weights(policy))} in force")
    return live, notes


def _weights(policy: Policy) -> list[str]:
    return [f"{k}={v}" for k, v in systemd.slice_properties(policy).items()]


def _weights_off(group: Path, policy: Policy) -> str | None:
    """What is not as the policy says among a group's io.weight and cpu.weight."""
    off = []
    if policy.io_weight is not None:
        text = _read(group / "io.weight")
        default = text.split("\n")[0].removeprefix("default ").strip() if text else None
        if default != str(policy.io_weight):
            off.append(f"io.weight {default or 'absent'}, not {policy.io_weight}")
    if policy.cpu_weight is not None:
        text = _read(group / "cpu.weight")
        if text != str(policy.cpu_weight):
            off.append(f"cpu.weight {text or 'absent'}, not {policy.cpu_weight}")
    return "; ".join(off) or None


def at_policy(snap: dict[str, int], policy: Policy) -> bool:
    """Whether a process's priorities (`priorities.snapshot_thread`) are the ones a unit
    with the policy's drop-in gets: the IO class (and level, for classes that have one:
    systemd sets the idle class with its default level 4, which the kernel keeps and that
    class ignores), the CPU policy and nice."""
    io = policy.io
    if io is not None and io.klass != "none":
        got = priorities.IOPrio.from_value(snap["io"])
        if got.klass != io.klass or (io.klass != "idle" and got.level != io.level):
            return False
    return has_policy(snap, replace(policy, io=None))


def _procs(group: Path) -> list[int]:
    """The processes of a group and of the groups below it."""
    return cgroups.pids_below(str(group))


def _what(policy: Policy) -> str:
    parts = [f"IO class {policy.io}" if policy.io else "",
             f"CPU {policy.cpu}" if policy.cpu else ""]
    return " and ".join(p for p in parts if p) or "their inherited priorities"


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def render(st: Status) -> str:
    """What `apply --status` prints: one verdict line per file, its findings indented."""
    tail = []
    for r in st.disks:  # what the policy's IO levers do on each disk, installed or not
        tail.append(f"{'ok' if not r.ignored else 'warning':9} disk {r.name}: "
                    f"{disks.summary(r)}")
        tail += [f"          fix: {r.fix}"] if r.fix else []
    tail += [f"note: {st.leftover}"] if st.leftover else []
    if not st.items:
        return "\n".join(["nothing installed: no file written by backburner apply", *tail]) + "\n"
    lines = []
    for item in st.items:
        lines.append(f"{item.verdict:9} {item.path} ({item.what})")
        lines += [f"          {item.drift}"] if item.drift else []
        lines += [f"          {n}" for n in item.notes]
    summary = {LIVE: "live: every file is as apply writes it, and in force" if st.checked_live
               else "installed: every file is as apply writes it (not the running system: "
               "liveness not checked)",
               NOT_LIVE: "installed, not live: see the lines above",
               DRIFTED: "drifted: a file is not what apply would write now"}[st.exit_status]
    return "\n".join([*lines, summary, *tail]) + "\n"


def render_json(st: Status) -> str:
    """`apply --status --format json`: the same findings for a machine (a CI job, an image
    pipeline), with the exit status it ends with."""
    doc = {"format": "backburner-apply-status", "version": 1,
           "exit_status": st.exit_status, "checked_live": st.checked_live,
           "files": [{"path": i.path, "what": i.what, "verdict": i.verdict, "drift": i.drift,
                      "live": i.live, "notes": i.notes} for i in st.items],
           "leftover": st.leftover, "disks": [r.as_dict() for r in st.disks]}
    return json.dumps(doc, indent=1) + "\n"
