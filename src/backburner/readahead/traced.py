"""What a recorded start asked of the filesystem besides its files' bytes, and in which
order it did everything: the pack's lookups and steps (`record --lookups`).

Around the command: strace (`trace.lookups`) for the names it looked up, the inodes it
stat'd and the directories it listed; perf's page-cache tracepoint (`trace.pagecache`)
for the order in which its pages came in. Both run only while the command does; the
command's own process (strace's child) roots the tree whose files count, so neither
tracer's own reads are recorded. `lookups_of` and `steps_of` (pure but for the stat
that gives a lookup its identity) turn what they saw into the pack's terms.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, replace

from .. import system
from ..base.errors import UnavailableError
from ..trace import lookups as strace_lookups
from ..trace import pagecache
from .pack import LISTED, MISSED, STATTED, Entry, FileState, Lookup, Pack, Step

log = logging.getLogger(__name__)

_KINDS = {strace_lookups.LIST: LISTED, strace_lookups.STAT: STATTED,
          strace_lookups.MISS: MISSED}


@dataclass
class Seen:
    """What the tracers saw: calls (times on CLOCK_MONOTONIC) and pages, and the
    command's own process (None if strace never started it)."""

    calls: list[strace_lookups.Call] = field(default_factory=list)
    pages: list[pagecache.PageIn] = field(default_factory=list)
    first_pid: int | None = None
    order: str = ""  # why the order of reads is missing ("" when it is there)


class Tracing:
    """strace and the page tracepoint around one command, their output in a private
    directory of `tx`."""

    def __init__(self, tx: system.Transaction, devs: Sequence[int]) -> None:
        why = strace_lookups.missing()
        if why:
            raise UnavailableError(f"recording lookups needs strace: {why}",
                                   "apt-get install strace, or record without --lookups")
        work = str(tx.apply(system.PrivateDir(str(system.work_root()), "lookups-")))
        self.output = os.path.join(work, "strace.out")
        self.pages: pagecache.PageOrder | None = None
        self.order = pagecache.missing() or ""
        if not self.order:
            self.pages = pagecache.PageOrder(devs)
            try:
                self.pages.start()
            except UnavailableError as err:
                log.debug("no page order: %s", err)
                self.order, self.pages = err.message, None

    def argv(self, argv: Sequence[str]) -> list[str]:
        return strace_lookups.command(list(argv), self.output)

    def finish(self, cwd: bytes) -> Seen:
        """Stop the tracepoint; what both saw (strace has ended with the command)."""
        seen = Seen(order=self.order)
        if self.pages is not None:
            try:
                seen.pages = self.pages.stop()
            except UnavailableError as err:
                seen.order = err.message
        offset = time.time() - time.monotonic()  # strace's clock is the wall clock
        try:
            with open(self.output, errors="replace") as f:
                parsed = strace_lookups.parse(f, cwd)
        except FileNotFoundError:
            return seen
        seen.first_pid = parsed.first_pid
        seen.calls = [strace_lookups.Call(c.t - offset, c.pid, c.kind, c.path)
                      for c in parsed.calls]
        return seen

    def close(self) -> None:
        if self.pages is not None:
            self.pages.close()


def _state(path: bytes, fsids: dict[int, int]) -> FileState | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if st.st_dev not in fsids:
        try:
            fsids[st.st_dev] = int(os.statvfs(path).f_fsid) & ((1 << 64) - 1)
        except OSError:
            fsids[st.st_dev] = 0
    return FileState(st.st_dev, fsids[st.st_dev], st.st_ino, st.st_size, st.st_mtime_ns)


def _searched(path: bytes) -> bytes | None:
    """The deepest directory on `path` that exists: the one a failed lookup searched."""
    cur = os.path.dirname(path)
    while cur:
        if os.path.isdir(cur) and not os.path.islink(cur):
            return cur
        if cur == b"/":
            return None
        cur = os.path.dirname(cur)
    return None


def lookups_of(calls: Sequence[strace_lookups.Call], keep: Callable[[int], bool],
               devs: Collection[int]) -> tuple[list[Lookup], list[float]]:
    """The start's lookups on the watched filesystems (`devs`), each (kind, path) once,
    in the order first made, with the time of each. A file it opened is the pack's
    already; a directory it opened counts as looked at."""
    fsids: dict[int, int] = {}
    out: list[Lookup] = []
    times: list[float] = []
    seen: set[tuple[int, bytes]] = set()
    for c in calls:
        if not keep(c.pid):
            continue
        kind = _KINDS.get(c.kind)
        if c.kind == strace_lookups.OPEN:
            if not os.path.isdir(c.path) or os.path.islink(c.path):
                continue
            kind = STATTED
        if kind is None or (kind, c.path) in seen:
            continue
        where = _searched(c.path) if kind == MISSED else c.path
        state = _state(where, fsids) if where is not None else None
        if state is None or state.dev not in devs or (kind == MISSED and os.path.lexists(
                c.path)):
            continue
        seen.add((kind, c.path))
        out.append(Lookup(kind, c.path, state))
        times.append(c.t)
    return out, times


def steps_of(entries: Sequence[Entry], pages: Sequence[pagecache.PageIn],
             keep: Callable[[int], bool], lookup_times: Sequence[float]) -> list[Step]:
    """Everything in order (pure): each run of pages an entry first brought in (pages
    added again after an eviction do not count), contiguous pages added one after the
    other joined into one step, and each lookup at its time; with the gap since the
    step before (microseconds)."""
    index = {(e.state.dev, 0 if e.device else e.state.inode): i for i, e in enumerate(entries)}
    done: dict[int, set[int]] = {}
    timed: list[tuple[float, int, int, int]] = []  # (t, what, first, pages)
    for p in pages:
        if not keep(p.pid):
            continue
        i = index.get((p.dev, 0 if p.device else p.ino))
        if i is None:
            continue
        got = done.setdefault(i, set())
        new = [x for x in range(p.index, p.index + p.pages) if x not in got]
        if not new:
            continue
        got.update(new)
        last = timed[-1] if timed else None
        if last is not None and last[1] == i and last[2] + last[3] == new[0]:
            timed[-1] = (last[0], i, last[2], last[3] + len(new))
            continue
        timed.append((p.t, i, new[0], len(new)))
    timed += [(t, -k - 1, 0, 0) for k, t in enumerate(lookup_times)]
    timed.sort(key=lambda x: x[0])
    out: list[Step] = []
    prev = timed[0][0] if timed else 0.0
    for t, what, first, n in timed:
        out.append(Step(what, first, n, max(0, round((t - prev) * 1e6))))
        prev = t
    return out


def read_ahead_kb(paths: Sequence[str]) -> int:
    """The read-ahead the recording ran with (the first watched disk's)."""
    for path in paths:
        try:
            with open(path) as f:
                return int(f.read().strip())
        except (OSError, ValueError):
            continue
    return 0


def attach(pack: Pack, seen: Seen, keep: Callable[[int], bool], devs: Collection[int],
           read_ahead: int, wall_s: float, cpu_s: float) -> Pack:
    """The pack with the start's lookups and steps (format version 2)."""
    found, times = lookups_of(seen.calls, keep, devs)
    steps = steps_of(pack.entries, seen.pages, keep, times)
    return replace(pack, lookups=tuple(found), steps=tuple(steps), read_ahead_kb=read_ahead,
                   wall_ns=round(wall_s * 1e9), cpu_ns=round(cpu_s * 1e9))


__all__ = ["Seen", "Tracing", "attach", "lookups_of", "read_ahead_kb", "steps_of"]
