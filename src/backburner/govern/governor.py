"""What `govern` decides and changes, event by event: a process matched by a rule is
governed, its forks inherit, its exit retires it (the loop that feeds it is `daemon`).

Every change goes through the daemon's `system.LiveTransaction("govern")`, journaled before
it is made:
- a matched process: `Priorities` (every thread, and descendants it already has) and,
  where systemd owns the cgroup tree, its weights and pauses through its unit
  (`units.Placer`); elsewhere a `CgroupMove` into each of its rule's groups
  (`backburner/govern-RULE`, made once with `CgroupDir`; a throttled rule's group also
  gets a `CgroupFreezer`; a rule with `net` also moves it into the one group whose
  traffic is held back: `groups.Network`);
- a process forked by a governed one: `Inherited` (what its ancestor had before), so it is
  put back even after its parent has exited;
- a governed process's exit retires its entries (nothing left to undo).
Without a transaction (a dry run) it only says what it would do. It never touches PID 1,
kernel threads, itself or its own ancestors.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .. import system
from ..base.errors import BackburnerError, NotFoundError
from ..base.quantities import one_line
from ..kernel import priorities, proc_events, procfs
from ..kernel.proc_events import COMM as COMM_EVENT
from ..kernel.proc_events import EXEC, EXIT, FORK
from . import groups as cgroups
from . import procinfo, throttle
from .governed import Counters, Governed
from .groups import RuleGroups
from .pattern import MATCH_DEADLINE_S
from .rules import Rule, Ruleset
from .units import Placer

if TYPE_CHECKING:
    from ..run import flushing

log = logging.getLogger(__name__)

#: how long a governed process's PID still counts for flush-behind after its exit: its last
#: closes are queued before the exit, and read within a fraction of a second
FLUSH_GONE_S = 10.0


def _io_cpu(rule: Rule) -> tuple[str | None, str | None]:
    p = rule.policy
    return (str(p.io) if p.io else None), (str(p.cpu) if p.cpu else None)


def _protected() -> set[int]:
    me = os.getpid()
    return {0, 1, 2, me, *procfs.ancestors_of(me)}


class Governor:
    """The decisions and changes, event by event (the loop is `daemon.serve`)."""

    def __init__(self, ruleset: Ruleset, tx: system.LiveTransaction | None,
                 report: Callable[..., None] = log.info,
                 on_governing: Callable[[bool], None] = lambda _any: None,
                 systemd_units: bool = False,
                 network: cgroups.Network | None = None) -> None:
        self.ruleset = ruleset
        self._patterned = [r for r in ruleset.rules if r.match.cmdline]
        self.tx = tx
        self.dry_run = tx is None
        self.report = report
        self.on_governing = on_governing  # told when the first is governed / the last goes
        self.governed: dict[int, Governed] = {}
        self.n_throttled = 0
        self.groups: dict[str, RuleGroups] = {}
        self.problems: dict[str, str] = {}
        self.counters = Counters()
        self.exec_events = "connector"  # or "kernel-filtered" (execwatch)
        self.disks: list[dict[str, Any]] = []  # the rules' IO levers per disk (the daemon's)
        self.protected = _protected()
        self.dirty = True
        self.throttle: throttle.Throttle | None = None
        self.triggers: list[throttle.Trigger] = []
        self.watch: list[str] = []
        self._sets_text: dict[str, str] = {}
        # where systemd owns the cgroup tree: weights and pauses through units
        self.placer = Placer(tx, self.problem) if tx is not None and systemd_units else None
        self.network = network or cgroups.Network(None)  # rules with net = "background"
        self.flushing: flushing.FlushBehind | None = None  # for rules with flush_behind
        self._flush_rules = {r.name for r in ruleset.rules if r.flush_behind}
        self._flush_gone: dict[int, float] = {}  # PID -> its exit, for flush-behind
        self._flush_pruned = 0.0

    def set_rules(self, ruleset: Ruleset) -> None:
        """New rules (a reload): for processes that start from now on, and running ones a
        new rule matches (the caller rescans); those governed stay so until they exit."""
        self.ruleset = ruleset
        self._patterned = [r for r in ruleset.rules if r.match.cmdline]
        self._flush_rules = {r.name for r in ruleset.rules if r.flush_behind}
        self._sets_text.clear()
        self.dirty = True

    def flushes(self, pid: int) -> bool:
        """Whether a file closed by pid is written back at once (a rule with flush_behind
        governs it, or did until it exited FLUSH_GONE_S ago: a short-lived writer's event
        is read after its exit): asked by the flush-behind thread, lookups only."""
        g = self.governed.get(pid)
        if g is not None:
            return g.rule in self._flush_rules
        gone = self._flush_gone.get(pid)
        return gone is not None and time.monotonic() - gone < FLUSH_GONE_S

    def _note_flush_gone(self, pid: int) -> None:
        """Remembered for the flush-behind thread (which only looks keys up); the old ones
        forgotten at most once a second, into a new dict."""
        now = time.monotonic()
        self._flush_gone[pid] = now
        if now - self._flush_pruned >= 1.0:
            self._flush_pruned = now
            self._flush_gone = {p: t for p, t in list(self._flush_gone.items())
                                if now - t < FLUSH_GONE_S}

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
        old = self.governed.get(pid)
        if old is not None and old.rule in self._flush_rules:
            self._note_flush_gone(pid)  # before it leaves `governed`: the thread reads both
        g = self.governed.pop(pid, None)
        if g is not None:
            self.n_throttled -= g.throttled
            self.dirty = True
            if self.placer is not None:
                self.placer.release(g.unit)
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
            self.report("would govern PID %d (%s) by rule %s: %s", pid, one_line(comm),
                        rule.name, g.sets)
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
            if self.placer is not None:
                g.unit = self.placer.place(pid, start, rule)
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
            self.problem(f"rule {rule.name}", f"PID {pid} ({one_line(comm)}): {err}")
        if first:  # forks and exits matter from now on (those of the moment in between are
            self.on_governing(True)  # caught by the walk of its descendants just below)
        self._put(g)
        self.report("governing PID %d (%s) by rule %s: %s", pid, one_line(comm), rule.name,
                    g.sets)
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
                               via.pid, old, {}, [entry], unit=g.unit)
                for path in g.moves:
                    move = self.tx.record(system.CgroupMove(child, path))
                    kid.entries.append(move)
                    kid.moves[path] = move.old.get("from") or ""
            except (BackburnerError, OSError):
                self.counters.gone += 1
                continue
            self._put(kid)
            if self.placer is not None:
                self.placer.hold(kid.unit)
            self.counters.inherited += 1

    def _inherit(self, pid: int, parent: Governed) -> None:
        """A governed process forked: the child has its priorities and groups already."""
        self.counters.inherited += 1
        child = Governed(pid, 0, parent.comm, parent.rule, parent.sets, time.time(),
                         parent.io, parent.cpu, parent.throttled, parent.pid, parent.old,
                         parent.moves, unit=parent.unit)
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
        if self.placer is not None:
            self.placer.hold(child.unit)

    def _check_thread(self, g: Governed, tid: int) -> None:
        """A new thread inherits its creator's priorities; one created while we changed the
        others may have copied the old ones: then the process's change is applied again."""
        if g.prio_entry is None or self.tx is None:
            return
        try:
            ok = ((g.io is None or str(priorities.ioprio_get(tid)) == g.io)
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
        groups = self._groups(rule) if self.tx is not None else RuleGroups()
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
        self.report("governing PID %d (%s) by rule %s: %s", g.pid, one_line(g.comm),
                    rule.name, g.sets)

    def _forget(self, pid: int) -> None:
        g = self._drop(pid)
        if g is not None:
            self._retire(g)

    def _retire(self, g: Governed) -> None:
        if self.tx is not None:
            for entry in g.entries:
                self.tx.retire(entry)
        g.entries.clear()

    def _groups(self, rule: Rule) -> RuleGroups:
        """The rule's cgroups, made on its first match."""
        found = self.groups.get(rule.name)
        if found is not None:
            return found
        groups = self.groups[rule.name] = RuleGroups()
        if self.placer is None:  # systemd's units carry weights and pauses (`Placer`)
            cgroups.fill(groups, rule, self.tx, self.problem)
            if rule.net and self.tx is not None:
                path = self.network.group(self.tx, rule, self.problem)
                if path is not None:
                    groups.dirs.append(path)
        return groups

    def note_slow_matches(self) -> None:
        """Command lines a rule's cmdline pattern could not be searched in within its
        deadline (each counted as no match): added to the count `status` shows, and each
        such rule named once among the problems (and in the log)."""
        for rule in self._patterned:
            late = sum(p.timeouts for p in rule.match.cmdline)
            if late:
                for p in rule.match.cmdline:
                    p.timeouts = 0
                self.counters.slow_matches += late
                self.dirty = True
                self.problem(f"rule {rule.name} cmdline", f"rule {rule.name}: its cmdline "
                             f"pattern ran past the {MATCH_DEADLINE_S * 1000:.0f} ms deadline "
                             "on some command lines, which it then did not match")

    def problem(self, key: str, message: str) -> None:
        message = one_line(message)  # it may name a process (any user's choice of name)
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
            throttle.hold_for(self.throttle, self.triggers)
            return bool(self.triggers)
        if self.throttle is not None:
            throttle.stop(self.throttle, self.act, self.triggers, time.monotonic())
        else:
            throttle.close_triggers(self.triggers)
        self.triggers = []
        return True

    def freezers(self) -> list[system.CgroupFreezer | system.UnitFrozen]:
        found: list[system.CgroupFreezer | system.UnitFrozen] = [
            f for g in self.groups.values() for f in g.freezers]
        return found + (self.placer.freezers() if self.placer is not None else [])

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
            except BackburnerError as err:
                self.problem(f"freezer {fz.path}", str(err))


def _without_start(snap: dict[str, int] | None) -> dict[str, int]:
    return {k: v for k, v in (snap or {}).items() if k != "start"}


def _cpu_matches(tid: int, cpu: str) -> bool:
    want = priorities.CPUPolicy.parse(cpu)
    name, nice = priorities.read_cpu(tid)
    return name == want.kind and (want.nice is None or nice == want.nice)
