#!/usr/bin/env python3
"""Three differently shaped cold starts on a simulated DVD: ordinary image, replay,
layout image, both, against the sequential lower bound; and `layout check`'s prediction
of each cold start beside the measured time and the drive's own seek count.

The starts (benchmarks/start_shapes.py, each chrooted into its image): ``opens`` (a
program that only opens and reads 300 of 3,000 small files), ``scans`` (one that lists
and stats 12 directories, reads 240 files and parts of three large ones) and ``loader``
(an engine the dynamic loader links against 24 shared libraries, six of them large,
asking for 18 names that do not exist, reading 236 of 1,300 data files while it calls
functions all over its libraries).

For each shape: ``ordinary`` is ``mke2fs -T default -d TREE`` just big enough; its pack is
``backburner readahead record --lookups --read-ahead-kb RA --drop-caches`` of the start
on it (through a plain loop device); ``layout`` is ``backburner layout build-ext4`` of
the same tree with that pack, the same size; the layout image's own pack is recorded the
same way. Each image is served read-only by a slowdisk of PROFILE whose loop device's
read-ahead is set to RA (128 KiB: a DVD drive's, the sr driver's default; the loop
device's own default here is 2560 KiB), and mounted afresh for every start, after
dropping the page cache. Cells: the cold start alone; ``backburner readahead replay
--wait PACK`` then the start, and the start with ``backburner readahead replay PACK``
launched with it (the better of the two is "+ replay"); the bound is the pack's bytes at
the rate where the image starts plus one full seek. Measurements that another program's
cache drop disturbed are taken again (benchmarks/slowstart.py).

Usage (root): .venv/bin/python benchmarks/readahead_shapes.py [--shapes opens,scans,loader]
              [--profile dvd] [--read-ahead-kb 128] [--trials 3] [--scale 1.0]
              [--trees DIR] [--keep DIR]
``--trees DIR`` keeps the built trees there and uses them again (the loader's libraries
take minutes to compile). About 25 minutes on a quiet machine.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import start_shapes  # noqa: E402
from slowstart import (  # noqa: E402
    ATTEMPTS,
    INTERFERENCE,
    Bed,
    Figures,
    Workload,
    clean,
    cold_counted,
    fast_bed,
    median,
    note_reclaim,
    replay_then,
    replay_with,
    scratch,
    slow_bed,
    trials,
)

from backburner import system
from backburner.base import interrupts
from backburner.base.quantities import MiB, fmt_factor, fmt_s, human_size
from backburner.readahead import ext4image, layout, packfile, record  # noqa: E402
from backburner.slowdisk.model import Disk  # noqa: E402
from backburner.slowdisk.profiles import get_profile  # noqa: E402

KINDS = ("ordinary", "layout")


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def tree_bytes(src: Path) -> int:
    return sum(-(-os.lstat(os.path.join(d, f)).st_size // 4096) * 4096 + 4096
               for d, _, fs in os.walk(src) for f in fs)


def record_pack(argv: list[str], out: str, bed: Bed, read_ahead_kb: int) -> None:
    """What the start reads and asks, on a plain loop device, at the medium's read-ahead."""
    with bed.fresh():
        _, outcome = record.record_command(argv, record.RecordOptions(
            out, mounts=(bed.mnt,), drop_caches=True, lookups=True,
            read_ahead_kb=read_ahead_kb, force=True))
    assert outcome.ok, outcome.describe()


def read_ahead(kb: int):
    def setup(tx: system.Transaction, device: str) -> None:
        tx.apply(system.SysfsValue(f"/sys/block/{os.path.basename(device)}/queue/read_ahead_kb",
                                   str(kb)))
    return setup


def shape_images(shape: str, work: Path, trees: Path | None, scale: float, ra: int,
                 out: Figures) -> tuple[start_shapes.Start, dict[str, str], dict[str, str],
                                        int, str]:
    """The shape's tree, its two images and a pack recorded on each."""
    home = (trees or work) / shape
    tree = home / "tree"
    if (home / "start").exists():
        program = (home / "start").read_text().strip()
        start = start_shapes.Start(shape, program)
    else:
        start = start_shapes.build(shape, tree, scale)
        (home / "start").write_text(start.program + "\n")
    wdir = work / shape
    wdir.mkdir(parents=True, exist_ok=True)
    mnt = str(wdir / "mnt")
    os.makedirs(mnt, exist_ok=True)
    size = -(-int(tree_bytes(tree) * 1.12 + 24 * MiB) // (4 * MiB)) * 4 * MiB
    images = {k: str(wdir / f"{k}.img") for k in KINDS}
    packs = {k: str(wdir / f"{k}.pack") for k in KINDS}
    with open(images["ordinary"], "xb") as f:
        f.truncate(size)
    subprocess.run(["mke2fs", "-q", "-F", "-t", "ext4", "-T", "default", "-E", "nodiscard",
                    "-d", str(tree), images["ordinary"]], check=True, capture_output=True)
    argv = start.argv(mnt)
    for kind in KINDS:
        if kind == "layout":
            built = ext4image.build_ext4(packfile.load(packs["ordinary"]), ext4image.BuildOptions(
                str(tree), images["layout"], size, root=mnt))
            out.add(f"  - `backburner layout build-ext4 --pack ordinary.pack --root MNT --size "
                    f"{size >> 20}M TREE layout.img`: {built.hot_files} hot files, "
                    f"{human_size(built.hot_bytes)}, {built.split_files} in pieces "
                    f"({fmt_s(built.seconds)} s)")
        with system.Transaction("bench-shapes") as tx:
            record_pack(argv, packs[kind], fast_bed(tx, images[kind], mnt), ra)
        p = packfile.load(packs[kind])
        from backburner.readahead.summary import lookup_counts

        out.add(f"  - `backburner readahead record --lookups --read-ahead-kb {ra} --mount MNT "
                f"--drop-caches -o {kind}.pack -- {Workload(shape, argv).shown()}` on "
                f"{kind}.img: {len(p.entries)} files, {human_size(p.bytes)}; "
                f"{lookup_counts(p)}")
    return start, images, packs, size, mnt


def measure_shape(shape: str, start: start_shapes.Start, images: dict[str, str],
                  packs: dict[str, str], size: int, mnt: str, profile: str, ra: int, n: int,
                  out: Figures) -> dict[str, str]:
    """The cells of one shape's row (figures with their spread), and the lines below."""
    w = Workload(shape, start.argv(mnt))
    p = get_profile(profile)
    got: dict[str, dict[str, list]] = {}
    predicted: dict[str, layout.CheckResult] = {}
    for kind in KINDS:
        predicted[kind] = layout.check(images[kind], packfile.load(packs[kind]), mnt, profile)
        with system.Transaction("bench-shapes") as tx:
            bed = slow_bed(tx, images[kind], mnt, profile)
            read_ahead(ra)(tx, bed.device)
            seeks: list[int] = []
            colds = trials(n, lambda bed=bed, seeks=seeks: cold_counted(w, bed, seeks))
            pairs = [replay_then(w, packs[kind], bed) for _ in range(n)]
            withs = trials(n, clean(lambda bed=bed, kind=kind: replay_with(w, packs[kind], bed)))
            got[kind] = {"cold": colds, "seeks": seeks, "then": [a + b for a, b in pairs],
                         "with": withs}
        out.add(f"- {shape} {kind} (load {load()}): cold {_all(got[kind]['cold'])}, drive "
                f"seeks {' / '.join(map(str, got[kind]['seeks']))}; replay then start "
                f"{_all(got[kind]['then'])}; start with replay {_all(got[kind]['with'])}")
        c = predicted[kind]
        assert c.drive is not None
        out.add(f"  - `backburner layout check --profile {profile} --pack {kind}.pack "
                f"{kind}.img`: predicted {fmt_s(c.drive.seconds)} s, {c.drive.seeks} seeks; "
                f"measured {fmt_s(median(got[kind]['cold']))} s "
                f"({(c.drive.seconds / median(got[kind]['cold']) - 1) * 100:+.0f}%), "
                f"{int(median(got[kind]['seeks']))} seeks")
    nbytes = packfile.load(packs["ordinary"]).bytes
    low = nbytes / Disk(p, size).rate_at(0) + p.full_stroke_s
    base = median(got["ordinary"]["cold"])

    def best(kind: str) -> float:
        return min(median(got[kind]["then"]), median(got[kind]["with"]))

    cells = {
        "ordinary": f"{fmt_s(base)} s",
        "replay": f"{fmt_s(best('ordinary'))} s ({fmt_factor(base / best('ordinary'))}×)",
        "layout": f"{fmt_s(median(got['layout']['cold']))} s "
                  f"({fmt_factor(base / median(got['layout']['cold']))}×)",
        "both": f"{fmt_s(best('layout'))} s ({fmt_factor(base / best('layout'))}×)",
        "bound": f"{fmt_s(low)} s",
        "check": " / ".join(f"{fmt_s(_seconds(predicted[k]))} s vs "
                            f"{fmt_s(median(got[k]['cold']))} s" for k in KINDS),
    }
    return cells


def _seconds(c: layout.CheckResult) -> float:
    assert c.drive is not None
    return c.drive.seconds


def _all(xs: list[float]) -> str:
    return " / ".join(fmt_s(x) for x in xs) + " s"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default=",".join(start_shapes.SHAPES))
    ap.add_argument("--profile", default="dvd")
    ap.add_argument("--read-ahead-kb", type=int, default=128)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--trees", help="keep the built trees here and use them again")
    ap.add_argument("--keep", help="keep the images and packs in this new directory")
    args = ap.parse_args()
    system.require_root("this benchmark (loop devices, mounts, slowdisk, fanotify, perf)")
    interrupts.install()
    t0 = time.monotonic()
    out = Figures()
    out.add(f"# three start shapes on a {args.profile} slowdisk ({time.strftime('%Y-%m-%d')}, "
            f"kernel {os.uname().release}, read-ahead {args.read_ahead_kb} KiB, "
            f"{args.trials} trials, load {load()})\n")
    note_reclaim(out)
    trees = Path(args.trees) if args.trees else None
    rows = {}
    with scratch("bb-shapes-", args.keep) as work:
        for shape in [s for s in args.shapes.split(",") if s]:
            out.add(f"\n## {shape}\n")
            start, images, packs, size, mnt = shape_images(shape, Path(work), trees,
                                                           args.scale, args.read_ahead_kb, out)
            rows[shape] = measure_shape(shape, start, images, packs, size, mnt, args.profile,
                                        args.read_ahead_kb, args.trials, out)
    out.add(f"\n## medians ({args.profile}, read-ahead {args.read_ahead_kb} KiB)\n")
    out.add("| start | ordinary image | + replay | layout image | layout + replay | "
            "sequential bound | `layout check` predicted vs measured (ordinary / layout) |")
    out.add("| --- | --: | --: | --: | --: | --: | --- |")
    for shape, c in rows.items():
        out.add(f"| {shape} | {c['ordinary']} | {c['replay']} | {c['layout']} | {c['both']} | "
                f"{c['bound']} | {c['check']} |")
    out.add(f"\nmeasurements taken again because another program dropped the page cache "
            f"during them: {INTERFERENCE.retried}; kept although disturbed (after {ATTEMPTS} "
            f"attempts): {INTERFERENCE.tainted}; load at the end {load()}")
    out.add(f"(benchmark ran {fmt_s(time.monotonic() - t0)} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
