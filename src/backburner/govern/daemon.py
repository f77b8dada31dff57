"""The govern daemon: process events -> `Governor` (rules, priorities, cgroups, pauses), all
undone when it stops.

One `system.LiveTransaction("govern")` lives as long as the daemon, and the governor makes
every change through it. On SIGTERM or Ctrl-C the transaction undoes everything still live
(priorities of processes that still run, cgroup membership or unit weights, frozen state);
after a SIGKILL the journal is stale and `backburner restore` does the same. SIGHUP reads
the rules again (`systemctl reload`): bad rules leave the old ones in force.

While it governs nothing the daemon asks the kernel for exec and comm events only and
sleeps in recv() (`proc_events.Connector.wait_start`: one wake-up per program started, a
few lines of Python each); while it governs something it takes all events and sleeps in
poll() on the connector and the PSI trigger fds. Its only timeouts are the end of a running
pause and a pending rewrite of the status file. It starts no processes.
"""

from __future__ import annotations

import logging
import math
import os
import select
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

from .. import system, systemd
from ..base import interrupts, quantities
from ..base.errors import BackburnerError, ExistsError
from ..files import safepath
from ..kernel import proc_events, procfs
from ..kernel.proc_events import EXEC
from ..policy import cgroup_plan, disks, grammar
from ..run import flushing
from ..systemd.notify import sd_notify
from . import execwatch, rulesources, state, throttle
from . import groups as cgroups
from .governor import Governor

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
    quiet: bool = False  # no warning when the rules' IO levers do nothing on / or /var


def status(gov: Governor, opts: Options, started: float, running: bool = True
           ) -> dict[str, Any]:
    """What the status file says (docs/guide/govern.md)."""
    gov.note_slow_matches()
    listed = sorted(gov.governed.values(), key=lambda g: (g.parent is not None, g.pid))
    thr = gov.throttle
    stats = thr.stats if thr else throttle.PauseStats()
    return {
        "running": running, "pid": os.getpid(), "start": procfs.start_time(os.getpid()),
        "started_at": started, "updated_at": time.time(), "dry_run": opts.dry_run,
        "rules_dir": opts.rules_dir or rulesources.RULES_DIR, "defaults": opts.defaults,
        "rule_files": list(gov.ruleset.files),
        "rules": [r.name for r in gov.ruleset.rules],
        "counters": vars(gov.counters).copy(),
        "exec_events": gov.exec_events,
        "governed_total": len(gov.governed),
        "governed": [g.to_json() for g in listed[:STATUS_LIST_MAX]],
        "throttle": {
            "watch": gov.watch, "triggers": [t.spec for t in gov.triggers],
            "groups": [f.path for f in gov.freezers()],
            "frozen": bool(thr and thr.frozen), "pauses": stats.pauses,
            "paused_s": round(stats.paused_s, 3), "longest_s": round(stats.longest_s, 3),
            "pause_s": thr.pause_s if thr else None,
            "min_duty": thr.min_duty if thr else None,
        },
        "flush_behind": gov.flushing.summary() if gov.flushing else None,
        "problems": sorted(gov.problems.values()),
        "disks": gov.disks,
    }


def _disk_levers(gov: Governor, opts: Options) -> None:
    """At start and on reload: what the rules' IO levers do on the disks of / and /var,
    for the status file, and one warning line where one does nothing (unless -q)."""
    policies = [r.policy for r in gov.ruleset.rules]
    owns = systemd.manages_cgroups(systemd.read_facts())
    found = disks.reports(policies, every_mounted=False, systemd_owns=owns)
    gov.disks = [r.as_dict() for r in found]
    line = disks.warning_of(found) if disks.asked(policies) else None
    if line and not opts.quiet:
        log.warning("warning: %s", line)


# --- the loop ---------------------------------------------------------------------------------


def _check_ready_file(path: str | None) -> None:
    """Before anything is governed: the ready file can be created (a stale one from an
    earlier run made it fail only after processes had been governed and put back)."""
    if path is None:
        return
    safepath.check_chain(os.path.dirname(os.path.abspath(path)), "ready file directory")
    if os.path.lexists(path):
        raise ExistsError(f"ready file {path} already exists (left by an earlier run?)",
                          "remove it, or give a new path")


def _ready(path: str | None) -> tuple[int, int] | None:
    """The caller's ready file: created whole (never an existing one, never through a
    symlink) once we are subscribed and have scanned, so no process can be missed from
    then on. Returns its identity (device, inode) for `_unready`."""
    if path is None:
        return None
    safepath.check_chain(os.path.dirname(os.path.abspath(path)), "ready file directory")
    tmp = os.path.join(os.path.dirname(os.path.abspath(path)),
                       f".{os.path.basename(path)}.{os.getpid()}")
    fd = safepath.create_new(tmp, 0o644)  # whole before it appears: a reader never sees ""
    try:
        os.write(fd, f"{os.getpid()}\n".encode())
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)  # never replaces a file that appeared meanwhile
        made = os.lstat(path)
    finally:
        os.unlink(tmp)
    return made.st_dev, made.st_ino


def _unready(path: str | None, made: tuple[int, int] | None) -> None:
    """The ready file goes with the daemon (a stale one would tell the next reader that a
    daemon is ready when none runs): removed if it is still the file we made, by its
    device and inode, never whatever is at the path now."""
    if path is None or made is None:
        return
    try:
        now = os.lstat(path)
        if (now.st_dev, now.st_ino) == made:
            os.unlink(path)
    except FileNotFoundError:
        pass


class Reload(BaseException):
    """SIGHUP while serving: read the rules again."""


class _Hangup:
    """SIGHUP asks for a reload. It is noted at once and raised as `Reload` only while
    the loop waits for events, never in the middle of a change."""

    def __init__(self) -> None:
        self.pending = False
        self.waiting = False

    def handler(self, _signum: int, _frame: Any) -> None:
        self.pending = True
        if self.waiting:
            raise Reload

    @contextmanager
    def waiting_for_events(self) -> Iterator[None]:
        self.waiting = True
        try:
            if self.pending:
                raise Reload
            yield
        finally:
            self.waiting = False


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
    ruleset = rulesources.load(opts.rules_dir, opts.defaults)
    _check_ready_file(opts.ready_file)
    started = time.time()
    units = not opts.dry_run and systemd.manages_cgroups(systemd.read_facts())
    if units:  # io.prio.class: no unit property, and the governed units' groups are systemd's
        for rule in ruleset.rules:
            cgroup_plan.refuse_for_job(rule.policy, f"govern rule {rule.name}", under_systemd=True)
    network = cgroups.Network(cgroups.network_target(ruleset, units)
                              if not opts.dry_run else None)
    watch = Watch(opts)
    watch.open(ruleset)
    hangup = _Hangup()
    with state.Lock(), proc_events.Connector() as conn, closing_watch(watch):
        tx_cm = nullcontext(None) if opts.dry_run else system.LiveTransaction("govern")
        gov: Governor | None = None
        ready: tuple[int, int] | None = None
        reason = "stopped"
        try:
            with tx_cm as tx, network:  # its pacer stops before the transaction undoes
                gov = Governor(ruleset, tx,
                               on_governing=lambda on: conn.narrow(None if on else watch.starts),
                               systemd_units=units, network=network)
                _throttle_settings(gov)
                _flush_behind(gov)
                _disk_levers(gov, opts)
                gov.exec_events = "kernel-filtered" if watch.watch else "connector"
                gov.scan()
                if not gov.governed:
                    conn.narrow(watch.starts)
                # a reload asked for as soon as we say we are ready is a reload, not an end
                old_hup = signal.signal(signal.SIGHUP, hangup.handler)
                try:
                    state.write(status(gov, opts, started))
                    ready = _ready(opts.ready_file)
                    sd_notify(f"READY=1\nMAINPID={os.getpid()}\nSTATUS=governing "
                              f"{quantities.plural(len(gov.governed), 'process', 'processes')}")
                    log.info("governing with %d rules from %s%s", len(ruleset.rules),
                             ", ".join(ruleset.files) or "no files",
                             " (dry run: nothing is changed)" if opts.dry_run else "")
                    while True:
                        try:
                            serve(gov, conn, opts, started, watch.watch, hangup)
                        except Reload:
                            hangup.pending = False
                            _reload(gov, opts, conn, watch)
                            state.write(status(gov, opts, started))  # `status` says so now
                except (KeyboardInterrupt, interrupts.Terminated) as stop:
                    reason = f"stopped by {stop}" if str(stop) else "interrupted"
                    sd_notify("STOPPING=1")
                    raise
                finally:
                    signal.signal(signal.SIGHUP, old_hup)
        except (KeyboardInterrupt, interrupts.Terminated):
            pass
        finally:
            _unready(opts.ready_file, ready)
            if gov is not None:
                throttle.close_triggers(gov.triggers)
                if gov.throttle is not None:
                    gov.throttle.force_thaw(time.monotonic())
                if gov.flushing is not None:
                    gov.flushing.stop()
                state.write(status(gov, opts, started, running=False))
    return Stopped(reason, len(gov.governed) if gov else 0)


class Watch:
    """The kernel-filtered exec watch for the rules' program names (opened again when a
    reload changes them), and what the connector reports while nothing is governed: only
    starts (forks and exits matter only for what is governed: children inherit, exits end
    a record); execs come filtered from the watch when there is one."""

    def __init__(self, opts: Options) -> None:
        self.opts = opts
        self.watch: execwatch.ExecWatch | None = None
        self.names: frozenset[bytes] | None = None

    @property
    def starts(self) -> int:
        return proc_events.COMM if self.watch is not None else proc_events.STARTS

    def open(self, ruleset: Any) -> None:
        names = ruleset.names_bytes()
        if self.watch is not None and names == self.names:
            return
        self.close()
        self.names = names
        if names is not None and not self.opts.no_exec_filter:
            self.watch = execwatch.open_watch(names)

    def close(self) -> None:
        if self.watch is not None:
            self.watch.close()
            self.watch = None


@contextmanager
def closing_watch(watch: Watch) -> Iterator[None]:
    try:
        yield
    finally:
        watch.close()


def _throttle_settings(gov: Governor) -> None:
    """Pauses as the rules say (the first time a rule throttles)."""
    if gov.throttle is None and any(r.throttle for r in gov.ruleset.rules):
        gov.throttle = throttle.Throttle.from_settings(gov.ruleset.throttle)
        gov.watch, problems = throttle.watch_paths(gov.ruleset.throttle)
        for p in problems:
            gov.problem(p, p)


def _flush_behind(gov: Governor) -> None:
    """The files of rules with flush_behind written back at the idle class (the first time
    a rule asks; not in a dry run, which changes nothing). Where it cannot watch (no
    fanotify, or a sandbox without it) the rules' other settings still apply: a problem,
    not the daemon's end, and tried again at the next reload."""
    if not any(r.flush_behind for r in gov.ruleset.rules):
        gov.problems.pop("flush-behind", None)  # no rule asks for it (any more)
    elif gov.flushing is None and gov.tx is not None:
        watch = flushing.FlushBehind(flushing.block_filesystems(),
                                     grammar.BUILTIN["background"], gov.flushes)
        try:
            watch.start()
        except (BackburnerError, OSError) as err:
            gov.problem("flush-behind", f"flush-behind is off: {err}")
            return
        gov.problems.pop("flush-behind", None)
        gov.flushing = watch


def _reload(gov: Governor, opts: Options, conn: proc_events.Connector, watch: Watch) -> None:
    """SIGHUP: the rules read again and in force for what starts from now on, and for
    running processes a new rule matches; bad rules leave the old ones in force (one line
    in the log and in `status`). Processes already governed stay so until they exit."""
    sd_notify("RELOADING=1")
    try:
        ruleset = rulesources.load(opts.rules_dir, opts.defaults)
    except BackburnerError as err:
        gov.problem("reload", f"rules not reloaded, the old ones stay: {err}")
        sd_notify("READY=1")
        return
    gov.problems.pop("reload", None)
    gov.set_rules(ruleset)
    watch.open(ruleset)
    _throttle_settings(gov)
    _flush_behind(gov)
    _disk_levers(gov, opts)
    gov.exec_events = "kernel-filtered" if watch.watch else "connector"
    if not gov.governed:
        conn.narrow(watch.starts)
    gov.scan()
    log.info("rules reloaded: %d rules from %s", len(ruleset.rules),
             ", ".join(ruleset.files) or "no files")
    sd_notify("READY=1\nSTATUS=governing "
              f"{quantities.plural(len(gov.governed), 'process', 'processes')}")


def serve(gov: Governor, conn: proc_events.Connector, opts: Options, started: float,
          watch: execwatch.ExecWatch | None = None, hangup: _Hangup | None = None) -> None:
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
    waiting = hangup.waiting_for_events if hangup is not None else nullcontext
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
            _idle(gov, conn, waiting)
        elif not deadlines and not gov.triggers and watch is None:
            with waiting():
                batch = conn.drain(block=True)
            _events(gov, conn, batch)
        else:
            timeout = max(0, math.ceil((min(deadlines) - now) * 1000)) if deadlines else None
            with waiting():
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
                    throttle.on_pressure(thr, gov.act, gov.throttle_active(), time.monotonic())
        now = time.monotonic()
        if thr is not None:
            throttle.on_clock(thr, gov.act, gov.throttle_active(), now)
        if gov.dirty and status_due is None:
            status_due = now + STATUS_DELAY_S
        if (status_due is not None and now >= status_due) or now - written > STATUS_EVERY_S:
            state.write(status(gov, opts, started))
            gov.dirty = False
            status_due = None
            written = now


def _idle(gov: Governor, conn: proc_events.Connector,
          waiting: Any = nullcontext) -> None:
    """Nothing governed, nothing due: the tight loop of `Connector.wait_start` until a
    program a rule may name starts; then the full path decides."""
    c = gov.counters
    names = gov.ruleset.names_bytes()
    if names is None:  # a rule without a plain list of names: every start needs a look
        with waiting():
            batch = conn.drain(block=True)
        _events(gov, conn, batch)
        return

    def counts(events: int, execs: int, gone: int) -> None:
        c.events += events
        c.execs += execs
        c.gone += gone

    with waiting():  # only counted events pass before a start: a reload loses none
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
