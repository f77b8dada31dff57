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

Images: ``ordinary`` is ``mke2fs -T default -d TREE`` just big enough (with ``--disc``:
the size of a full single-layer DVD, the tree on its inner part as mke2fs puts it);
``layout`` is ``backburner layout build-ext4`` of the same tree, same size, with both
workloads' packs (recorded on the ordinary image) first; ``layout-end`` the same with
``--hot-region end`` (the hot region, its inodes and directories in the last block
groups: a disc's fast outer edge). Each image is served read-only by a slowdisk (``dvd``
and ``hdd-5400``, the library inside a transaction, as ``backburner slowdisk create
--read-only`` does) and mounted read-only at the same path, so packs recorded through a
fast loop device match by filesystem id.

For each profile, image and workload, after dropping the page cache: the cold start
alone; ``backburner readahead replay --wait PACK``, then the start (both timed); and the
start with ``backburner readahead replay PACK`` (background) launched with it; and the
lower bound: the pack's bytes in one sequential pass at the profile's transfer rate where
the image puts them, plus one full-stroke seek. Each cold start's seeks as the slowdisk
counts them are printed beside `layout check`'s prediction for that start (the pack
recorded on that image, metadata included). "With replay" ratios take the better of the
two replays. The measuring is benchmarks/slowstart.py's.

On an SSD-like device (a plain loop device, rotational 0): the cold start alone vs with a
background replay launched with it (target: at most 5% slower), and the record overhead:
the program's own wall time under ``readahead record`` vs without (target: at most 10%).

Usage (root): .venv/bin/python benchmarks/readahead_slowdisk.py [--profiles dvd,hdd-5400]
              [--hot-regions start,end] [--disc] [--trials N] [--ssd-trials N (0: none)]
              [--ssd-scheduler S] [--keep DIR]
Takes about 12 minutes (longer when other programs keep dropping the page cache: such
measurements are retaken). Prints every figure with the command that produced it.
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from slowstart import (  # noqa: E402
    ATTEMPTS,
    INTERFERENCE,
    Bed,
    Built,
    Figures,
    Workload,
    clean,
    cold,
    fast_bed,
    median,
    note_reclaim,
    predict,
    record_pack,
    replay_with,
    scratch,
    slow_bed,
    slow_part,
    trials,
)

from backburner import spawn, stats, system
from backburner.base import interrupts
from backburner.base.quantities import MiB, fmt_s, human_size
from backburner.readahead import ext4image, layout, packfile, record  # noqa: E402
from backburner.readahead.pack import Pack  # noqa: E402
from backburner.slowdisk.profiles import get_profile  # noqa: E402

__all__ = ["Bed", "Built", "Figures", "Workload", "build", "clean", "cold", "scratch", "slow_bed",
           "trials", "workloads"]

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
KINDS = {"start": "layout", "end": "layout-end"}


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



# --- the SSD-like part ----------------------------------------------------------------------


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



def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profiles", default="dvd,hdd-5400")
    ap.add_argument("--hot-regions", default="start,end",
                    help="layout images to build: start, end or both (build-ext4 --hot-region)")
    ap.add_argument("--disc", action="store_true",
                    help="every image the size of a full single-layer DVD (the outer edge "
                    "really outer), not just big enough for the tree")
    ap.add_argument("--trials", type=int, default=3, help="per slow cell (the model is "
                    "deterministic, the machine is not: a DVD start varies by 10-30%%)")
    ap.add_argument("--ssd-trials", type=int, default=15,
                    help="trials per SSD-like cell (0: no SSD-like part)")
    ap.add_argument("--ssd-scheduler", default="none",
                    help="the SSD-like device's IO scheduler (none: an NVMe disk's default)")
    ap.add_argument("--keep", help="keep the tree and images in this new directory")
    args = ap.parse_args()
    regions = [r for r in args.hot_regions.split(",") if r]
    if not set(regions) <= set(KINDS):
        ap.error("--hot-regions: start, end or both")
    system.require_root("this benchmark (loop devices, mounts, slowdisk, fanotify)")
    interrupts.install()
    t_start = time.monotonic()
    with scratch("bb-readahead-bench-", args.keep) as work:
        return _main(args, regions, work, t_start)


def disc_size() -> int:
    """A full single-layer DVD, in whole 4 MiB."""
    medium = get_profile("dvd").optical
    assert medium is not None
    return medium.medium_bytes // (4 * MiB) * 4 * MiB


def build(work: str, out: Figures, regions: tuple[str, ...] = ("start",),
          size: int | None = None) -> Built:
    """The tree, the ordinary image, packs recorded on it, a layout image per hot region
    built from them, and packs recorded on those, all in `work` (benchmarks/flat_delay.py
    uses it too)."""
    src = Path(work, "tree")
    build_tree(src)
    size = size or -(-int(tree_bytes(src) * 1.12 + 24 * MiB) // (4 * MiB)) * 4 * MiB
    images = {"ordinary": os.path.join(work, "ordinary.img")}
    ordinary_image(src, images["ordinary"], size)
    mnt = os.path.join(work, "mnt")
    os.mkdir(mnt)
    out.add(f"# backburner readahead/layout on slowdisk ({time.strftime('%Y-%m-%d')}, "
            f"kernel {os.uname().release})\n")
    out.add(f"tree: {human_size(tree_bytes(src))} ({STDLIB}, {', '.join(PACKAGES)} from this "
            f"venv, {DATA_FILES} data files); images: {human_size(size)} ext4 each")
    for w in workloads(mnt, work):
        out.add(f"- workload `{w.name}`: `{w.shown()}` (cwd /, MNT = the image's mount point)")
    b = Built(images, {}, {}, size, mnt)
    record_all(b, "ordinary", workloads(mnt, work), work)
    hot = Pack(_union(b.packs["ordinary-python"], b.packs["ordinary-data"]))
    b.paths["hot"] = os.path.join(work, "hot.pack")
    packfile.save(b.paths["hot"], hot)
    for region in regions:
        kind = KINDS[region]
        images[kind] = os.path.join(work, f"{kind}.img")
        built = ext4image.build_ext4(hot, ext4image.BuildOptions(
            str(src), images[kind], size, root=mnt, hot_region=region))
        b.region_at[kind] = built.region_at or 0
        out.add(f"- {kind} image: `backburner layout build-ext4 --pack hot.pack --root MNT "
                f"--size {size >> 20}M --hot-region {region} TREE {kind}.img` "
                f"({built.hot_files} hot files, {human_size(built.hot_bytes)}, hot region "
                f"from {human_size(b.region_at[kind])} on, {fmt_s(built.seconds)} s)")
        for c in (built.before, built.after):
            if c is not None:
                out.add(f"  - `layout check`: {layout.describe_check(c)}")
        record_all(b, kind, workloads(mnt, work), work)
    out.add("- packs: `backburner readahead record --mount MNT --drop-caches -o PACK -- "
            "WORKLOAD` on each image through a plain loop device: "
            + ", ".join(f"{k} {len(p.entries)} files {human_size(p.bytes)}"
                        for k, p in b.packs.items()))
    predict(out, b)
    return b


def record_all(b: Built, kind: str, wls: list[Workload], work: str) -> None:
    with system.Transaction("bench-readahead") as tx:
        bed = fast_bed(tx, b.images[kind], b.mnt)
        for w in wls:
            key = f"{kind}-{w.name}"
            b.paths[key] = os.path.join(work, f"{key}.pack")
            b.packs[key] = record_pack(w, b.paths[key], bed)


def _main(args: argparse.Namespace, regions: list[str], work: str, t_start: float) -> int:
    out = Figures()
    b = build(work, out, tuple(regions), disc_size() if args.disc else None)
    note_reclaim(out)
    out.add("- every measurement on a fresh read-only mount, after `echo 3 > "
            "/proc/sys/vm/drop_caches`; replay then start: `backburner readahead replay "
            "--wait PACK`, then the start; with replay: the start with `backburner readahead "
            "replay PACK` (background) launched with it")
    for profile in [p for p in args.profiles.split(",") if p]:
        slow_part(out, profile, b, workloads(b.mnt, work), args.trials)
    if args.ssd_trials > 0:
        ssd_part(out, b.images, b.mnt, work, b.paths, args.ssd_trials, args.ssd_scheduler)
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

