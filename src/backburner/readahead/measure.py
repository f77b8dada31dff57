"""`readahead measure`: does the pack make its start faster? The start timed cold with and
without a replay of it, in alternating rounds, and what the replay read that the start
then did not use; the verdict written beside the pack (`verdict`).

Each round drops the page cache (as `record --drop-caches` does) and runs the command
in the foreground, once alone and once with the replay: launched with it in the
background (`mode` "with", as the boot unit does) or run to its end first ("before",
its time counted). While the start runs after a replay, perf's page-cache tracepoints
(`trace.pagecache.USE_EVENTS`) say which pages it read or mapped; the replayed bytes it
touched none of are its waste. The verdict is the ratio of the medians with its 95%
bootstrap interval: "slower" when the interval lies above 1, "faster" below, else "no
difference". A replay skips a pack measured slower (`verdict.replay_unless_slower`).
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .. import spawn, system
from ..base.errors import UsageError
from ..files import outfile
from ..trace import pagecache
from . import background, freshness, packfile, replay, verdict
from .pack import OK, Pack
from .ranges import clip
from .verdict import FASTER, SAME, SLOWER, Verdict

log = logging.getLogger(__name__)

MODES = ("with", "before")
MIN_ROUNDS = 3


@dataclass(frozen=True)
class MeasureOptions:
    rounds: int = 5
    mode: str = "with"
    deadline_s: float = 120.0  # each replay's


def _replayed_pages(pack: Pack) -> dict[tuple[int, int], set[int]]:
    """The pages of the pack's files a replay reads now (those still as recorded)."""
    out: dict[tuple[int, int], set[int]] = {}
    page = pack.page_size
    for entry, status, now in freshness.check_files(pack):
        if status != OK or now is None:
            continue
        pages = out.setdefault((now.dev, now.inode), set())
        for off, ln in clip(entry.ranges, now.size):
            pages.update(range(off // page, -(-(off + ln) // page)))
    return out


def _unused(replayed: dict[tuple[int, int], set[int]], uses: Sequence[pagecache.PageUse],
            keep: Callable[[int], bool]) -> int:
    """Pages of `replayed` that no kept process read or mapped."""
    used: dict[tuple[int, int], set[int]] = {}
    for u in uses:
        if keep(u.pid) and (u.dev, u.ino) in replayed:
            used.setdefault((u.dev, u.ino), set()).update(range(u.first, u.last + 1))
    return sum(len(pages - used.get(key, set())) for key, pages in replayed.items())


def _round(pack_path: str, pack: Pack, argv: Sequence[str], opts: MeasureOptions,
           devs: Sequence[int], replaying: bool) -> tuple[float, int, int]:
    """One cold start, with a replay or without: its time, and the bytes the replay read
    and those the start left unused (0, 0 without a replay, or where the tracepoints
    cannot be recorded). The tracepoints run in both kinds of round, so that what perf
    costs the start costs it both ways."""
    system.drop_caches()
    replayed = _replayed_pages(pack) if replaying else {}
    tracer = pagecache.PageOrder(devs, uses=True) if pagecache.missing() is None else None
    ropts = replay.ReplayOptions(deadline_s=opts.deadline_s)
    child = None
    before = 0.0
    if tracer is not None:
        tracer.start()
    try:
        if replaying and opts.mode == "before":
            before = replay.replay(pack, ropts).seconds
        elif replaying:
            child = background.start_background(pack_path, ropts)
        outcome = spawn.run_foreground(argv)
    finally:
        uses: list[pagecache.PageUse] = []
        if tracer is not None:
            tracer.stop()
            uses = tracer.uses
        if child is not None:
            child.wait(opts.deadline_s + 10)
    took = outcome.wall_s + before
    if tracer is None or not replaying:
        return took, 0, 0
    own = {os.getpid(), child.pid if child is not None else -1}
    total = sum(len(p) for p in replayed.values()) * pack.page_size
    unused = _unused(replayed, uses, lambda pid: pid not in own) * pack.page_size
    return took, total, unused


def measure(pack_path: str, argv: Sequence[str], opts: MeasureOptions = MeasureOptions()
            ) -> Verdict:
    """Time the start `opts.rounds` times each way (alternating, the order of each pair
    alternating too), write the verdict beside the pack and return it."""
    if opts.mode not in MODES:
        raise UsageError(f"unknown mode {opts.mode!r}", "use with or before")
    if opts.rounds < MIN_ROUNDS:
        raise UsageError(f"--rounds must be at least {MIN_ROUNDS}")
    if not argv:
        raise UsageError("no command to measure", "put it after --")
    system.require_root("measuring a start cold (dropping the page cache)")
    pack = packfile.load(pack_path)
    outfile.check_new(verdict.path_of(pack_path), force=True)
    devs = sorted({e.state.dev for e in pack.entries if not e.device})
    without: list[float] = []
    with_: list[float] = []
    replayed: list[int] = []
    unused: list[int] = []
    for n in range(opts.rounds):
        for which in (("without", "with") if n % 2 == 0 else ("with", "without")):
            took, total, left = _round(pack_path, pack, argv, opts, devs, which == "with")
            if which == "without":
                without.append(took)
                continue
            with_.append(took)
            if total:
                replayed.append(total)
                unused.append(left)
    from .. import stats  # here: a replay, which only reads verdicts, loads no numpy

    r = stats.ratio_of_medians(with_, without)
    call = SLOWER if r.lo > 1.0 else FASTER if r.hi < 1.0 else SAME
    notes = () if replayed else (f"no waste measured: {pagecache.missing() or 'no pages'}",)
    v = Verdict(time.time_ns(), shlex.join(argv), opts.mode, tuple(without), tuple(with_),
                r.ratio, r.lo, r.hi, call, _median_int(replayed), _median_int(unused), notes)
    outfile.write_bytes(verdict.path_of(pack_path),
                        (json.dumps(v.as_dict(), indent=1) + "\n").encode(), outfile.PRIVATE)
    return v


def _median_int(xs: list[int]) -> int:
    s = sorted(xs)
    return s[len(s) // 2] if s else 0


__all__ = ["MODES", "MeasureOptions", "measure"]
