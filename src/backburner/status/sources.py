"""Every process and unit on the back burner, from each source that puts work there, read
from the state that source leaves, with what the kernel has in force beside it.

- `run`: the job records (`status.records`): the `backburner run` process that still
  runs, its child the job, and the policy's settings.
- `run --pid`: its journals (label `run-pid`), handed over to the process re-prioritised:
  the `Priorities` change (IO class, CPU policy) and each `CgroupMove` (the groups).
- `govern`: the daemon's status file (rule, since, the processes it governs), and its live
  journal for what was set on each (the same `Priorities` and `CgroupMove` changes).
- `apply`: the files it installed, checked as `apply --status` checks them (`applied`).

Per-disk facts (the scheduler in force, and what it honours) are one more section of the
same view (`Disk`), so that each line about a disk sits beside the processes it concerns.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import system
from ..apply import status as applied
from ..base.errors import BackburnerError
from ..govern import state as govern_state
from ..kernel import block, priorities, procfs
from ..policy import grammar
from ..run import job
from ..system.journal import Journal, journal_entries, journal_time
from . import inforce, records
from .inforce import InForce

PRIORITY_KINDS = ("priorities", "priorities-first", "inherited")


@dataclass
class Entry:
    """One process (or one installed file) on the back burner."""

    source: str                 # run | run --pid | govern | apply
    by: str                     # who set it: "backburner run (PID 4240)", "govern rule x"
    what: str                   # "PID 4242 (tar)", or the file apply installed
    sets: str                   # what was set, in words
    since: float | None
    pid: int | None = None
    start: int | None = None
    in_force: InForce | None = None
    differs: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class Disk:
    """A whole disk and the IO scheduler in force on it (/sys/block/NAME/queue/scheduler):
    the idle class and the weights act only where the scheduler honours them."""

    name: str
    scheduler: str


@dataclass
class View:
    entries: list[Entry]
    disks: list[Disk]
    notes: list[str] = field(default_factory=list)


def gather(apply_root: str = "/", sys_block: str = "/sys/block") -> View:
    """Everything on the back burner now, source by source."""
    notes: list[str] = []
    entries = [*run_jobs(), *run_pid_trees(), *governed(notes), *applied_files(apply_root)]
    return View(entries, disks(sys_block), notes)


def for_pid(pid: int) -> list[Entry]:
    """The entries of one process (`govern explain`: who set what is in force on it)."""
    return [e for e in (*run_jobs(), *run_pid_trees(), *governed([]))
            if e.pid == pid and e.start == procfs.start_time(pid)]


# --- run ---------------------------------------------------------------------------------


def _policy(io: str | None, cpu: str | None) -> grammar.Policy:
    return grammar.Policy("set", io=priorities.IOPrio.parse(io) if io else None,
                           cpu=priorities.CPUPolicy.parse(cpu) if cpu else None)


def _words(sets: dict[str, str]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sets.items()) or "nothing"


def _process(pid: int) -> str:
    return f"PID {pid} ({procfs.comm_of(pid) or '?'})"


def _tree_note(pid: int) -> list[str]:
    kids = len(procfs.descendants_of(pid))
    return [f"and {kids} process{'es' if kids != 1 else ''} below it"] if kids else []


def run_jobs() -> Iterator[Entry]:
    for rec in records.read():
        wanted = _policy(rec.sets.get("io"), rec.sets.get("cpu"))
        for pid in procfs.children_of(rec.pid):
            now = inforce.read(pid, wanted)
            if now is None:
                continue
            differs = inforce.differences(pid, now, wanted, rec.groups)
            weights = [k for k in ("io-weight", "cpu-weight") if k in rec.sets]
            if weights and not now.cgroups:
                differs.append(f"{' and '.join(weights)} set, but the job is in no group "
                               "of its own (the weights do not apply)")
            yield Entry("run", f"backburner run (PID {rec.pid})", _process(pid),
                        _words(rec.sets), rec.since, pid, procfs.start_time(pid), now,
                        differs, [f"command: {' '.join(rec.argv)[:200]}", *_tree_note(pid)])


# --- journals: run --pid and govern --------------------------------------------------------


@dataclass
class _Journaled:
    """What a journal says was set on one process: IO class, CPU policy, groups."""

    io: str | None = None
    cpu: str | None = None
    groups: list[str] = field(default_factory=list)


def _journaled(journal: Journal) -> dict[int, _Journaled]:
    try:
        _header, entries = journal_entries(journal)
    except BackburnerError:
        return {}
    out: dict[int, _Journaled] = {}
    for e in entries:
        spec = e.change.spec()
        pid = spec.get("pid")
        if not isinstance(pid, int):
            continue
        rec = out.setdefault(pid, _Journaled())
        if e.change.kind in PRIORITY_KINDS:
            rec.io, rec.cpu = spec.get("io") or rec.io, spec.get("cpu") or rec.cpu
        elif e.change.kind == "cgmove":
            rec.groups.append(str(spec["path"]))
    return out


def _live_journals(label: str) -> list[system.JournalInfo]:
    try:
        return [i for i in system.journals() if i.label == label and i.alive]
    except BackburnerError:
        return []  # a state directory we cannot read: nothing of it to show


def run_pid_trees() -> Iterator[Entry]:
    for info in _live_journals(job.RUN_PID_LABEL):
        pid = info.owner_pid
        if pid is None:
            continue
        mine = _journaled(info.journal).get(pid, _Journaled())
        wanted = _policy(mine.io, mine.cpu)
        now = inforce.read(pid, wanted)
        if now is None:
            continue
        sets = {k: v for k, v in (("io", mine.io), ("cpu", mine.cpu)) if v}
        if mine.groups:
            sets["cgroup"] = ", ".join(mine.groups)
        yield Entry("run --pid", f"backburner run --pid {pid}", _process(pid), _words(sets),
                    journal_time(info.journal) or None, pid, procfs.start_time(pid), now,
                    inforce.differences(pid, now, wanted, mine.groups), _tree_note(pid))


def governed(notes: list[str]) -> Iterator[Entry]:
    try:
        st = govern_state.read()
    except BackburnerError:
        return  # govern has not run here, or its state cannot be read: nothing governed
    if not st.get("running"):
        return
    daemon = st.get("pid")
    sets_by_pid: dict[int, _Journaled] = {}
    for info in _live_journals("govern"):
        if info.owner_pid == daemon:
            sets_by_pid.update(_journaled(info.journal))
    listed = st.get("governed", [])
    if st.get("governed_total", len(listed)) > len(listed):
        notes.append(f"govern governs {st['governed_total']} processes; its status file "
                     f"lists the first {len(listed)} (govern status)")
    for g in listed:
        yield from _governed_one(g, st, daemon, sets_by_pid)


def _governed_one(g: dict[str, Any], st: dict[str, Any], daemon: Any,
                  sets_by_pid: dict[int, _Journaled]) -> Iterator[Entry]:
    pid, start = g.get("pid"), g.get("start")
    if not isinstance(pid, int) or procfs.start_time(pid) != start:
        return
    mine = sets_by_pid.get(pid)
    wanted = _policy(mine.io, mine.cpu) if mine else None
    now = inforce.read(pid, wanted)
    if now is None:
        return
    notes = []
    if st.get("dry_run"):
        notes.append("dry run: the daemon only says what it would set; nothing was")
    elif mine is None and not g.get("unit"):
        notes.append("the daemon's journal has no record of it")
    if g.get("inherited_from") is not None:
        notes.append(f"inherited from PID {g['inherited_from']}")
    if g.get("unit"):
        notes.append(f"weights through unit {g['unit']}")
    yield Entry("govern", f"govern rule {g.get('rule')} (daemon PID {daemon})",
                f"PID {pid} ({g.get('comm') or procfs.comm_of(pid) or '?'})",
                str(g.get("set", "")), g.get("since"), pid, start, now,
                inforce.differences(pid, now, wanted, mine.groups if mine else []), notes)


# --- apply ---------------------------------------------------------------------------------


def applied_files(root: str = "/") -> Iterator[Entry]:
    """What `apply` installed and whether it is live, as `apply --status` checks it."""
    try:
        if os.path.abspath(root) != "/":
            st = applied.status(root, live=False)
        else:
            with applied.running_systemd() as view:
                st = applied.status("/", view)
    except (BackburnerError, OSError) as err:
        yield Entry("apply", "backburner apply", "its files", "?", None,
                    differs=[f"could not be read: {err}"])
        return
    for item in st.items:
        path = Path(item.path)
        try:
            since: float | None = path.stat().st_mtime
        except OSError:
            since = None
        differs = [item.drift] if item.drift else []
        if item.live is False:
            differs += item.notes or ["not live"]
        notes = [] if item.live is False else list(item.notes)
        yield Entry("apply", "backburner apply", item.what, _file_sets(path), since,
                    differs=differs, notes=[f"{item.verdict}: {item.path}", *notes])


def _file_sets(path: Path) -> str:
    """What an installed file sets: its own comment line (`# UNIT: … (policy …).`)."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return "?"
    said = next((ln.lstrip("# ").strip() for ln in lines[1:3] if ln.startswith("# ")), "")
    return said or "?"


# --- disks ---------------------------------------------------------------------------------


SKIP_DISKS = ("loop", "ram", "zram", "nbd", "sr", "fd")


def disks(sys_block: str = "/sys/block") -> list[Disk]:
    """Whole disks with an IO scheduler (loop devices, RAM disks and optical drives left
    out: no bulk work of the machine's lives there)."""
    return [Disk(name, sched) for name in block.disks(sys_block)
            if not name.startswith(SKIP_DISKS)
            and (sched := block.in_force(name, sys_block)) is not None]
