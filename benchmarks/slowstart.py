"""Cold starts measured on images served by slowdisk, and the machinery every such
benchmark shares (benchmarks/readahead_slowdisk.py, readahead_office.py, flat_delay.py):
each measurement on a fresh read-only mount after dropping the page cache, retaken when
another program dropped it meanwhile; replays before and with the start; slowdisk's own
seek count beside `layout check`'s prediction; the sequential lower bound.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from backburner import system
from backburner.base.quantities import fmt_factor, fmt_s, human_size
from backburner.readahead import background, record, replay
from backburner.readahead.pack import Pack
from backburner.slowdisk import device as slowdisk
from backburner.slowdisk.model import Disk
from backburner.slowdisk.profiles import get_profile

BB = [sys.executable, "-m", "backburner"]


@dataclass
class Workload:
    name: str
    argv: list[str]

    def shown(self) -> str:
        return shlex.join(self.argv)



# --- timing ----------------------------------------------------------------------------------
#
# Other programs on a shared machine drop the page cache too (/proc/vmstat counts every
# drop). A drop during a measurement makes the start read again what it had read: such a
# measurement is thrown away and taken again, after waiting for a quiet moment.

QUIET_S = 1.0
ATTEMPTS = 6


def drops() -> int:
    for line in Path("/proc/vmstat").read_text().splitlines():
        if line.startswith("drop_pagecache "):
            return int(line.split()[1])
    return 0


DAMON = Path("/sys/kernel/mm/damon/admin/kdamonds")


def proactive_reclaim() -> list[str]:
    """DAMON schemes running here that page out or reclaim memory on their own. They
    evict page cache that has not been used for a while, whatever the pressure: what a
    replay prefetched can go before the start uses it (seen on this VM: a start after a
    5-second DVD replay reading pages the replay had read)."""
    found = []
    for kd in sorted(DAMON.glob("[0-9]*")):
        try:
            if (kd / "state").read_text().strip() != "on":
                continue
            for scheme in sorted(kd.glob("contexts/*/schemes/[0-9]*")):
                action = (scheme / "action").read_text().strip()
                if action in ("pageout", "lru_deprio"):
                    age = (scheme / "access_pattern/age/min").read_text().strip()
                    found.append(f"kdamond {kd.name}: {action} of regions idle for >= {age} "
                                 "aggregation intervals")
        except OSError:
            continue
    try:  # the DAMON_RECLAIM module runs its own kdamond, not listed above
        if Path("/sys/module/damon_reclaim/parameters/enabled").read_text().strip() == "Y":
            found.append("the damon_reclaim module")
    except OSError:
        pass
    return found


@dataclass
class Interference:
    retried: int = 0
    tainted: int = 0  # measurements kept although someone dropped caches during them


INTERFERENCE = Interference()


def wait_quiet(limit_s: float = 120.0) -> None:
    deadline = time.monotonic() + limit_s
    last, since = drops(), time.monotonic()
    while time.monotonic() - since < QUIET_S and time.monotonic() < deadline:
        time.sleep(0.2)
        now = drops()
        if now != last:
            last, since = now, time.monotonic()


def clean(measure: Callable[[], float]) -> Callable[[], float]:
    """`measure` (which drops the cache first, once) without a foreign drop during it."""

    def run_clean() -> float:
        value = 0.0
        for _ in range(ATTEMPTS):
            wait_quiet()
            before = drops()
            value = measure()
            if drops() - before <= 1:  # our own drop only
                return value
            INTERFERENCE.retried += 1
        INTERFERENCE.tainted += 1
        return value

    return run_clean


def run(w: Workload) -> float:
    t0 = time.monotonic()
    subprocess.run(w.argv, check=True, stdout=subprocess.DEVNULL, cwd="/")
    return time.monotonic() - t0


@dataclass
class Bed:
    """A device holding one image, mounted afresh for every measurement: drop_caches
    leaves much of a mounted filesystem's metadata cached (superblock, bitmaps, blocks in
    use), so only a new mount makes the next start as cold as the first."""

    device: str
    mnt: str
    stats: str | None = None  # a slowdisk's stats.json: its own counters

    def seeks(self) -> int:
        assert self.stats is not None
        return int(json.loads(Path(self.stats).read_text())["seeks"])

    @contextmanager
    def fresh(self) -> Iterator[None]:
        with system.Transaction("bench-mount") as tx:
            tx.apply(system.Mount(self.device, self.mnt, "ext4", "ro"))
            system.drop_caches()
            yield


def cold(w: Workload, bed: Bed) -> float:
    with bed.fresh():
        return run(w)


def cold_counted(w: Workload, bed: Bed, seeks: list[int]) -> float:
    """One clean cold start; the slowdisk's seeks during it appended to `seeks` (those of
    the measurement kept, when `clean` retakes one)."""
    last: list[int] = []

    def measure() -> float:
        with bed.fresh():
            before = bed.seeks()
            t = run(w)
            last[:] = [bed.seeks() - before]
            return t

    t = clean(measure)()
    seeks += last
    return t


def replay_then(w: Workload, pack: str, bed: Bed) -> tuple[float, float]:
    both: list[float] = []

    def measure() -> float:
        with bed.fresh():
            t0 = time.monotonic()
            subprocess.run([*BB, "readahead", "replay", "--wait", pack], check=True,
                           stdout=subprocess.DEVNULL)
            both[:] = [time.monotonic() - t0, run(w)]
        return 0.0

    clean(measure)()
    return both[0], both[1]


def replay_with(w: Workload, pack: str, bed: Bed) -> float:
    """The start with a background replay launched together (as at boot)."""
    with bed.fresh():
        child = background.start_background(pack, replay.ReplayOptions(deadline_s=120))
        try:
            return run(w)
        finally:
            child.wait(130)


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def trials(n: int, f: Callable[[], float]) -> list[float]:
    return [f() for _ in range(n)]


# --- mounting --------------------------------------------------------------------------------


def fast_bed(tx: system.Transaction, image: str, mnt: str, scheduler: str = "none") -> Bed:
    """The SSD-like device: a plain loop device over the image, rotational 0, with the
    scheduler an NVMe disk has by default (`none`: IO classes are not honoured) unless
    told otherwise."""
    loop = tx.apply(system.LoopDevice(image, read_only=True))
    queue = f"/sys/block/{os.path.basename(loop)}/queue"
    tx.apply(system.SysfsValue(f"{queue}/rotational", "0"))
    tx.apply(system.SysfsValue(f"{queue}/scheduler", scheduler))
    return Bed(loop, mnt)


def slow_bed(tx: system.Transaction, image: str, mnt: str, profile: str) -> Bed:
    disk = slowdisk.attach(slowdisk.CreateOptions(profile, image, read_only=True), tx)
    return Bed(disk.device, mnt, disk.stats_path)


def record_pack(w: Workload, out: str, bed: Bed) -> Pack:
    with bed.fresh():
        res, outcome = record.record_command(
            w.argv, record.RecordOptions(out, mounts=(bed.mnt,), drop_caches=True))
    assert outcome.ok, outcome.describe()
    return res.pack



@dataclass
class Figures:
    lines: list[str] = field(default_factory=list)

    def add(self, text: str) -> None:
        print(text, flush=True)
        self.lines.append(text)




@dataclass
class Built:
    """Images of one tree (the kind "ordinary" first, then the layouts) and the packs
    recorded on each, keyed "KIND-WORKLOAD"."""

    images: dict[str, str]
    packs: dict[str, Pack]
    paths: dict[str, str]
    size: int
    mnt: str
    predicted: dict[str, int] = field(default_factory=dict)  # cold-start seeks, per pack
    region_at: dict[str, int] = field(default_factory=dict)  # where a kind's hot data starts


@dataclass
class Cell:
    colds: list[float]
    pairs: list[tuple[float, float]]  # (replay --wait, then the start)
    withs: list[float]  # the start with a background replay launched together
    seeks: list[int]

    @property
    def cold(self) -> float:
        return median(self.colds)

    @property
    def then(self) -> float:
        return median([a + b for a, b in self.pairs])

    @property
    def best(self) -> float:
        """The better of a replay before the start and one launched with it."""
        return min(self.then, median(self.withs))


def bound(b: Built, kind: str, workload: str, profile: str) -> tuple[float, str]:
    """The pack's bytes in one pass at the rate where the image puts them, plus one
    full-stroke seek: no start can be faster."""
    p = get_profile(profile)
    rate = Disk(p, b.size).rate_at(b.region_at.get(kind, 0))
    nbytes = b.packs[f"ordinary-{workload}"].bytes
    return (nbytes / rate + p.full_stroke_s,
            f"{human_size(nbytes)} at {rate / 1e6:.1f} MB/s + {fmt_s(p.full_stroke_s)} s")


def slow_part(out: Figures, profile: str, b: Built, wls: list[Workload], n: int,
              device_setup: Callable[[system.Transaction, str], None] | None = None) -> None:
    """Every image of `b` on a slowdisk of `profile`: each workload's cold start, with a
    replay before it and with one launched together; a row per workload and image.
    `device_setup` is given each slowdisk's device first (say, to set its read-ahead)."""
    p = get_profile(profile)
    out.add(f"\n## {profile} ({p.description}), {n} trial(s), medians\n")
    out.add("| workload | image | cold start | replay, then start | start with replay "
            "| ordinary / this (alone) | ordinary / this (with replay) | this / bound "
            "(alone) | this / bound (with replay) | lower bound | seeks counted "
            "(`layout check`) |")
    out.add("|---|---|---|---|---|---|---|---|---|---|---|")
    got: dict[str, Cell] = {}
    for kind, image in b.images.items():
        with system.Transaction("bench-readahead") as tx:
            bed = slow_bed(tx, image, b.mnt, profile)
            if device_setup is not None:
                device_setup(tx, bed.device)
            for w in wls:
                key = f"{kind}-{w.name}"
                seen: list[int] = []
                colds = trials(n, lambda w=w, bed=bed, seen=seen: cold_counted(w, bed, seen))
                pairs = [replay_then(w, b.paths[key], bed) for _ in range(n)]
                withs = trials(n, clean(lambda w=w, key=key, bed=bed:
                                        replay_with(w, b.paths[key], bed)))
                got[key] = Cell(colds, pairs, withs, seen)
    for w in wls:
        base = got[f"ordinary-{w.name}"]
        for kind in b.images:
            key = f"{kind}-{w.name}"
            c = got[key]
            low, how = bound(b, kind, w.name, profile)
            a, s = median([x for x, _ in c.pairs]), median([y for _, y in c.pairs])
            out.add(f"| {w.name} | {kind} | {fmt_s(c.cold)} s | {fmt_s(a)} + {fmt_s(s)} = "
                    f"{fmt_s(c.then)} s | {fmt_s(median(c.withs))} s | "
                    f"{fmt_factor(base.cold / c.cold)}× | {fmt_factor(base.cold / c.best)}× | "
                    f"{fmt_factor(c.cold / low)}× | {fmt_factor(c.best / low)}× | "
                    f"{fmt_s(low)} s ({how}) | {_ints(c.seeks)} ({b.predicted.get(key, '?')}) |")
    if n > 1:  # every trial, so the medians' spread shows
        for key, c in got.items():
            kind, name = key.rsplit("-", 1)
            low, _ = bound(b, kind, name, profile)
            out.add(f"- {key}, every trial: cold {_all(c.colds)}; replay then start "
                    f"{_all([x + y for x, y in c.pairs])}; with replay {_all(c.withs)}; the "
                    f"slowest with replay is {fmt_factor(max(c.withs) / low)}× the bound")


def _ints(xs: list[int]) -> str:
    return " / ".join(str(x) for x in xs)


def _all(xs: list[float]) -> str:
    return " / ".join(fmt_s(x) for x in xs) + " s"


def predict(out: Figures, b: Built) -> None:
    """`layout check` of each pack on the image it was recorded on (metadata included)."""
    from backburner.readahead import layout

    for key, pack in b.packs.items():
        kind = key.rsplit("-", 1)[0]
        c = layout.check(b.images[kind], pack, b.mnt)
        out.add(f"  - `layout check --pack {key}.pack {os.path.basename(b.images[kind])}`: "
                f"{layout.describe_check(c)}")
        b.predicted[key] = c.meta.seeks if c.meta else c.seeks_cold


@contextmanager
def scratch(prefix: str, keep: str | None, where: str | None = None) -> Iterator[str]:
    """A new work directory, removed at the end, or kept: renamed to `keep`."""
    work = tempfile.mkdtemp(prefix=prefix, dir=where)
    try:
        yield work
    finally:
        if keep:
            os.rename(work, keep)
        else:
            shutil.rmtree(work, ignore_errors=True)


def note_reclaim(out: Figures) -> None:
    for what in proactive_reclaim():
        out.add(f"- note: DAMON proactive reclaim runs on this machine ({what}): it may "
                "evict pages a replay prefetched before the start uses them, so replay "
                "figures can vary between trials")
