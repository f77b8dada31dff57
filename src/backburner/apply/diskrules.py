"""The udev rules `apply` writes for disks: an IO scheduler per class of disk, and io.cost
on for a class; rendered, read back from a file of ours, and matched against the disks here.

A class of disk is what a udev rule can tell at the disk's uevent: its kernel name and
`queue/rotational`. NVMe namespaces are `nvme*` (they report non-rotational too, so the
solid-state class leaves them out, to be chosen apart); rotational and solid-state disks
are the other whole disks with a scheduler (SCSI/SATA/USB, virtio, Xen, MMC/SD) by their
rotational flag. `--scheduler recommended` writes one rule per class with the scheduler
`disks.RECOMMENDED` names (startup.md measured it for rotational disks, ssd.md for the rest).

io.cost (cgroup v2's cost model controller) is switched on per disk in the cgroup2 root's
`io.cost.qos`; with it `io.weight` acts whatever the scheduler, on buffered writeback too
where the job's group has io and memory. systemd 254's udev `iocost` builtin does it from a
configuration file; Debian 12's udev (systemd 252) has none, so the rule runs the write
itself (`RUN+=`, with the kernel's device number), at every add and change of a matching
disk: at boot, and at `udevadm trigger`. A model (`io.cost.model`'s linear parameters) may
be given; else the kernel's own stays.

Rendering and parsing are pure; `check_iocost` and `matches` read the machine.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..base.errors import UnavailableError, UsageError
from ..kernel import block, levers
from ..policy import disks
from .names import DEFAULT_KERNEL, DEVICE_CLASSES  # (light, for the command line's parser)

MARKER = "# Written by `backburner apply`; `backburner apply --remove` takes it out."
UDEV_DIR = "etc/udev/rules.d"
UDEV_RULE = "65-backburner-scheduler.rules"  # after the 60-* rules that set defaults
IOCOST_RULE = "66-backburner-iocost.rules"
RECOMMENDED = disks.RECOMMENDED_NAME
#: Where the rule writes io.cost's files: the cgroup2 root as systemd mounts it.
CGROUP2 = "/sys/fs/cgroup"
#: io.cost.model's linear parameters (Documentation/admin-guide/cgroup-v2.rst).
MODEL_KEYS = ("rbps", "rseqiops", "rrandiops", "wbps", "wseqiops", "wrandiops")

_SCHEDULER = re.compile(r"[a-z][a-z0-9-]{0,31}")
_KERNEL_GLOB = re.compile(r"[A-Za-z0-9*?\[\]!|_-]{1,200}")


def _check_kernel(kernel: str) -> None:
    if not _KERNEL_GLOB.fullmatch(kernel) or "||" in kernel or kernel.startswith("|") \
            or kernel.endswith("|"):
        raise UsageError(f"{kernel!r} is not a kernel device name pattern",
                         "use globs joined by |, e.g. 'sd*|mmcblk*'")


def check_scheduler(name: str, force: bool = False) -> None:
    """A udev rule naming a scheduler no kernel has would select nothing, at every boot,
    silently: refused unless the kernel layer knows it, or forced (an image for a kernel
    with its own)."""
    if not force and name != RECOMMENDED:
        block.check_scheduler(name, hint=", or --force if the target's kernel has it")


def class_match(devices: str, kernel: str | None = None) -> tuple[str, str | None]:
    """(KERNEL globs, queue/rotational) of a class of disk; `kernel` narrows the names."""
    if devices not in DEVICE_CLASSES:
        raise UsageError(f"unknown disk class {devices!r}",
                         f"use one of {', '.join(DEVICE_CLASSES)}")
    default, rotational = DEVICE_CLASSES[devices]
    return (kernel or default), rotational


@dataclass(frozen=True)
class SchedulerRule:
    """Which disks get which IO scheduler (udev matches, see udev(7))."""

    scheduler: str
    kernel: str = DEFAULT_KERNEL
    rotational: str | None = "1"  # "1" spinning, "0" solid state, None any

    def __post_init__(self) -> None:
        if not _SCHEDULER.fullmatch(self.scheduler):
            raise UsageError(f"{self.scheduler!r} is not an IO scheduler name",
                             "e.g. bfq, mq-deadline, kyber or none")
        _check_kernel(self.kernel)


def scheduler_rules(scheduler: str, devices: str | None, kernel: str | None = None
                    ) -> list[SchedulerRule]:
    """The rules of `--scheduler` and `--devices`: one for the class (rotational when none
    is given), or with `recommended` one per class (every class, or the one given) with
    the scheduler `disks.RECOMMENDED` names for it (measured: see there)."""
    if scheduler != RECOMMENDED:
        return [SchedulerRule(scheduler, *class_match(devices or block.ROTATIONAL, kernel))]
    classes = block.DISK_CLASSES if devices in (None, "all") else (devices,)
    return [SchedulerRule(disks.RECOMMENDED[c], *class_match(c, kernel)) for c in classes]


def _matches(kernel: str, rotational: str | None) -> list[str]:
    out = ['ACTION=="add|change"', 'SUBSYSTEM=="block"', 'ENV{DEVTYPE}=="disk"',
           f'KERNEL=="{kernel}"']
    if rotational is not None:
        out.append(f'ATTR{{queue/rotational}}=="{rotational}"')
    return out


def _which(kernel: str, rotational: str | None) -> str:
    if kernel == block.NVME_GLOB and rotational is None:
        return "NVMe disks"
    return {"1": "rotational disks", "0": "solid-state disks", None: "disks"}[rotational]


def udev_rules(rules: Sequence[SchedulerRule]) -> str:
    """The scheduler rules file: the marker, then each rule with the line that says it."""
    lines = [MARKER]
    for rule in rules:
        lines.append(f"# The {rule.scheduler} IO scheduler for "
                     f"{_which(rule.kernel, rule.rotational)}.")
        lines.append(", ".join([*_matches(rule.kernel, rule.rotational),
                                f'ATTR{{queue/scheduler}}="{rule.scheduler}"']))
    return "\n".join(lines) + "\n"


def udev_rule(rule: SchedulerRule) -> str:
    return udev_rules([rule])


_RULE_LINE = re.compile(r'.*KERNEL=="([^"]*)"(?:, ATTR\{queue/rotational\}=="([01])")?, '
                        r'ATTR\{queue/scheduler\}="([^"]*)"')


def recorded_rules(text: str) -> list[SchedulerRule] | None:
    """The scheduler rules a udev file of ours says, or None when it says any we do not
    write."""
    lines = [ln for ln in text.splitlines() if ln and not ln.startswith("#")]
    out = []
    for line in lines:
        m = _RULE_LINE.fullmatch(line)
        if m is None:
            return None
        try:
            out.append(SchedulerRule(m.group(3), m.group(1), m.group(2)))
        except UsageError:
            return None
    return out or None


def recorded_rule(text: str) -> SchedulerRule | None:
    """The one scheduler rule a file of ours says (None: none, or several)."""
    rules = recorded_rules(text)
    return rules[0] if rules and len(rules) == 1 else None


# --- io.cost -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class IoCostRule:
    """io.cost on for a class of disk, with the kernel's model or the given one."""

    kernel: str
    rotational: str | None
    model: str | None = None  # io.cost.model's linear parameters, "rbps=… wbps=…"

    def __post_init__(self) -> None:
        _check_kernel(self.kernel)
        if self.model is not None and parse_model(self.model) != self.model:
            raise UsageError(f"io.cost model {self.model!r} is not in its written form")


def parse_model(text: str) -> str:
    """`--iocost-model`: io.cost.model's linear parameters (rbps, rseqiops, rrandiops,
    wbps, wseqiops, wrandiops: bytes and IOs per second, whole and positive), as one
    space-separated line in that order."""
    given: dict[str, int] = {}
    for item in text.replace(",", " ").split():
        key, sep, value = item.partition("=")
        if not sep or key not in MODEL_KEYS or not value.isdigit() or key in given \
                or not 0 < int(value) < 1 << 63:
            raise UsageError(f"io.cost model {text!r}: {item!r} is not one of its parameters",
                             "give e.g. rbps=500000000 rseqiops=60000 rrandiops=30000 "
                             "wbps=400000000 wseqiops=50000 wrandiops=25000")
        given[key] = int(value)
    if not given:
        raise UsageError("an empty io.cost model", f"give some of {', '.join(MODEL_KEYS)}")
    return " ".join(f"{k}={given[k]}" for k in MODEL_KEYS if k in given)


def iocost_rules(devices: str | None, kernel: str | None = None, model: str | None = None
                 ) -> list[IoCostRule]:
    """`--iocost`: io.cost on for the class given (every disk with a scheduler without)."""
    model = parse_model(model) if model is not None else None
    return [IoCostRule(*class_match(devices or "all", kernel), model)]


def _commands(rule: IoCostRule) -> str:
    out = []
    if rule.model is not None:
        out.append(f"echo $major:$minor ctrl=user model=linear {rule.model} "
                   f"> {CGROUP2}/io.cost.model")
    out.append(f"echo $major:$minor enable=1 > {CGROUP2}/io.cost.qos")
    return "; ".join(out)


def iocost_udev(rules: Sequence[IoCostRule]) -> str:
    """The io.cost rules file: the marker, then each rule with the line that says it."""
    lines = [MARKER]
    for rule in rules:
        model = f"the model {rule.model}" if rule.model else "the kernel's model"
        lines.append(f"# io.cost on for {_which(rule.kernel, rule.rotational)}, with {model}.")
        lines.append(", ".join([*_matches(rule.kernel, rule.rotational),
                                f"RUN+=\"/bin/sh -c '{_commands(rule)}'\""]))
    return "\n".join(lines) + "\n"


_IOCOST_LINE = re.compile(
    r'.*KERNEL=="([^"]*)"(?:, ATTR\{queue/rotational\}=="([01])")?, RUN\+="/bin/sh -c \''
    r"(?:echo \$major:\$minor ctrl=user model=linear ([a-z0-9= ]+) > [^;']+; )?"
    r"echo \$major:\$minor enable=1 > [^']+'\"")


def recorded_iocost(text: str) -> list[IoCostRule] | None:
    """The io.cost rules a udev file of ours says, or None."""
    lines = [ln for ln in text.splitlines() if ln and not ln.startswith("#")]
    out = []
    for line in lines:
        m = _IOCOST_LINE.fullmatch(line)
        if m is None:
            return None
        try:
            out.append(IoCostRule(m.group(1), m.group(2), m.group(3)))
        except UsageError:
            return None
    return out or None


def check_iocost(root2: str | None) -> None:
    """Before anything is written for `--iocost` on the running system: the kernel has
    io.cost, in a cgroup2 root where the rule writes."""
    if root2 is None or not Path(root2, "io.cost.qos").exists():
        where = f"{root2}/io.cost.qos is missing" if root2 else "no cgroup2 hierarchy"
        raise UnavailableError(f"--iocost: this kernel has no io.cost ({where})",
                               "a kernel with CONFIG_BLK_CGROUP_IOCOST on cgroup v2; "
                               "--root DIR writes the rule for an image anyway")
    if root2 != CGROUP2:
        raise UnavailableError(f"--iocost: cgroup2 is mounted at {root2}, not {CGROUP2} "
                               "where the rule writes", "on a unified cgroup v2 boot only")


# --- the disks here ------------------------------------------------------------------------------


def matches(kernel: str, rotational: str | None, sys_block: str = block.SYS_BLOCK
            ) -> list[Path]:
    """The disks of /sys/block a rule's matches select, as udev evaluates them."""
    out = []
    for name in block.disks(sys_block):
        if not any(fnmatch.fnmatchcase(name, g) for g in kernel.split("|")):
            continue
        if not Path(sys_block, name, "queue", "scheduler").exists():
            continue
        flag = block.rotational(name, sys_block)
        if rotational is not None and (flag is None or str(int(flag)) != rotational):
            continue
        out.append(Path(sys_block, name))
    return out


def iocost_live(rule: IoCostRule, sys_block: str = block.SYS_BLOCK,
                root2: str | None = CGROUP2) -> tuple[bool, list[str]]:
    """Whether io.cost is on for every disk the rule matches."""
    found = matches(rule.kernel, rule.rotational, sys_block)
    if not found:
        return True, ["matches no disk of this machine"]
    live, notes = True, []
    for dev in found:
        if levers.iocost_on(block.devno_text(dev.name, sys_block), root2):
            notes.append(f"{dev.name}: io.cost on")
        else:
            live = False
            notes.append(f"{dev.name}: io.cost off (udevadm control --reload; udevadm "
                         f"trigger --action=change /sys/block/{dev.name})")
    return live, notes
