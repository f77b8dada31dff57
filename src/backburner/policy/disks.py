"""The disks a job's work lands on, and what a policy does on each: said where it matters.

`kernel.levers` knows what every lever does on one disk; this module asks it about the
disks that matter (the one holding the job's working directory, `/`, `/var`, and every
other mounted disk) and says it: `doctor`'s line per disk, the one warning line `run`,
`govern` and `apply` print when a lever asked for does nothing there, and the same facts as
data for `govern status --json`, `apply --status` and any status view (`reports`).

The fix a line names is the scheduler `apply --scheduler recommended` installs for the
disk's class (`RECOMMENDED`, with the figures that chose it).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..kernel import block, cgroups, levers, procfs
from .grammar import BUILTIN, Policy

#: The scheduler per class of disk that `apply --scheduler recommended` installs: BFQ
#: everywhere. Rotational (docs/measurements/startup.md, the quick preset and the office
#: scenario): beside ten sequential readers a cold start was 12-14× slower than unloaded on
#: mq-deadline and still 2.7-3.1× with the background policy, within ±25% on BFQ; beside a
#: flatpak installer both schedulers were 2.6-3.2× slower unprotected, and at the idle
#: class with govern's throttle (its built-in flatpak rule) both within 5%, BFQ 1.02×
#: [1.01-1.04] (mq-deadline with the idle class alone too; BFQ's 1.09× is what the
#: throttle is for). Non-rotational (docs/measurements/ssd.md): under `none`, `kyber` or
#: `mq-deadline` a cold start under bulk readers or buffered writers stayed 2.2-3.6×
#: slower with the background policy; under BFQ 0.93-1.10× under readers and about 1.5×
#: under buffered writers (undecided at ±10%).
RECOMMENDED = {block.ROTATIONAL: "bfq", block.NON_ROTATIONAL: "bfq", block.NVME: "bfq"}
#: What `apply --scheduler` takes for "the recommended one for each class of disk".
RECOMMENDED_NAME = "recommended"
#: The paths whose disks always matter: the system's, the one of logs, caches and package
#: downloads (/var), the users'.
KEY_PATHS = ("/", "/var", "/home")
#: What the working directory is called in a line.
WORKDIR = "the working directory"
#: Block devices that are not disks of their own: said about only when they hold a key path.
VIRTUAL = ("loop", "ram", "zram", "nbd", "sr")

#: A lever in words, as a line names it.
LEVER_WORDS = {levers.IO_CLASS: "the IO class", levers.IO_WEIGHT: "the IO weight",
               levers.GROUP_IO: "io.prio.class", levers.IO_LATENCY: "io.latency",
               levers.IO_COST: "io.cost"}


def asked(policies: Iterable[Policy]) -> tuple[str, ...]:
    """The disk levers the policies pull (`kernel.levers.LEVERS`), in that order."""
    found: set[str] = set()
    for p in policies:
        if p.io is not None and p.io.klass != "none":
            found.add(levers.IO_CLASS)
        if p.io_weight is not None:
            found.add(levers.IO_WEIGHT)
        if p.group_io is not None:
            found.add(levers.GROUP_IO)
        if p.io_latency_us is not None:
            found.add(levers.IO_LATENCY)
        if p.io_cost:
            found.add(levers.IO_COST)
    return tuple(lever for lever in levers.LEVERS if lever in found)


def groups_for(policies: Iterable[Policy], systemd_owns: bool) -> levers.GroupIO:
    """The groups such a job gets here: the io controller turned on along its path for a
    weight (by our plan, or by systemd for IOWeight=), memory with it by our plan (systemd
    turns memory on where its memory accounting is, which the root shows)."""
    weighted = any(p.io_weight is not None or p.group_io is not None for p in policies)
    enables = ("io",) if systemd_owns else ("io", "memory")
    return levers.read_groups(enables if weighted else ())


@dataclass(frozen=True)
class DiskReport:
    """One disk: what the levers asked for do there, the paths it holds, and the fix."""

    effect: levers.Effect
    holds: tuple[str, ...]  # of the paths asked about ("/", "/var", WORKDIR, ...)
    mounts: tuple[str, ...]  # every mount point on it
    ignored: tuple[str, ...]  # of the levers asked for, those that do nothing here
    cure: str | None  # the scheduler that makes them act; None: none would, or no need

    @property
    def name(self) -> str:
        return self.effect.disk.name

    @property
    def fix(self) -> str | None:
        """The command that makes the levers act here (its class's recommended scheduler)."""
        if self.cure is None:
            return None
        disk = self.effect.disk
        if not block.is_hardware(disk.name):  # a loop device: no udev rule matches it
            return f"echo {self.cure} > /sys/block/{disk.name}/queue/scheduler"
        return f"backburner apply --scheduler {self.cure} --devices {disk.kind}"

    def as_dict(self) -> dict[str, Any]:
        return {**self.effect.as_dict(), "holds": list(self.holds),
                "mounts": list(self.mounts), "ignored": list(self.ignored), "fix": self.fix}


def cure_for(effect: levers.Effect, ignored: Sequence[str]) -> str | None:
    """The scheduler that makes the IO class and weights act on this disk: the one
    recommended for its class, where it is not the one in force."""
    disk = effect.disk
    want = RECOMMENDED.get(disk.kind or "")
    if not ignored or want is None or disk.scheduler == want:
        return None
    if not ({levers.IO_CLASS, levers.IO_WEIGHT, levers.GROUP_IO} & set(ignored)):
        return None  # io.latency or io.cost missing: the kernel's, no scheduler brings it
    return want


def mounted(paths: dict[str, str], mountinfo: str = procfs.MOUNTINFO,
            every: bool = True) -> dict[str, tuple[list[str], list[str]]]:
    """Whole disk -> (the labels of `paths` it holds, the mount points on it): the disks
    holding `paths` (label -> path), then (`every`) every other mounted disk that is one of
    its own (not a loop device or a RAM disk, which are said about only when they hold a
    path) and the mount points of all of them."""
    out: dict[str, tuple[list[str], list[str]]] = {}
    for label, path in paths.items():
        for disk in block.disks_of(path):
            out.setdefault(disk, ([], []))[0].append(label)
    for m in procfs.mounts(mountinfo) if every else ():
        if m.fstype == "btrfs":  # anonymous device numbers: its devices, by its mount
            found = block.disks_of(m.mountpoint)
        elif os.major(m.devno) != 0:  # never a stat of a network or automount point
            found = block.disks_of_devices([m.devno])
        else:
            continue
        for disk in found:
            if disk in out or not disk.startswith(VIRTUAL):
                mounts = out.setdefault(disk, ([], []))[1]
                if m.mountpoint not in mounts:
                    mounts.append(m.mountpoint)
    return out


def reports(policies: Iterable[Policy] = (BUILTIN["background"],), *,
            cwd: str | None = None, every_mounted: bool = True,
            groups: levers.GroupIO | None = None, systemd_owns: bool = False
            ) -> list[DiskReport]:
    """What the policies' levers do on each disk that matters: the ones holding `cwd`, `/`,
    `/var` and `/home`, and (`every_mounted`) every other mounted disk. Data, for a status
    view, `doctor` and the JSON of `govern status` and `apply --status`."""
    policies = list(policies)
    wanted = asked(policies)
    groups = groups or groups_for(policies, systemd_owns)
    paths = {p: p for p in KEY_PATHS}
    if cwd is not None:
        paths[WORKDIR] = cwd
    disks = mounted(paths, every=every_mounted)
    root2 = cgroups.unified_root()
    out = []
    for name, (holds, mounts) in disks.items():
        effect = levers.effect(name, groups, cgroup2=root2)
        if effect.disk.kind is None:
            continue  # no request queue: nothing is scheduled there
        ignored = effect.ignored(wanted)
        out.append(DiskReport(effect, tuple(dict.fromkeys(holds)), tuple(mounts), ignored,
                              cure_for(effect, ignored)))
    return out


def record(policy: Policy, effect: levers.Effect) -> dict[str, Any]:
    """What a bench run records per scheduler and policy: the levers the policy pulls that
    acted on the device under test, those that did nothing, and whether its weight reached
    buffered writeback."""
    wanted = asked([policy])
    return {"acted": [lever for lever in wanted if effect.acts(lever)],
            "ignored": list(effect.ignored(wanted)),
            "weight": effect.weight if levers.IO_WEIGHT in wanted else None,
            "writeback": effect.writeback and levers.IO_WEIGHT in wanted}


def lever_words(ignored: Sequence[str]) -> str:
    words = [LEVER_WORDS[lever] for lever in ignored]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def running(effect: levers.Effect) -> str:
    return effect.disk.scheduler or "no IO scheduler"


def warning(policies: Iterable[Policy], cwd: str | None, *, systemd_owns: bool = False,
            groups: levers.GroupIO | None = None, skip: Iterable[str] = ()) -> str | None:
    """The one line `run`, `govern` and `apply` print when a lever asked for does nothing
    on the disk holding the job's working directory, `/` or `/var` (`skip`: disks about to
    change, e.g. by the scheduler rule being installed); None when every one acts there."""
    policies = list(policies)
    if not asked(policies):
        return None
    return warning_of(reports(policies, cwd=cwd, every_mounted=False, groups=groups,
                              systemd_owns=systemd_owns), skip)


def warning_of(found_reports: Iterable[DiskReport], skip: Iterable[str] = ()) -> str | None:
    """The warning line from reports already made (None: every lever acts)."""
    skipped = set(skip)
    found = [r for r in found_reports
             if r.ignored and set(r.holds) & {"/", "/var", WORKDIR} and r.name not in skipped]
    if not found:
        return None
    parts = []
    for r in found:
        holds = ", ".join(h for h in r.holds if h in ("/", "/var", WORKDIR))
        verb = "does" if len(r.ignored) == 1 else "do"
        parts.append(f"{r.name} ({holds}) runs {running(r.effect)}: "
                     f"{lever_words(r.ignored)} {verb} nothing there")
    fixes = list(dict.fromkeys(r.fix for r in found if r.fix))
    if sum(1 for f in fixes if f.startswith("backburner apply")) > 1:  # one rule per class
        fixes = [f for f in fixes if not f.startswith("backburner apply")]
        fixes.append(f"backburner apply --scheduler {RECOMMENDED_NAME}")
    return "; ".join(parts) + (f"; {'; '.join(fixes)}" if fixes else "")


def summary(r: DiskReport) -> str:
    """`doctor`'s words for one disk: its class, scheduler, what it holds, and what the
    background policy's IO levers do there (its buffered writeback included)."""
    e = r.effect
    kind = {block.NVME: "NVMe", block.NON_ROTATIONAL: "solid-state",
            block.ROTATIONAL: "rotational"}.get(e.disk.kind or "", "?")
    where = ", ".join(r.holds or r.mounts[:3]) + (" …" if len(r.mounts) > 3 and not r.holds
                                                  else "")
    head = f"{kind}, {running(e)}" + (f", holds {where}" if where else "")
    if r.ignored:
        verb = "does" if len(r.ignored) == 1 else "do"
        acts = f"{lever_words(r.ignored)} {verb} nothing here"
        if levers.IO_CLASS not in r.ignored and e.io_class:
            acts += " (the IO class acts)"
    else:
        acts = "the IO class and the IO weight act"
    if e.weight is not None:
        acts += ("; its buffered writeback is held back too" if e.writeback else
                 "; not its buffered writeback (charged to the job's group only on cgroup "
                 "v2 with io and memory)")
    return f"{head}: {acts}"
