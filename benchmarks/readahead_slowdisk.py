#!/usr/bin/env python3
"""Cold starts of many-small-files programs on simulated slow media: ordinary image vs
replay vs layout-ordered image vs both, against the sequential lower bound.

Workloads (one tree, on one ext4 image):
- ``python``: Debian's /usr/bin/python3.11 with its standard library and site packages
  taken from the image (PYTHONHOME on the image), importing email, http, json, asyncio,
  logging, argparse, decimal, xml.dom, rich, pygments, dateutil, markdown_it and
  fontTools: about 340 .py/.pyc files and C extensions;
- ``data``: ``cat`` of 300 files (2-40 KiB) of a data directory of 3000, in a seeded
  random order: the issue's "program that reads a few hundred tiny files".
The tree also holds numpy, matplotlib, pip, pytest and PIL (cold: never read), so the hot
files are spread out as an installer would leave them.

Images: ``ordinary`` is ``mke2fs -T default -d TREE`` just big enough (the data spans the
whole simulated stroke, like a full disc); ``layout`` is ``backburner layout build-ext4``
of the same tree, same size, with both workloads' packs (recorded on the ordinary image)
first. Each image is served read-only by a slowdisk (``dvd`` and ``hdd-5400``, the library
inside a transaction, as ``backburner slowdisk create --read-only`` does) and mounted
read-only at the same path, so packs recorded through a fast loop device match by
filesystem id.

For each profile, image and workload, after dropping the page cache:
  (a)/(c) the cold start alone,
  (b)/(d) ``backburner readahead replay --wait PACK``, then the start (both timed), and
          the start with ``backburner readahead replay PACK`` (background) launched with it,
and the lower bound: the pack's bytes in one sequential pass at the profile's transfer
rate where the layout puts them, plus one full-stroke seek. Each cold start's seeks as the
slowdisk counts them are printed beside `layout check`'s prediction for that start (the
pack recorded on that image, metadata included). Ratios: (a)/replay is against
the better of (b) and (b'), (a)/both against the better of (d) and (d').

On an SSD-like device (a plain loop device, rotational 0): the cold start alone vs with a
background replay launched with it (target: at most 5% slower), and the record overhead:
the program's own wall time under ``readahead record`` vs without (target: at most 10%).

Usage (root): .venv/bin/python benchmarks/readahead_slowdisk.py [--profiles dvd,hdd-5400]
              [--trials N] [--ssd-trials N (0: none)] [--ssd-scheduler S] [--keep DIR]
Takes about 12 minutes (longer when other programs keep dropping the page cache: such
measurements are retaken). Prints every figure with the command that produced it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
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

from backburner import interrupts, spawn, stats, system
from backburner.readahead import ext4image, layout, packfile, record, replay
from backburner.readahead.pack import Pack
from backburner.slowdisk import device as slowdisk
from backburner.slowdisk.model import Disk
from backburner.slowdisk.profiles import get_profile
from backburner.units import MiB, fmt_factor, fmt_s, human_size

PYTHON = "/usr/bin/python3.11"
STDLIB = "/usr/lib/python3.11"
SITE = Path(sys.prefix, "lib", "python3.11", "site-packages")
IMPORTS = ("email.parser, http.client, json, asyncio, logging, argparse, decimal, xml.dom.minidom, "
           "rich.console, rich.table, rich.progress, pygments.lexers.python, "
           "pygments.formatters, dateutil.parser, markdown_it, fontTools.ttLib")
#: Package trees copied from this venv: the imported ones, then others that stay cold.
PACKAGES = ("rich", "pygments", "dateutil", "markdown_it", "mdurl", "fontTools", "numpy",
            "numpy.libs", "matplotlib", "pip", "_pytest", "PIL")
DATA_FILES, DATA_READ = 3000, 300
BB = [sys.executable, "-m", "backburner"]


@dataclass
class Workload:
    name: str
    argv: list[str]

    def shown(self) -> str:
        return shlex.join(self.argv)


def workloads(mnt: str, work: str) -> list[Workload]:
    py = Workload("python", ["env", f"PYTHONHOME={mnt}/py", PYTHON, "-S", "-B", "-c",
                             f"import sys; sys.path.insert(0, '{mnt}/site'); import {IMPORTS}"])
    names = [f"{mnt}/data/{n}" for n in _data_names()]
    chosen = random.Random(9).sample(names, DATA_READ)
    listfile = os.path.join(work, "data.list")
    Path(listfile).write_text("\0".join(chosen) + "\0")
    data = Workload("data", ["sh", "-c", f"xargs -0 cat < {listfile} > /dev/null"])
    return [py, data]


def _data_names() -> list[str]:
    return [f"{i * 7919 % 10007:05d}.dat" for i in range(DATA_FILES)]


# --- the tree and the images ---------------------------------------------------------------


def build_tree(src: Path) -> None:
    (src / "py" / "lib").mkdir(parents=True)
    shutil.copytree(STDLIB, src / "py" / "lib" / "python3.11", symlinks=True,
                    ignore=shutil.ignore_patterns("dist-packages", "site-packages"))
    for pkg in PACKAGES:
        shutil.copytree(SITE / pkg, src / "site" / pkg, symlinks=True)
    rng = random.Random(1)
    data = src / "data"
    data.mkdir()
    for name in _data_names():
        (data / name).write_bytes(rng.randbytes(rng.randint(2, 40) * 1024))


def tree_bytes(src: Path) -> int:
    total = 0
    for d, _, files in os.walk(src):
        for f in files:
            total += -(-os.lstat(os.path.join(d, f)).st_size // 4096) * 4096 + 4096
    return total


def ordinary_image(src: Path, image: str, size: int) -> None:
    with open(image, "xb") as f:
        f.truncate(size)
    subprocess.run(["mke2fs", "-q", "-F", "-t", "ext4", "-T", "default", "-E", "nodiscard",
                    "-d", str(src), image], check=True, capture_output=True)


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
        child = replay.start_background(pack, replay.ReplayOptions(deadline_s=120))
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


# --- the parts -------------------------------------------------------------------------------


@dataclass
class Figures:
    lines: list[str] = field(default_factory=list)

    def add(self, text: str) -> None:
        print(text, flush=True)
        self.lines.append(text)


def ssd_part(out: Figures, images: dict[str, str], mnt: str, work: str, packs: dict[str, str],
             n: int, scheduler: str = "none") -> None:
    out.add(f"\n## SSD-like device (plain loop device, rotational 0, scheduler {scheduler}), "
            f"{n} trials, medians\n")
    out.add("| workload | cold start | + background replay | change [95% CI] | unrecorded "
            "| recorded | record overhead [95% CI] |")
    out.add("|---|---|---|---|---|---|---|")
    with system.Transaction("bench-readahead") as tx:
        bed = fast_bed(tx, images["ordinary"], mnt, scheduler)
        for w in workloads(mnt, work):
            pack = packs[f"ordinary-{w.name}"]
            got = ssd_trials(w, pack, bed, work, n)
            alone, with_replay = got["alone"], got["with replay"]
            plain, recorded = got["unrecorded"], got["recorded"]
            r1 = stats.ratio_of_medians(with_replay, alone)
            r2 = stats.ratio_of_medians(recorded, plain)
            out.add(f"| {w.name} | {fmt_s(median(alone))} s | {fmt_s(median(with_replay))} s "
                    f"| {_pct(r1)} | {fmt_s(median(plain))} s | {fmt_s(median(recorded))} s "
                    f"| {_pct(r2)} |")


def _pct(r: stats.RatioCI) -> str:
    """A ratio of medians as a change in percent, with its 95% bootstrap interval."""
    return (f"{(r.ratio - 1) * 100:+.1f}% [{(r.lo - 1) * 100:+.1f}, "
            f"{(r.hi - 1) * 100:+.1f}]")


def ssd_trials(w: Workload, pack: str, bed: Bed, work: str, n: int) -> dict[str, list[float]]:
    """n of each, interleaved in a shuffled order, so drift hits all alike."""
    kinds: dict[str, Callable[[int], float]] = {
        "alone": lambda _i: cold(w, bed),
        "with replay": lambda _i: replay_with(w, pack, bed),
        "unrecorded": lambda _i: cold_spawn(w, bed),
        "recorded": lambda i: cold_recorded(w, os.path.join(work, f"overhead-{i}.pack"), bed),
    }
    got: dict[str, list[float]] = {k: [] for k in kinds}
    rng = random.Random(n)
    for i in range(n):
        order = list(kinds)
        rng.shuffle(order)
        for k in order:
            got[k].append(clean(lambda k=k, i=i: kinds[k](i))())
    return got


def cold_spawn(w: Workload, bed: Bed) -> float:
    """The program's own wall time (wait4), started the way record starts it."""
    with bed.fresh():
        return spawn.run_foreground(w.argv).wall_s


def cold_recorded(w: Workload, out: str, bed: Bed) -> float:
    with bed.fresh():
        _, outcome = record.record_command(w.argv, record.RecordOptions(out,
                                                                        mounts=(bed.mnt,)))
    return outcome.wall_s


def slow_part(out: Figures, profile: str, images: dict[str, str], mnt: str, work: str,
              packs: dict[str, Pack], paths: dict[str, str], n: int,
              predicted: dict[str, int]) -> None:
    p = get_profile(profile)
    size = os.path.getsize(images["ordinary"])
    rate = Disk(p, size).rate_at(0)  # where build-ext4 puts the hot files
    out.add(f"\n## {profile} ({p.description}), {n} trial(s), medians\n")
    out.add("| workload | (a) ordinary | (b) + replay, then start | (b') + replay with start "
            "| (c) layout | (d) layout + replay, then start | (d') layout + replay with start "
            "| lower bound | (a)/replay | (a)/(c) | (a)/both | (c)/bound | both/bound |")
    out.add("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    got: dict[str, dict[str, float]] = {}
    spread: dict[str, dict[str, tuple[list[float], list[float]]]] = {}
    counted: dict[str, list[int]] = {}
    for kind in ("ordinary", "layout"):
        with system.Transaction("bench-readahead") as tx:
            bed = slow_bed(tx, images[kind], mnt, profile)
            for w in workloads(mnt, work):
                g = got.setdefault(w.name, {})
                pack = paths[f"{kind}-{w.name}"]
                seen = counted.setdefault(f"{kind}-{w.name}", [])
                g[f"{kind}-cold"] = median(trials(n, lambda w=w, bed=bed, seen=seen:
                                                  cold_counted(w, bed, seen)))
                pairs = [replay_then(w, pack, bed) for _ in range(n)]
                g[f"{kind}-replay"] = median([a for a, _ in pairs])
                g[f"{kind}-then"] = median([b for _, b in pairs])
                withs = trials(n, clean(lambda w=w, pack=pack, bed=bed:
                                        replay_with(w, pack, bed)))
                g[f"{kind}-with"] = median(withs)
                spread.setdefault(w.name, {})[kind] = ([a + b for a, b in pairs], withs)
    for name, g in got.items():
        pack_bytes = packs[f"ordinary-{name}"].bytes
        bound = pack_bytes / rate + p.full_stroke_s
        b_total = g["ordinary-replay"] + g["ordinary-then"]
        d_total = g["layout-replay"] + g["layout-then"]
        out.add(f"| {name} | {fmt_s(g['ordinary-cold'])} s | {fmt_s(g['ordinary-replay'])} + "
                f"{fmt_s(g['ordinary-then'])} = {fmt_s(b_total)} s | "
                f"{fmt_s(g['ordinary-with'])} s | {fmt_s(g['layout-cold'])} s | "
                f"{fmt_s(g['layout-replay'])} + {fmt_s(g['layout-then'])} = {fmt_s(d_total)} s "
                f"| {fmt_s(g['layout-with'])} s | {fmt_s(bound)} s ({human_size(pack_bytes)} at "
                f"{rate / 1e6:.1f} MB/s + {fmt_s(p.full_stroke_s)} s) | "
                f"{fmt_factor(g['ordinary-cold'] / min(b_total, g['ordinary-with']))}× | "
                f"{fmt_factor(g['ordinary-cold'] / g['layout-cold'])}× | "
                f"{fmt_factor(g['ordinary-cold'] / min(d_total, g['layout-with']))}× | "
                f"{fmt_factor(g['layout-cold'] / bound)}× | "
                f"{fmt_factor(min(d_total, g['layout-with']) / bound)}× |")
    for key, seen in counted.items():
        out.add(f"- {key} cold start: {profile} slowdisk counted {_ints(seen)} seeks; "
                f"`layout check` predicted {predicted.get(key, '?')} (metadata included)")
    if n > 1:  # every trial of the replay cells, so the medians' spread shows
        for name, kinds in spread.items():
            bound = packs[f"ordinary-{name}"].bytes / rate + p.full_stroke_s
            then, withs = kinds["layout"]
            out.add(f"- {name}, every trial: (b) {_all(kinds['ordinary'][0])}, (b') "
                    f"{_all(kinds['ordinary'][1])}, (d) {_all(then)}, (d') {_all(withs)}; "
                    f"the slowest (d') is {fmt_factor(max(withs) / bound)}× the bound")


def _ints(xs: list[int]) -> str:
    return " / ".join(str(x) for x in xs)


def _all(xs: list[float]) -> str:
    return " / ".join(fmt_s(x) for x in xs) + " s"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profiles", default="dvd,hdd-5400")
    ap.add_argument("--trials", type=int, default=3, help="per slow cell (the model is "
                    "deterministic, the machine is not: a DVD start varies by 10-30%%)")
    ap.add_argument("--ssd-trials", type=int, default=15,
                    help="trials per SSD-like cell (0: no SSD-like part)")
    ap.add_argument("--ssd-scheduler", default="none",
                    help="the SSD-like device's IO scheduler (none: an NVMe disk's default)")
    ap.add_argument("--keep", help="keep the tree and images in this new directory")
    args = ap.parse_args()
    system.require_root("this benchmark (loop devices, mounts, slowdisk, fanotify)")
    interrupts.install()
    t_start = time.monotonic()
    work = tempfile.mkdtemp(prefix="bb-readahead-bench-")
    try:
        return _main(args, work, t_start)
    finally:
        if args.keep:
            os.rename(work, args.keep)
        else:
            shutil.rmtree(work, ignore_errors=True)


@dataclass
class Built:
    """The tree's two images and the packs recorded on them (see the module doc)."""

    images: dict[str, str]
    packs: dict[str, Pack]
    paths: dict[str, str]
    size: int
    mnt: str
    predicted: dict[str, int] = field(default_factory=dict)  # cold-start seeks, per pack


def build(work: str, out: Figures) -> Built:
    """The tree, the ordinary image, packs recorded on it, the layout image built from
    them, and packs recorded on that, all in `work` (benchmarks/flat_delay.py uses it too)."""
    src = Path(work, "tree")
    build_tree(src)
    size = -(-int(tree_bytes(src) * 1.12 + 24 * MiB) // (4 * MiB)) * 4 * MiB
    images = {"ordinary": os.path.join(work, "ordinary.img"),
              "layout": os.path.join(work, "layout.img")}
    ordinary_image(src, images["ordinary"], size)
    mnt = os.path.join(work, "mnt")
    os.mkdir(mnt)
    out.add(f"# backburner readahead/layout on slowdisk ({time.strftime('%Y-%m-%d')}, "
            f"kernel {os.uname().release})\n")
    out.add(f"tree: {human_size(tree_bytes(src))} ({STDLIB}, {', '.join(PACKAGES)} from this "
            f"venv, {DATA_FILES} data files); images: {human_size(size)} ext4 each")
    for w in workloads(mnt, work):
        out.add(f"- workload `{w.name}`: `{w.shown()}` (cwd /, MNT = the image's mount point)")
    paths: dict[str, str] = {}
    packs: dict[str, Pack] = {}
    with system.Transaction("bench-readahead") as tx:
        bed = fast_bed(tx, images["ordinary"], mnt)
        for w in workloads(mnt, work):
            key = f"ordinary-{w.name}"
            paths[key] = os.path.join(work, f"{key}.pack")
            packs[key] = record_pack(w, paths[key], bed)
    hot = Pack(_union(packs["ordinary-python"], packs["ordinary-data"]))
    paths["hot"] = os.path.join(work, "hot.pack")
    packfile.save(paths["hot"], hot)
    built = ext4image.build_ext4(hot, ext4image.BuildOptions(str(src), images["layout"], size,
                                                             root=mnt))
    with system.Transaction("bench-readahead") as tx:
        bed = fast_bed(tx, images["layout"], mnt)
        for w in workloads(mnt, work):
            key = f"layout-{w.name}"
            paths[key] = os.path.join(work, f"{key}.pack")
            packs[key] = record_pack(w, paths[key], bed)
    out.add("- packs: `backburner readahead record --mount MNT --drop-caches -o PACK -- "
            "WORKLOAD` on each image through a plain loop device: "
            + ", ".join(f"{k} {len(p.entries)} files {human_size(p.bytes)}"
                        for k, p in packs.items()))
    out.add(f"- layout image: `backburner layout build-ext4 --pack hot.pack --root MNT "
            f"--size {size >> 20}M TREE layout.img` ({built.hot_files} hot files, "
            f"{human_size(built.hot_bytes)}, {fmt_s(built.seconds)} s)")
    for c in (built.before, built.after):
        if c is not None:
            out.add(f"  - `layout check`: {layout.describe_check(c)}")
    predicted = {}
    for key in packs:  # each start's pack on the image it was recorded on
        c = layout.check(images[key.split("-")[0]], packs[key], mnt)
        out.add(f"  - `layout check --pack {key}.pack {key.split('-')[0]}.img`: "
                f"{layout.describe_check(c)}")
        predicted[key] = c.meta.seeks if c.meta else c.seeks_cold
    return Built(images, packs, paths, size, mnt, predicted)


def _main(args: argparse.Namespace, work: str, t_start: float) -> int:
    out = Figures()
    b = build(work, out)
    images, packs, paths, mnt = b.images, b.packs, b.paths, b.mnt
    for what in proactive_reclaim():
        out.add(f"- note: DAMON proactive reclaim runs on this machine ({what}): it may "
                "evict pages a replay prefetched before the start uses them, so replay "
                "figures can vary between trials")
    out.add("- every measurement on a fresh read-only mount, after `echo 3 > "
            "/proc/sys/vm/drop_caches`; (a)/(c): the cold start; (b)/(d): "
            "`backburner readahead replay --wait PACK`, then the start; (b')/(d'): the start "
            "with `backburner readahead replay PACK` (background) launched with it")
    for profile in [p for p in args.profiles.split(",") if p]:
        slow_part(out, profile, images, mnt, work, packs, paths, args.trials, b.predicted)
    if args.ssd_trials > 0:
        ssd_part(out, images, mnt, work, paths, args.ssd_trials, args.ssd_scheduler)
    out.add(f"\nmeasurements taken again because another program dropped the page cache "
            f"during them: {INTERFERENCE.retried}; kept although disturbed "
            f"(after {ATTEMPTS} attempts): {INTERFERENCE.tainted}")
    out.add(f"(benchmark ran {fmt_s(time.monotonic() - t_start)} s)")
    return 0


def _union(a: Pack, b: Pack) -> tuple:
    seen = {e.path for e in a.entries}
    return a.entries + tuple(e for e in b.entries if e.path not in seen)


if __name__ == "__main__":
    sys.exit(main())
