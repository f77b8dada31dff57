"""The govern daemon: process events -> rules -> priorities, cgroups and pauses, all undone.

One `system.LiveTransaction("govern")` lives as long as the daemon. Every change goes
through it, journaled before it is made:
- a matched process: `Priorities` (every thread, and descendants it already has) and a
  `CgroupMove` into each of its rule's groups (`backburner/govern-RULE`, made once with
  `CgroupDir`; a throttled rule's group also gets a `CgroupFreezer`);
- a process forked by a governed one: `Inherited` (what its ancestor had before), so it is
  put back even after its parent has exited;
- a governed process's exit retires its entries (nothing left to undo).
On SIGTERM, SIGHUP or Ctrl-C the transaction undoes everything still live (priorities of
processes that still run, cgroup membership, frozen state); after a SIGKILL the journal is
stale and `backburner restore` does the same.

While it governs nothing the daemon asks the kernel for exec and comm events only and
sleeps in recv() (`Connector.wait_start`: one wake-up per program started, a few lines of
Python each); while it governs something it takes all events and sleeps in poll() on the
connector and the PSI trigger fds. Its only timeouts are the end of a running pause and a
pending rewrite of the status file. It never touches PID 1, kernel threads, itself or its
own ancestors, and starts no processes.
"""

from __future__ import annotations

import logging
import math
import os
import select
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any

from .. import interrupts, job, priority, proc_events, procfs, safepath, system
from ..errors import (
    BackburnerError,
    ExistsError,
    NotFoundError,
    SystemStateError,
    UnavailableError,
)
from ..proc_events import COMM as COMM_EVENT
from ..proc_events import EXEC, EXIT, FORK
from . import execwatch, load, procinfo, state, throttle
from .rules import Rule, Ruleset

log = logging.getLogger(__name__)

STATUS_EVERY_S = 5.0  # counters-only refreshes of the status file, at most this often
STATUS_DELAY_S = 0.25  # a change is written this much later, with those that follow it
STATUS_LIST_MAX = 2000  # governed processes listed in the status file


@dataclass
class Options:
    rules_dir: str | None = None  # None: /etc/backburner/rules.d (if it exists)
    dry_run: bool = False
    defaults: bool = True
    ready_file: str | None = None
    no_exec_filter: bool = False  # take every exec from the connector (no perf filter)


@dataclass
class Counters:
    events: int = 0
    forks: int = 0
    execs: int = 0
    comms: int = 0
    exits: int = 0
    matched: int = 0
    inherited: int = 0
    gone: int = 0  # exited between the event and the action: skipped
    overflows: int = 0
    lost_events: int = 0
    rescans: int = 0
    errors: int = 0


@dataclass
class Governed:
    """A process we changed (or, with --dry-run, would have)."""

    pid: int
    start: int
    comm: str
    rule: str
    sets: str
    since: float
    io: str | None = None
    cpu: str | None = None
    throttled: bool = False
    parent: int | None = None  # the governed process it was forked by
    old: dict[str, int] = field(default_factory=dict)  # main thread before any change
    moves: dict[str, str] = field(default_factory=dict)  # our group -> where it came from
    entries: list[Any] = field(default_factory=list)  # journal entries, retired at exit
    prio_entry: Any = None

    def to_json(self) -> dict[str, Any]:
        return {"pid": self.pid, "start": self.start, "comm": self.comm, "rule": self.rule,
                "set": self.sets, "since": self.since, "inherited_from": self.parent,
                "cgroups": sorted(self.moves), "throttled": self.throttled}


@dataclass
class Groups:
    """A rule's cgroups, made when it first matches."""

    dirs: list[str] = field(default_factory=list)
    freezers: list[system.CgroupFreezer] = field(default_factory=list)


def _io_cpu(rule: Rule) -> tuple[str | None, str | None]:
    p = rule.policy
    return (str(p.io) if p.io else None), (str(p.cpu) if p.cpu else None)


def _protected() -> set[int]:
    me = os.getpid()
    return {0, 1, 2, me, *procfs.ancestors_of(me)}


class Governor:
    """The decisions and changes, event by event (the loop is in `serve`)."""

    def __init__(self, ruleset: Ruleset, tx: system.LiveTransaction | None,
                 report: Callable[..., None] = log.info,
                 on_governing: Callable[[bool], None] = lambda _any: None) -> None:
        self.ruleset = ruleset
        self.tx = tx
        self.dry_run = tx is None
        self.report = report
        self.on_governing = on_governing  # told when the first is governed / the last goes
        self.governed: dict[int, Governed] = {}
        self.n_throttled = 0
        self.groups: dict[str, Groups] = {}
        self.problems: dict[str, str] = {}
        self.counters = Counters()
        self.exec_events = "connector"  # or "kernel-filtered" (execwatch)
        self.protected = _protected()
        self.dirty = True
        self.throttle: throttle.Throttle | None = None
        self.triggers: list[throttle.Trigger] = []
        self.watch: list[str] = []
        self._sets_text: dict[str, str] = {}

    def _sets(self, rule: Rule) -> str:
        text = self._sets_text.get(rule.name)
        if text is None:
            text = self._sets_text[rule.name] = rule.sets()
        return text

    def _put(self, g: Governed) -> None:
        old = self.governed.get(g.pid)
        if old is not None:
            self.n_throttled -= old.throttled
        self.governed[g.pid] = g
        self.n_throttled += g.throttled
        self.dirty = True

    def _drop(self, pid: int) -> Governed | None:
        g = self.governed.pop(pid, None)
        if g is not None:
            self.n_throttled -= g.throttled
            self.dirty = True
            if not self.governed:
                self.on_governing(False)
        return g

    # --- events -----------------------------------------------------------------------------

    def handle(self, events: list[proc_events.Event]) -> None:
        governed = self.governed
        c = self.counters
        c.events += len(events)
        for ev in events:
            what = ev.what
            try:
                if what == FORK:
                    c.forks += 1
                    if ev.pid == ev.tgid:
                        if ev.ptgid in governed:
                            self._inherit(ev.tgid, governed[ev.ptgid])
                    elif ev.tgid in governed:
                        self._check_thread(governed[ev.tgid], ev.pid)
                elif what == EXEC:
                    c.execs += 1
                    if ev.tgid in governed:
                        self._reexec(governed[ev.tgid])
                    else:
                        self.consider(ev.tgid, execed=True)
                elif what == EXIT:
                    c.exits += 1
                    if ev.pid == ev.tgid and ev.tgid in governed:
                        self._forget(ev.tgid)
                elif what == COMM_EVENT:
                    c.comms += 1
                    if ev.pid == ev.tgid and ev.tgid not in governed:
                        self.consider(ev.tgid, ev.comm)
            except (OSError, BackburnerError) as err:  # one odd process must not stop us
                c.errors += 1
                log.warning("%s event of PID %d: %s", ev.name, ev.tgid, err)

    def consider(self, pid: int, comm: str | None = None, execed: bool = False
                 ) -> Rule | None:
        """Match a process against the rules and govern it if one matches. The hot path of
        the daemon: for a program no rule names, one read of its name and a dict lookup.
        `execed`: it has just run a program, so it is no kernel thread (those never do)."""
        if comm is None:
            comm = procfs.comm_of(pid)
            if comm is None:  # it exited before we could look: skipped, counted
                self.counters.gone += 1
                return None
        candidates = self.ruleset.candidates(comm)
        if not candidates or pid in self.protected:
            return None
        sure = self.ruleset.sure_match(comm)
        if sure is not None:
            self._govern(pid, sure, comm, execed)
            return sure
        info = procinfo.ProcInfo(pid, comm)
        for rule in candidates:
            if rule.holds(info):
                self._govern(pid, rule, info.comm, execed)
                return rule
        return None

    # --- changes ----------------------------------------------------------------------------

    def _gone(self, pid: int, start: int | None) -> bool:
        now = procfs.start_time(pid)
        return now is None if not start else now != start  # 0: not read yet

    def _govern(self, pid: int, rule: Rule, comm: str, execed: bool = False) -> None:
        if execed and self.tx is not None:
            start: int | None = 0  # taken from the snapshot below: not a read more first
        else:
            start, kthread = procfs.start_and_kthread(pid)
            if start is None:
                self.counters.gone += 1
                return
            if kthread:
                return
        io, cpu = _io_cpu(rule)
        g = Governed(pid, start, comm, rule.name, self._sets(rule), time.time(), io, cpu,
                     rule.throttle)
        self.counters.matched += 1
        first = not self.governed
        if self.tx is None:
            if first:
                self.on_governing(True)
            self._put(g)
            self.report("would govern PID %d (%s) by rule %s: %s", pid, comm, rule.name, g.sets)
            return
        try:
            if io or cpu:
                change = (system.PrioritiesFirst if execed else system.Priorities)(pid, io, cpu)
                entry = self.tx.record(change)
                g.entries.append(entry)
                g.prio_entry = entry
                snap = entry.old.get(str(pid)) or {}
                g.old = _without_start(snap)
                if not g.old:
                    raise NotFoundError(f"PID {pid} is gone")
                start = g.start = snap["start"]
            elif not start:
                start = g.start = procfs.start_time(pid) or 0
            groups = self._groups(rule)
            for path in groups.dirs:
                entry = self.tx.record(system.CgroupMove(pid, path))
                g.entries.append(entry)
                g.moves[path] = entry.old.get("from") or ""
        except (BackburnerError, OSError) as err:
            if self._gone(pid, start) or not g.entries:
                self._retire(g)
                if self._gone(pid, start):
                    self.counters.gone += 1
                    return
                raise
            self.problem(f"rule {rule.name}", f"PID {pid} ({comm}): {err}")
        if first:  # forks and exits matter from now on (those of the moment in between are
            self.on_governing(True)  # caught by the walk of its descendants just below)
        self._put(g)
        self.report("governing PID %d (%s) by rule %s: %s", pid, comm, rule.name, g.sets)
        self._adopt_descendants(g)

    def _adopt_descendants(self, g: Governed) -> None:
        """Children it already had (a process found by a scan): the Priorities change set
        them too; each gets its own record and is moved into the rule's groups."""
        assert self.tx is not None
        for child in procfs.descendants_of(g.pid):
            if child in self.governed or child in self.protected:
                continue
            old = g.old
            if g.prio_entry is not None:
                snaps = g.prio_entry.change.saved(g.prio_entry.old, g.prio_entry.result)
                old = _without_start(snaps.get(str(child))) or g.old
            parent = procfs.parent_of(child)
            via = self.governed.get(parent, g) if parent is not None else g
            try:
                entry = self.tx.record(system.Inherited(child, g.io, g.cpu, old, {}))
                kid = Governed(child, entry.old["start"], procfs.comm_of(child) or "",
                               g.rule, g.sets, time.time(), g.io, g.cpu, g.throttled,
                               via.pid, old, {}, [entry])
                for path in g.moves:
                    move = self.tx.record(system.CgroupMove(child, path))
                    kid.entries.append(move)
                    kid.moves[path] = move.old.get("from") or ""
            except (BackburnerError, OSError):
                self.counters.gone += 1
                continue
            self._put(kid)
            self.counters.inherited += 1

    def _inherit(self, pid: int, parent: Governed) -> None:
        """A governed process forked: the child has its priorities and groups already."""
        self.counters.inherited += 1
        child = Governed(pid, 0, parent.comm, parent.rule, parent.sets, time.time(),
                         parent.io, parent.cpu, parent.throttled, parent.pid, parent.old,
                         parent.moves)
        if self.tx is not None:
            try:
                entry = self.tx.record(system.Inherited(pid, parent.io, parent.cpu,
                                                        parent.old, parent.moves))
            except (BackburnerError, OSError):
                self.counters.gone += 1
                return
            child.entries.append(entry)
            child.start = entry.old["start"]
        else:
            child.start = procfs.start_time(pid) or 0
        self._put(child)

    def _check_thread(self, g: Governed, tid: int) -> None:
        """A new thread inherits its creator's priorities; one created while we changed the
        others may have copied the old ones: then the process's change is applied again."""
        if g.prio_entry is None or self.tx is None:
            return
        try:
            ok = ((g.io is None or str(priority.ioprio_get(tid)) == g.io)
                  and (g.cpu is None or _cpu_matches(tid, g.cpu)))
        except OSError:
            return  # the thread has ended
        if not ok:
            log.debug("thread %d of PID %d was born with old priorities", tid, g.pid)
            g.prio_entry.change.apply()

    def _reexec(self, g: Governed) -> None:
        """A governed process ran another program: a rule with other settings for the new
        program adds its changes on top (undone in reverse, back to the original)."""
        info = procinfo.ProcInfo(g.pid)
        g.comm = info.comm or g.comm
        rule = self.ruleset.first_match(info)
        if rule is None or rule.name == g.rule:
            return
        io, cpu = _io_cpu(rule)
        groups = self._groups(rule) if self.tx is not None else Groups()
        same = (io, cpu) == (g.io, g.cpu) and set(groups.dirs) == set(g.moves)
        self.n_throttled += rule.throttle - g.throttled
        g.rule, g.sets, g.throttled, g.parent = rule.name, self._sets(rule), rule.throttle, None
        self.counters.matched += 1
        self.dirty = True
        if same or self.tx is None:
            return
        if io or cpu:
            entry = self.tx.record(system.Priorities(g.pid, io, cpu))
            g.entries.append(entry)
            g.prio_entry = entry
            g.io, g.cpu = io, cpu
        ours = {d: o for gr in self.groups.values() for d in gr.dirs for o in [g.moves.get(d)]}
        for path in groups.dirs:
            entry = self.tx.record(system.CgroupMove(g.pid, path))
            g.entries.append(entry)
            origin = entry.old.get("from") or ""
            g.moves[path] = ours.get(origin) or origin
        self.report("governing PID %d (%s) by rule %s: %s", g.pid, g.comm, rule.name, g.sets)

    def _forget(self, pid: int) -> None:
        g = self._drop(pid)
        if g is not None:
            self._retire(g)

    def _retire(self, g: Governed) -> None:
        if self.tx is not None:
            for entry in g.entries:
                self.tx.retire(entry)
        g.entries.clear()

    def _groups(self, rule: Rule) -> Groups:
        """The rule's cgroups, made on its first match. A controller or freezer that is
        missing is a problem `status` shows; the rule's other actions still apply."""
        found = self.groups.get(rule.name)
        if found is not None:
            return found
        groups = self.groups[rule.name] = Groups()
        if self.tx is None or not (rule.policy.needs_cgroup or rule.throttle):
            return groups
        if rule.policy.needs_cgroup:
            try:
                plan = priority.plan_cgroup(rule.policy, f"govern-{rule.name}")
                self._make_groups(rule, job.cgroup_changes(plan), groups)
            except (UnavailableError, SystemStateError) as err:
                self.problem(f"rule {rule.name} weights", f"no cgroup weights: {err}")
        if rule.throttle:
            self._make_freezer(rule, groups)
        return groups

    def _make_groups(self, rule: Rule, changes: list[system.Change], groups: Groups) -> None:
        assert self.tx is not None
        for change in changes:
            try:
                self.tx.apply(change)
            except SystemStateError as err:
                self.problem(f"rule {rule.name} {change.describe()}", str(err))
                if not isinstance(change, system.CgroupDir) or change.shared:
                    return
                continue
            if isinstance(change, system.CgroupDir) and not change.shared:
                groups.dirs.append(change.path)

    def _make_freezer(self, rule: Rule, groups: Groups) -> None:
        assert self.tx is not None
        target = throttle.freezer_group(rule.name)
        if target is None:
            self.problem(f"rule {rule.name} throttle", "no cgroup freezer (v1 freezer or "
                          "cgroup v2) is mounted: it cannot be paused")
            return
        path, version = target
        try:
            if path not in groups.dirs:
                before = len(groups.dirs)
                self._make_groups(rule, [system.CgroupDir(os.path.dirname(path), shared=True),
                                         system.CgroupDir(path)], groups)
                if len(groups.dirs) == before:
                    return
            freezer = system.CgroupFreezer(path, version)
            self.tx.apply(freezer)
            groups.freezers.append(freezer)
        except SystemStateError as err:
            self.problem(f"rule {rule.name} throttle", f"cannot be paused: {err}")

    def problem(self, key: str, message: str) -> None:
        if self.problems.get(key) != message:
            log.warning("%s: %s", key, message)
        self.problems[key] = message
        self.dirty = True

    # --- scans ------------------------------------------------------------------------------

    def scan(self) -> None:
        """At start-up and after lost events: forget what exited, adopt what governed
        processes forked meanwhile, and match every other process."""
        self.counters.rescans += 1
        for pid, g in list(self.governed.items()):
            if procfs.start_time(pid) != g.start:
                self._forget(pid)
        for g in list(self.governed.values()):
            for child in procfs.descendants_of(g.pid):
                if child not in self.governed:
                    parent = procfs.parent_of(child)
                    self._inherit(child, self.governed.get(parent or 0, g))
        for pid in procfs.pids():
            if pid not in self.governed:
                try:
                    self.consider(pid)
                except (OSError, BackburnerError) as err:
                    self.counters.errors += 1
                    log.warning("PID %d: %s", pid, err)

    # --- throttling -------------------------------------------------------------------------

    def throttle_active(self) -> bool:
        return self.n_throttled > 0

    def sync_triggers(self) -> bool:
        """PSI triggers are open while throttled work is governed (and only then: every
        trigger is a kernel timer). True when the set changed."""
        want = self.throttle is not None and self.n_throttled > 0
        if want == bool(self.triggers):
            return False
        if want:
            assert self.throttle is not None
            self.triggers, problems = throttle.open_triggers(self.ruleset.throttle)
            for p in problems:
                self.problem(p, p)
            window = min((t.window_s for t in self.triggers), default=None)
            if window is not None:
                self.throttle.hold_s = 1.5 * window
            return bool(self.triggers)
        if self.throttle is not None and self.throttle.force_thaw(time.monotonic()):
            self.act("thaw")
        throttle.close_triggers(self.triggers)
        self.triggers = []
        return True

    def freezers(self) -> list[system.CgroupFreezer]:
        return [f for g in self.groups.values() for f in g.freezers]

    def act(self, action: str | None) -> None:
        """Freeze or thaw every throttled group (with --dry-run: say so)."""
        if action is None:
            return
        self.dirty = True
        thr = self.throttle
        assert thr is not None
        if action == "freeze":
            log.debug("pausing throttled groups (IO pressure)")
        else:
            self.report("paused throttled bulk work for %.0f ms (IO pressure); it runs at least "
                        "%.0f ms before the next pause%s", thr.stats.last_length_s * 1e3,
                        max(0.0, thr.run_until - time.monotonic()) * 1e3,
                        " [dry run]" if self.dry_run else "")
        if self.dry_run:
            return
        for fz in self.freezers():
            try:
                fz.freeze() if action == "freeze" else fz.thaw()
            except SystemStateError as err:
                self.problem(f"freezer {fz.path}", str(err))

    # --- status -----------------------------------------------------------------------------

    def status(self, opts: Options, started: float, running: bool = True) -> dict[str, Any]:
        listed = sorted(self.governed.values(), key=lambda g: (g.parent is not None, g.pid))
        thr = self.throttle
        stats = thr.stats if thr else throttle.PauseStats()
        return {
            "running": running, "pid": os.getpid(), "start": procfs.start_time(os.getpid()),
            "started_at": started, "updated_at": time.time(), "dry_run": opts.dry_run,
            "rules_dir": opts.rules_dir or load.RULES_DIR, "defaults": opts.defaults,
            "rule_files": list(self.ruleset.files),
            "rules": [r.name for r in self.ruleset.rules],
            "counters": vars(self.counters).copy(),
            "exec_events": self.exec_events,
            "governed_total": len(self.governed),
            "governed": [g.to_json() for g in listed[:STATUS_LIST_MAX]],
            "throttle": {
                "watch": self.watch, "triggers": [t.spec for t in self.triggers],
                "groups": [f.path for f in self.freezers()],
                "frozen": bool(thr and thr.frozen), "pauses": stats.pauses,
                "paused_s": round(stats.paused_s, 3), "longest_s": round(stats.longest_s, 3),
                "pause_s": thr.pause_s if thr else None,
                "min_duty": thr.min_duty if thr else None,
            },
            "problems": sorted(self.problems.values()),
        }


def _without_start(snap: dict[str, int] | None) -> dict[str, int]:
    return {k: v for k, v in (snap or {}).items() if k != "start"}


def _cpu_matches(tid: int, cpu: str) -> bool:
    want = priority.CPUPolicy.parse(cpu)
    name, nice = priority.read_cpu(tid)
    return name == want.kind and (want.nice is None or nice == want.nice)


# --- the loop ---------------------------------------------------------------------------------


def sd_notify(message: str) -> None:
    """Tell systemd (Type=notify) how we are: one datagram to $NOTIFY_SOCKET, if set."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return
    if address.startswith("@"):
        address = "\0" + address[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as s:
            s.sendto(message.encode(), address)
    except OSError as err:
        log.warning("could not notify systemd: %s", err)


def _check_ready_file(path: str | None) -> None:
    """Before anything is governed: the ready file can be created (a stale one from an
    earlier run made it fail only after processes had been governed and put back)."""
    if path is None:
        return
    safepath.check_chain(os.path.dirname(os.path.abspath(path)), "ready file directory")
    if os.path.lexists(path):
        raise ExistsError(f"ready file {path} already exists (left by an earlier run?)",
                          "remove it, or give a new path")


def _ready(path: str | None) -> None:
    """The caller's ready file: created (never an existing one, never through a symlink)
    once we are subscribed and have scanned, so no process can be missed from then on."""
    if path is None:
        return
    safepath.check_chain(os.path.dirname(os.path.abspath(path)), "ready file directory")
    fd = safepath.create_new(path, 0o644)
    try:
        os.write(fd, f"{os.getpid()}\n".encode())
    finally:
        os.close(fd)


@dataclass
class Stopped:
    """How `run` ended: the signal that stopped it (everything was put back)."""

    reason: str
    governed: int


def run(opts: Options) -> Stopped:
    """`govern run`: load the rules (refusing bad or unsafe ones), subscribe, scan, serve
    until stopped; everything changed is put back before this returns."""
    if not opts.dry_run:
        system.require_root("governing processes (priorities of other users' processes, "
                            "cgroups)")
    ruleset = load.load(opts.rules_dir, opts.defaults)
    _check_ready_file(opts.ready_file)
    started = time.time()
    names = ruleset.names_bytes()
    watch = execwatch.open_watch(names) if names is not None and not opts.no_exec_filter \
        else None
    # while nothing is governed only starts matter (forks and exits only of what is
    # governed: children inherit, exits end a record); execs come filtered from the watch
    starts = proc_events.COMM if watch is not None else proc_events.STARTS
    with state.Lock(), proc_events.Connector() as conn, closing_watch(watch):
        tx_cm = nullcontext(None) if opts.dry_run else system.LiveTransaction("govern")
        gov: Governor | None = None
        reason = "stopped"
        try:
            with tx_cm as tx:
                gov = Governor(ruleset, tx,
                               on_governing=lambda on: conn.narrow(None if on else starts))
                gov.exec_events = "kernel-filtered" if watch else "connector"
                if any(r.throttle for r in ruleset.rules):
                    gov.throttle = throttle.Throttle.from_settings(ruleset.throttle)
                    gov.watch, problems = throttle.watch_paths(ruleset.throttle)
                    for p in problems:
                        gov.problem(p, p)
                gov.scan()
                if not gov.governed:
                    conn.narrow(starts)
                state.write(gov.status(opts, started))
                _ready(opts.ready_file)
                sd_notify(f"READY=1\nMAINPID={os.getpid()}\nSTATUS=governing "
                          f"{len(gov.governed)} processes")
                log.info("governing with %d rules from %s%s", len(ruleset.rules),
                         ", ".join(ruleset.files) or "no files",
                         " (dry run: nothing is changed)" if opts.dry_run else "")
                try:
                    serve(gov, conn, opts, started, watch)
                except (KeyboardInterrupt, interrupts.Terminated) as stop:
                    reason = f"stopped by {stop}" if str(stop) else "interrupted"
                    sd_notify("STOPPING=1")
                    raise
        except (KeyboardInterrupt, interrupts.Terminated):
            pass
        finally:
            if gov is not None:
                throttle.close_triggers(gov.triggers)
                if gov.throttle is not None:
                    gov.throttle.force_thaw(time.monotonic())
                state.write(gov.status(opts, started, running=False))
    return Stopped(reason, len(gov.governed) if gov else 0)


@contextmanager
def closing_watch(watch: execwatch.ExecWatch | None) -> Iterator[None]:
    try:
        yield
    finally:
        if watch is not None:
            watch.close()


def serve(gov: Governor, conn: proc_events.Connector, opts: Options, started: float,
          watch: execwatch.ExecWatch | None = None) -> None:
    """The loop. With nothing due and no trigger open it sleeps in recv() on the
    connector (one wake-up per event, nothing else), or with the exec watch in poll() on
    the connector and the watch's rings; otherwise in poll() on all of those and the
    trigger fds, with a timeout for the next pause boundary or status write. The watch's
    rings are in every poll: while the connector is narrowed they are the only source of
    execs."""
    watch_fds = set(watch.fds) if watch is not None else set()
    conn_fd = conn.fileno()

    def new_poller() -> select.poll:
        poller = select.poll()
        for fd in (conn_fd, *watch_fds):
            poller.register(fd, select.POLLIN)
        for t in gov.triggers:
            poller.register(t.fd, select.POLLPRI)
        return poller

    poller = new_poller()
    thr = gov.throttle
    written = time.monotonic()
    status_due: float | None = None  # a rename costs ~1 ms on ext4: changes are batched
    while True:
        if gov.sync_triggers():
            poller = new_poller()
        now = time.monotonic()
        deadlines = [d for d in (thr.deadline(now) if thr else None, status_due)
                     if d is not None]
        if not deadlines and not gov.triggers and not gov.governed and conn.narrowed \
                and watch is None:
            _idle(gov, conn)
        elif not deadlines and not gov.triggers and watch is None:
            _events(gov, conn, conn.drain(block=True))
        else:
            timeout = max(0, math.ceil((min(deadlines) - now) * 1000)) if deadlines else None
            ready = poller.poll(timeout)
            if watch is not None and any(fd in watch_fds for fd, _ in ready):
                _watched_execs(gov, conn, watch)
            for fd, mask in ready:
                if fd == conn_fd:
                    _events(gov, conn, conn.drain())
                elif fd in watch_fds:
                    continue
                elif mask & (select.POLLERR | select.POLLHUP | select.POLLNVAL):
                    poller.unregister(fd)
                    path = next((t.path for t in gov.triggers if t.fd == fd), str(fd))
                    gov.problem(f"watch {path}", f"stopped watching {path} (its group was "
                                 "removed)")
                elif thr is not None and mask & select.POLLPRI:
                    gov.act(thr.pressure(time.monotonic(), gov.throttle_active()))
        now = time.monotonic()
        if thr is not None:
            due = thr.deadline(now)
            if due is not None and now >= due:
                gov.act(thr.due(now, gov.throttle_active()))
        if gov.dirty and status_due is None:
            status_due = now + STATUS_DELAY_S
        if (status_due is not None and now >= status_due) or now - written > STATUS_EVERY_S:
            state.write(gov.status(opts, started))
            gov.dirty = False
            status_due = None
            written = now


def _idle(gov: Governor, conn: proc_events.Connector) -> None:
    """Nothing governed, nothing due: the tight loop of `Connector.wait_start` until a
    program a rule may name starts; then the full path decides."""
    c = gov.counters
    names = gov.ruleset.names_bytes()
    if names is None:  # a rule without a plain list of names: every start needs a look
        _events(gov, conn, conn.drain(block=True))
        return

    def counts(events: int, execs: int, gone: int) -> None:
        c.events += events
        c.execs += execs
        c.gone += gone

    ev = conn.wait_start(names, counts)
    if ev is None:
        _events(gov, conn, conn.drain())
        return
    c.events += 1
    if ev.what == EXEC:
        c.execs += 1
    else:
        c.comms += 1
    try:
        gov.consider(ev.tgid, ev.comm, execed=ev.what == EXEC)
    except (OSError, BackburnerError) as err:
        c.errors += 1
        log.warning("%s event of PID %d: %s", ev.name, ev.tgid, err)


def _watched_execs(gov: Governor, conn: proc_events.Connector,
                   watch: execwatch.ExecWatch) -> None:
    """Starts of named programs, filtered by the kernel. While the connector is narrowed
    they are the only word of an exec; otherwise the connector reports them too, and a
    process already governed is left to it (an exec seen twice is decided once)."""
    c = gov.counters
    lost = watch.lost
    for pid, filename in watch.read():
        if pid in gov.governed:
            continue
        if conn.narrowed:
            c.events += 1
            c.execs += 1
        comm = os.path.basename(filename)[:15].decode(errors="replace")  # as exec set it
        try:
            gov.consider(pid, comm, execed=True)
        except (OSError, BackburnerError) as err:
            c.errors += 1
            log.warning("exec event of PID %d: %s", pid, err)
    if watch.lost != lost:
        c.lost_events += watch.lost - lost
        log.warning("exec events were lost (%d): rescanning /proc", watch.lost - lost)
        gov.scan()


def _events(gov: Governor, conn: proc_events.Connector, batch: proc_events.Batch) -> None:
    gov.handle(batch.events)
    if batch.incomplete:
        gov.counters.overflows += int(batch.overflow)
        gov.counters.lost_events += batch.lost
        log.warning("process events were lost (%s): rescanning /proc",
                    "socket overflow" if batch.overflow else f"{batch.lost} missed")
        gov.scan()
