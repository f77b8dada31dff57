"""Tracer output -> per-thread syscall counts. Pure: text in, data out.

strace: one file per thread (`strace -ff -T`), one line per syscall ending in
`= RET [ERRNO (text)] <seconds>`; clone/clone3/fork/vfork lines tell which new task is a
thread of the caller (CLONE_THREAD) and which a new process, so threads can be grouped into
processes without asking the kernel afterwards (they are gone by then).

perf: `perf trace -s --errno-summary` prints one table per thread (comm and TID) with calls,
errors, total msec and the errno breakdown; `perf script --show-task-events` prints the
PERF_RECORD_FORK(pid:tid) records that say which process each thread belonged to.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

_ERRNO = re.compile(r"^(?:-1|\?) (E[A-Z0-9_]+) ")
_TIME = re.compile(r"<(\d+\.\d+)>\s*$")
_NAME = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\(")
_RESUMED = re.compile(r"^<\.\.\. ([A-Za-z_][A-Za-z0-9_]*) resumed>")
_EXEC_PATH = re.compile(r'^execve(?:at)?\((?:[A-Z_]+, |\d+, )?"((?:[^"\\]|\\.)*)"')
_CLONE = frozenset({"clone", "clone3", "fork", "vfork"})
_EXECS = frozenset({"execve", "execveat"})


@dataclass
class SyscallStats:
    calls: int = 0
    errors: int = 0
    time_s: float = 0.0
    errnos: dict[str, int] = field(default_factory=dict)

    def add(self, other: SyscallStats) -> None:
        self.calls += other.calls
        self.errors += other.errors
        self.time_s += other.time_s
        for name, n in other.errnos.items():
            self.errnos[name] = self.errnos.get(name, 0) + n


@dataclass
class TracedThread:
    """One thread as a tracer saw it. `pid` is its process (thread group) when known."""

    tid: int
    pid: int | None = None
    comm: str = ""
    syscalls: dict[str, SyscallStats] = field(default_factory=dict)
    #: (new task id, is it a thread of this one's process) for each successful clone
    spawned: list[tuple[int, bool]] = field(default_factory=list)


def _record(syscalls: dict[str, SyscallStats], name: str, ret: str) -> None:
    stats = syscalls.setdefault(name, SyscallStats())
    stats.calls += 1
    m = _TIME.search(ret)
    if m:
        stats.time_s += float(m.group(1))
    e = _ERRNO.match(ret)
    if e:
        stats.errors += 1
        stats.errnos[e.group(1)] = stats.errnos.get(e.group(1), 0) + 1


def _clone_child(name: str, head: str, ret: str) -> tuple[int, bool] | None:
    m = re.match(r"^(\d+)\b", ret)
    if not m:
        return None
    thread = name in ("clone", "clone3") and "CLONE_THREAD" in head
    return int(m.group(1)), thread


def parse_strace(tid: int, lines: Iterable[str], *, after_exec: bool = False) -> TracedThread:
    """One `strace -ff -T` output file (the thread `tid`).

    after_exec: count nothing before the first successful execve (the launcher's
    fork-to-exec tail in the job's first process). Unfinished/resumed pairs are counted
    once, at the resume; signal and exit lines (`---`, `+++`) are skipped.
    """
    out = TracedThread(tid)
    counting = not after_exec
    for raw in lines:
        line = raw.rstrip("\n")
        if not line or line.startswith(("---", "+++")) or line.endswith("<unfinished ...>"):
            continue
        m = _RESUMED.match(line) or _NAME.match(line)
        if not m:
            continue
        name = m.group(1)
        head, sep, ret = line.rpartition(" = ")
        if not sep:
            continue
        ret = ret.strip()
        exec_ok = name in _EXECS and ret.startswith("0")
        if not counting:
            if not exec_ok:
                continue
            counting = True
        if exec_ok:
            path = _EXEC_PATH.match(head)
            if path:  # the kernel's comm: the file name, 15 bytes at most
                out.comm = path.group(1).rsplit("/", 1)[-1][:15]
        _record(out.syscalls, name, ret)
        if name in _CLONE:
            child = _clone_child(name, head, ret)
            if child:
                out.spawned.append(child)
    return out


def assign_processes(threads: dict[int, TracedThread], roots: Iterable[int]) -> None:
    """Fill `pid` of every thread from the clone edges: a CLONE_THREAD child shares its
    creator's process; anything else (and each root) starts a process of its own. A task
    that never exec'd gets its creator's command name (what the kernel copies at clone)."""
    parent: dict[int, tuple[int, bool]] = {}
    for t in threads.values():
        for child, is_thread in t.spawned:
            parent[child] = (t.tid, is_thread)

    def process_of(tid: int, depth: int = 0) -> int:
        link = parent.get(tid)
        if link is None or not link[1] or depth > 10_000:
            return tid
        return process_of(link[0], depth + 1)

    for root in roots:
        if root in threads:
            threads[root].pid = root
    def comm_of(tid: int, depth: int = 0) -> str:
        t = threads.get(tid)
        if t is not None and t.comm:
            return t.comm
        link = parent.get(tid)
        return "" if link is None or depth > 10_000 else comm_of(link[0], depth + 1)

    for t in threads.values():
        if t.pid is None:
            t.pid = process_of(t.tid)
        if not t.comm:
            t.comm = comm_of(t.tid)


_PERF_THREAD = re.compile(r"^ (?P<comm>.*) \((?P<tid>\d+)\), (?P<events>\d+) events")
_PERF_ROW = re.compile(r"^\s+(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s+(?P<calls>\d+)\s+(?P<errors>\d+)"
                       r"\s+(?P<total>\d+(?:\.\d+)?)\s")
_PERF_ERRNO = re.compile(r"^\s+(?P<name>E[A-Z0-9_]+|\d+): (?P<n>\d+)\s*$")


def parse_perf_summary(text: str) -> dict[int, TracedThread]:
    """`perf trace -s --errno-summary` -> {tid: TracedThread} (times from msec to s)."""
    out: dict[int, TracedThread] = {}
    current: TracedThread | None = None
    last: SyscallStats | None = None
    for line in text.splitlines():
        m = _PERF_THREAD.match(line)
        if m:
            tid = int(m.group("tid"))
            current = out.setdefault(tid, TracedThread(tid, comm=m.group("comm").strip()))
            last = None
            continue
        if current is None:
            continue
        e = _PERF_ERRNO.match(line)
        if e and last is not None:
            last.errnos[e.group("name")] = last.errnos.get(e.group("name"), 0) + int(e.group("n"))
            continue
        r = _PERF_ROW.match(line)
        if r:
            last = current.syscalls.setdefault(r.group("name"), SyscallStats())
            last.calls += int(r.group("calls"))
            last.errors += int(r.group("errors"))
            last.time_s += float(r.group("total")) / 1e3
    return out


_FORK = re.compile(r"PERF_RECORD_FORK\((\d+):(\d+)\):\((\d+):(\d+)\)")
_COMM = re.compile(r"PERF_RECORD_COMM(?: exec)?: (.*):(\d+)/(\d+)\s*$")


@dataclass
class PerfTasks:
    process_of: dict[int, int] = field(default_factory=dict)  # tid -> pid
    comm: dict[int, str] = field(default_factory=dict)  # tid -> last comm
    parent: dict[int, int] = field(default_factory=dict)  # pid -> parent pid (new processes)


def parse_perf_tasks(text: str) -> PerfTasks:
    """`perf script --show-task-events` -> which process each thread was in, and comms."""
    out = PerfTasks()
    for line in text.splitlines():
        m = _FORK.search(line)
        if m:
            pid, tid, ppid, _ptid = (int(g) for g in m.groups())
            out.process_of[tid] = pid
            if pid == tid:
                out.parent[pid] = ppid
            continue
        c = _COMM.search(line)
        if c:
            out.comm[int(c.group(3))] = c.group(1)
            out.process_of.setdefault(int(c.group(3)), int(c.group(2)))
    return out


_LOST = re.compile(r"PERF_RECORD_LOST(?:_SAMPLES)? lost (\d+)")


def perf_lost_events(text: str) -> int:
    """The events perf says it lost (`perf script --show-lost-events` LOST records)."""
    return sum(int(m.group(1)) for m in _LOST.finditer(text))


def apply_perf_tasks(threads: dict[int, TracedThread], tasks: PerfTasks) -> None:
    """Give every summarised thread its process and its last comm."""
    for t in threads.values():
        t.pid = tasks.process_of.get(t.tid, t.tid)
        t.comm = tasks.comm.get(t.tid, t.comm)
