"""Whose IO a probe waited behind: one block device's requests during a probe's run,
attributed to the tasks that issued them (named apart from the X windows of `bench/display`
and the TCP window clamp of `net`: the period here is the probe's, the word "window" below
means that period).

`IOAttribution(device)` with `start()` / `stop() -> dict` is for `bench`: around a probe it
records, with `perf record -a`,

* `block:block_bio_queue` and `block:block_split`: who *asked* for each piece of IO (the
  task that submitted the bio, in its own context);
* `block:block_rq_issue`: each request the device was *given* during the window. Under an
  IO scheduler this is the honest "who got the disk": a request queued long before still
  counts when it reaches the device, and one still queued at the end does not. The task
  running the dispatch is often kblockd, so each issued request is attributed to the
  submitter of the bio it starts with (matched by device sector; a bio split in two keeps
  its submitter; an empty flush request goes to the last task that asked for a flush);
* `writeback:writeback_start` for this device: which kernel threads were writeback
  flushers (their names alone do not say);
* `sched:sched_process_fork`: the probe's and the load's children born in the window.

Requests are grouped as probe (the given PIDs and their descendants), load (same), writeback
(flusher threads), journal (jbd2/*, xfsaild/*, and kernel workers whose writes carry a
flush or FUA, as XFS log commits do) and other; requests whose bios were queued before the
window are "unattributed". Without perf, `proc-io` falls back to /proc/PID/io deltas: all
devices (not just this one), writes counted when dirtied (not when the flusher writes them),
tasks that ended inside the window lost. The result says which method was used.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base.errors import NotFoundError, UnavailableError, UsageError
from . import counters, engines
from .perfrecord import PerfRecord

log = logging.getLogger(__name__)

GROUPS = ("probe", "load", "writeback", "journal", "other")
SECTOR = 512
_JOURNAL_COMMS = ("jbd2/", "xfsaild/")


# --- the device --------------------------------------------------------------------------


@dataclass(frozen=True)
class Device:
    """A block device as the block tracepoints name it: dev_t = major << 20 | minor."""

    name: str
    major: int
    minor: int
    disk_major: int
    disk_minor: int
    #: every dev_t a bio for this device may carry (the disk and its partitions)
    bio_devs: tuple[tuple[int, int], ...]
    #: for a partition, its sectors on the disk (requests are traced at disk level)
    sectors: tuple[int, int] | None = None

    @property
    def label(self) -> str:
        return f"{self.major}:{self.minor}"


def kernel_dev(major: int, minor: int) -> int:
    """The kernel's internal dev_t (MKDEV): what the block tracepoints' `dev` field holds."""
    return (major << 20) | minor


def _numbers(sys_dir: Path) -> tuple[int, int]:
    major, minor = (sys_dir / "dev").read_text().strip().split(":")
    return int(major), int(minor)


def resolve_device(name: str, sys_block: Path = Path("/sys/class/block")) -> Device:
    """"loop0" or "/dev/loop0" -> its numbers, its disk's, and its partitions' (sysfs)."""
    short = os.path.basename(os.path.realpath(name)) if name.startswith("/") else name
    node = sys_block / short
    if not (node / "dev").exists():
        raise NotFoundError(f"{name}: no such block device")
    major, minor = _numbers(node)
    real = Path(os.path.realpath(node))
    if (node / "partition").exists():
        disk = real.parent
        start = int((node / "start").read_text())
        size = int((node / "size").read_text())
        dmaj, dmin = _numbers(disk)
        return Device(short, major, minor, dmaj, dmin, ((major, minor), (dmaj, dmin)),
                      (start, start + size))
    parts = [_numbers(p) for p in real.iterdir() if (p / "partition").exists()]
    return Device(short, major, minor, major, minor, ((major, minor), *parts))


# --- pure: events -> attribution -------------------------------------------------------------


@dataclass(frozen=True)
class Event:
    kind: str  # queue | split | issue | writeback | fork
    pid: int
    tid: int
    comm: str
    dev: tuple[int, int] = (0, 0)
    rwbs: str = ""
    sector: int = 0
    nr_sector: int = 0
    nbytes: int = 0
    new_sector: int = 0
    child: int = 0


_LINE = re.compile(r"^\s*(?P<comm>.*?)\s+(?P<pid>-?\d+)/(?P<tid>\d+)\s+"
                   r"(?P<event>[\w-]+:[\w-]+):\s?(?P<rest>.*)$")
_BIO = re.compile(r"^(\d+),(\d+) (\S+) (\d+) \+ (\d+)")
_SPLIT = re.compile(r"^(\d+),(\d+) (\S+) (\d+) / (\d+)")
_ISSUE = re.compile(r"^(\d+),(\d+) (\S+) (\d+) \(.*?\) (\d+) \+ (\d+)")
_CHILD = re.compile(r"child_pid=(\d+)")


def parse_events(lines: Iterable[str]) -> list[Event]:
    """`perf script -F comm,pid,tid,event,trace` lines -> Events (others are skipped)."""
    out = []
    for line in lines:
        m = _LINE.match(line)
        if not m:
            continue
        pid, tid, comm = int(m["pid"]), int(m["tid"]), m["comm"].strip()
        event, rest = m["event"], m["rest"]
        base = {"pid": pid, "tid": tid, "comm": comm}
        if event == "block:block_bio_queue" and (b := _BIO.match(rest)):
            out.append(Event("queue", **base, dev=(int(b[1]), int(b[2])), rwbs=b[3],
                             sector=int(b[4]), nr_sector=int(b[5])))
        elif event == "block:block_split" and (s := _SPLIT.match(rest)):
            out.append(Event("split", **base, dev=(int(s[1]), int(s[2])), rwbs=s[3],
                             sector=int(s[4]), new_sector=int(s[5])))
        elif event == "block:block_rq_issue" and (i := _ISSUE.match(rest)):
            out.append(Event("issue", **base, dev=(int(i[1]), int(i[2])), rwbs=i[3],
                             nbytes=int(i[4]), sector=int(i[5]), nr_sector=int(i[6])))
        elif event == "writeback:writeback_start":
            out.append(Event("writeback", **base))
        elif event == "sched:sched_process_fork" and (c := _CHILD.search(rest)):
            out.append(Event("fork", **base, child=int(c[1])))
    return out


@dataclass
class Tally:
    requests: int = 0
    bytes: int = 0
    read_bytes: int = 0
    write_bytes: int = 0
    queued_bytes: int = 0

    def add_issue(self, rwbs: str, nbytes: int) -> None:
        self.requests += 1
        self.bytes += nbytes
        if "R" in rwbs:
            self.read_bytes += nbytes
        elif "W" in rwbs:
            self.write_bytes += nbytes

    def as_dict(self) -> dict[str, int]:
        return {"requests": self.requests, "bytes": self.bytes, "read_bytes": self.read_bytes,
                "write_bytes": self.write_bytes, "queued_bytes": self.queued_bytes}


def tree(seeds: Iterable[int], edges: dict[int, set[int]]) -> set[int]:
    """The seeds and every task forked from them (edges: forking pid -> child ids)."""
    out = set(seeds)
    stack = list(out)
    while stack:
        for child in edges.get(stack.pop(), ()):
            if child not in out:
                out.add(child)
                stack.append(child)
    return out


def _journal(comm: str, flushes: bool) -> bool:
    return comm.startswith(_JOURNAL_COMMS) or (comm.startswith("kworker/") and flushes)


@dataclass
class _Owner:
    pid: int
    tid: int
    comm: str


def attribute(events: Iterable[Event], *, probe: Iterable[int] = (),
              load: Iterable[int] = (), known_edges: dict[int, set[int]] | None = None,
              sectors: tuple[int, int] | None = None) -> dict[str, Any]:
    """Issued requests and queued bytes per submitting task, grouped. Pure.

    known_edges: parent -> children that existed before the window (from /proc), so a
    load's older children count as load too.
    """
    owners: dict[int, _Owner] = {}
    flush_owner: _Owner | None = None
    flushers: set[int] = set()
    edges: dict[int, set[int]] = {k: set(v) for k, v in (known_edges or {}).items()}
    tally: dict[tuple[int, int, str], Tally] = {}
    flushing: set[tuple[int, int, str]] = set()  # tasks that asked for a flush or FUA
    unattributed = Tally()
    for ev in events:
        who = _Owner(ev.pid, ev.tid, ev.comm)
        if ev.kind == "writeback":
            flushers.add(ev.tid)
        elif ev.kind == "fork":
            edges.setdefault(ev.pid, set()).add(ev.child)
        elif ev.kind == "queue":
            owners[ev.sector] = who
            key = (who.pid, who.tid, who.comm)
            tally.setdefault(key, Tally()).queued_bytes += ev.nr_sector * SECTOR
            if "F" in ev.rwbs:
                flush_owner = who
                flushing.add(key)
        elif ev.kind == "split":
            owners[ev.new_sector] = owners.get(ev.sector, who)
        elif ev.kind == "issue":
            if sectors and ev.nr_sector and not sectors[0] <= ev.sector < sectors[1]:
                continue
            owner = flush_owner if ev.nr_sector == 0 and "F" in ev.rwbs else \
                owners.get(ev.sector)
            if owner is None:
                unattributed.add_issue(ev.rwbs, ev.nbytes)
                continue
            tally.setdefault((owner.pid, owner.tid, owner.comm), Tally()).add_issue(
                ev.rwbs, ev.nbytes)
    probe_set, load_set = tree(probe, edges), tree(load, edges)

    def group(pid: int, tid: int, comm: str) -> str:
        if pid in probe_set or tid in probe_set:
            return "probe"
        if pid in load_set or tid in load_set:
            return "load"
        if tid in flushers:
            return "writeback"
        if _journal(comm, (pid, tid, comm) in flushing):
            return "journal"
        return "other"

    groups = {g: Tally() for g in GROUPS}
    tasks = []
    for (pid, tid, comm), t in tally.items():
        g = group(pid, tid, comm)
        for name in ("requests", "bytes", "read_bytes", "write_bytes", "queued_bytes"):
            setattr(groups[g], name, getattr(groups[g], name) + getattr(t, name))
        tasks.append({"group": g, "pid": pid, "tid": tid, "comm": comm, **t.as_dict()})
    tasks.sort(key=lambda r: (-r["bytes"], -r["queued_bytes"], r["tid"]))
    return {"groups": {g: t.as_dict() for g, t in groups.items()}, "tasks": tasks,
            "unattributed": {"requests": unattributed.requests, "bytes": unattributed.bytes},
            "flusher_tids": sorted(flushers)}


# --- /proc/PID/io, the fallback --------------------------------------------------------------


def proc_io(proc: Path = counters.PROC) -> dict[int, tuple[int, int, str]]:
    """pid -> (read_bytes, write_bytes, comm) for every process whose io file we may read."""
    out = {}
    for entry in os.scandir(proc):
        if not entry.name.isdigit():
            continue
        try:
            fields = dict(line.split(": ", 1) for line in
                          Path(entry.path, "io").read_text().splitlines() if ": " in line)
            comm = Path(entry.path, "comm").read_text().strip()
            out[int(entry.name)] = (int(fields["read_bytes"]), int(fields["write_bytes"]), comm)
        except (OSError, KeyError, ValueError):
            continue
    return out


def attribute_proc_io(before: dict[int, tuple[int, int, str]],
                      after: dict[int, tuple[int, int, str]], parents: dict[int, int], *,
                      probe: Iterable[int] = (), load: Iterable[int] = ()) -> dict[str, Any]:
    """Per-process read/write byte deltas, grouped like `attribute` (no flusher/journal:
    kernel threads do not account their IO here). Pure."""
    edges: dict[int, set[int]] = {}
    for pid, ppid in parents.items():
        edges.setdefault(ppid, set()).add(pid)
    probe_set, load_set = tree(probe, edges), tree(load, edges)
    groups = {g: Tally() for g in GROUPS}
    tasks = []
    for pid, (rb, wb, comm) in after.items():
        rb0, wb0, _ = before.get(pid, (0, 0, comm))
        dr, dw = rb - rb0, wb - wb0
        if dr <= 0 and dw <= 0:
            continue
        g = "probe" if pid in probe_set else "load" if pid in load_set else (
            "journal" if comm.startswith(_JOURNAL_COMMS) else "other")
        t = Tally(0, max(dr, 0) + max(dw, 0), max(dr, 0), max(dw, 0), 0)
        for name in ("bytes", "read_bytes", "write_bytes"):
            setattr(groups[g], name, getattr(groups[g], name) + getattr(t, name))
        tasks.append({"group": g, "pid": pid, "tid": pid, "comm": comm, **t.as_dict()})
    tasks.sort(key=lambda r: (-r["bytes"], r["pid"]))
    return {"groups": {g: t.as_dict() for g, t in groups.items()}, "tasks": tasks,
            "unattributed": {"requests": 0, "bytes": 0}, "flusher_tids": []}


# --- the window ------------------------------------------------------------------------------


PERF_DETAIL = ("perf record -a: block:block_bio_queue + block:block_split (who queued), "
               "block:block_rq_issue (issued to the device in the window), "
               "writeback:writeback_start (flusher threads), sched:sched_process_fork")
PROC_DETAIL = ("/proc/PID/io read_bytes/write_bytes deltas: all devices, writes counted "
               "when dirtied, tasks that ended in the window are missing, no request counts")


@dataclass
class IOAttribution:
    """`start()` before the probe, `stop()` after it: the device's IO in between, per task.

    method: "auto" (perf when it can run, else proc-io), "perf" or "proc-io". PIDs given to
    `stop` override those given here (the probe's PID is often known only after start).
    """

    device: str
    probe_pids: tuple[int, ...] = ()
    load_pids: tuple[int, ...] = ()
    method: str = "auto"
    _dev: Device | None = field(default=None, init=False, repr=False)
    _perf: PerfRecord = field(default_factory=lambda: PerfRecord(
        "io-", "the block tracepoints"), init=False, repr=False)
    _started: float = field(default=0.0, init=False, repr=False)
    _before: dict[int, tuple[int, int, str]] = field(default_factory=dict, init=False,
                                                      repr=False)
    _parents: dict[int, int] = field(default_factory=dict, init=False, repr=False)
    used: str = field(default="", init=False)

    def __post_init__(self) -> None:
        if self.method not in ("auto", "perf", "proc-io"):
            raise UsageError(f"unknown IO attribution method {self.method!r}",
                             "choose auto, perf or proc-io")
        self._dev = resolve_device(self.device)

    def start(self) -> None:
        self.used = self._choose()
        self._parents = counters.parent_map()
        self._started = time.monotonic()
        if self.used == "perf":
            self._start_perf()
        else:
            self._before = proc_io()

    def _choose(self) -> str:
        if self.method != "auto":
            if self.method == "perf":
                why = engines.PerfEngine().missing()
                if why:
                    raise UnavailableError(f"IO attribution with perf: {why}",
                                           "install linux-perf and run as root")
            return self.method
        return "perf" if engines.PerfEngine().missing() is None else "proc-io"

    def _start_perf(self) -> None:
        assert self._dev is not None
        self._perf.start(self._perf_argv)

    def _perf_argv(self, data: str, ctl: int, ack: int) -> list[str]:
        dev = self._dev
        assert dev is not None
        bio = " || ".join(f"dev == {kernel_dev(*d)}" for d in dev.bio_devs)
        rq = f"dev == {kernel_dev(dev.disk_major, dev.disk_minor)}"
        return ["perf", "record", "-q", "-a", "-D", "-1", "--control", f"fd:{ctl},{ack}",
                "-o", data, "-e", "block:block_bio_queue", "--filter", bio,
                "-e", "block:block_split", "--filter", bio,
                "-e", "block:block_rq_issue", "--filter", rq,
                "-e", "writeback:writeback_start",
                "--filter", f'name == "{dev.disk_major}:{dev.disk_minor}"',
                "-e", "sched:sched_process_fork"]

    def stop(self, *, probe_pids: Iterable[int] | None = None,
             load_pids: Iterable[int] | None = None) -> dict[str, Any]:
        if not self.used:
            raise RuntimeError("IOAttribution.stop() before start()")
        probe = tuple(self.probe_pids if probe_pids is None else probe_pids)
        load = tuple(self.load_pids if load_pids is None else load_pids)
        window = time.monotonic() - self._started
        known = {}
        for pid, ppid in self._parents.items():
            known.setdefault(ppid, set()).add(pid)
        assert self._dev is not None
        try:
            if self.used == "perf":
                result = attribute(self._stop_perf(), probe=probe, load=load,
                                   known_edges=known, sectors=self._dev.sectors)
                detail = PERF_DETAIL
            else:
                parents = {**self._parents, **counters.parent_map()}
                result = attribute_proc_io(self._before, proc_io(), parents, probe=probe,
                                           load=load)
                detail = PROC_DETAIL
        finally:
            self.close()
        return {"method": self.used, "detail": detail, "device": self._dev.name,
                "dev": self._dev.label, "window_s": window, "probe_pids": list(probe),
                "load_pids": list(load), **result}

    def _stop_perf(self) -> list[Event]:
        return parse_events(self._perf.script("comm,pid,tid,event,trace"))

    def close(self) -> None:
        """Stop perf and undo what start() set up, without a result (idempotent)."""
        self._perf.close()

    def __enter__(self) -> IOAttribution:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
