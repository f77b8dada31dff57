#!/usr/bin/env python3
"""How fast are `extents show` and `extents verify`? The two performance targets, measured.

Builds its own testbed through `system.Transaction` (a sparse image in a private temporary
folder, a direct-IO loop device, ext4, a mount; all undone at the end, or by `backburner
restore` after a crash), then:

1. show: a file with 100,000 extents (every other 4 KiB block of a sparse file written, so
   each block is an extent of its own). Timed: `layout_of` in-process (FIEMAP paging, merge,
   totals) and the whole CLI, `python -m backburner extents show FILE > /dev/null`, Python
   start-up included. Target: under 1 s.
2. verify: a contiguous file of --size bytes. fio reads the same device bytes sequentially,
   run by run (``--rw=read --direct=1``: 1 MiB psync, 1 MiB libaio depth 8, 16 MiB psync;
   the fastest is the device's rate), then `verify` (library call; its own clock, FIEMAP
   excluded) runs --repeat times with the file's pages cached (the file was just written or
   read: only the device is read from disk), and --repeat times with them dropped first
   (posix_fadvise DONTNEED: both the device and the file are read from disk, twice the
   bytes), interleaved with the fio runs. Target: verify's rate in file bytes/s at least
   80 % of the device's rate (the best of three fio set-ups, medians), warm.
   For information, verify on the 100,000-extent file (4 KiB reads, IOPS-bound).

Usage (root): .venv/bin/python benchmarks/extents_speed.py [--size 1G] [--repeat 3]
Prints a Markdown table of medians and ratios; exit status 1 if a target is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from backburner import extents, system
from backburner.base import interrupts, quantities
from backburner.base.quantities import GiB, MiB
from backburner.bench.devices import mkfs

EXTENTS = 100_000
BLOCK = 4096
SHOW_TARGET_S = 1.0
VERIFY_TARGET = 0.80


def build_testbed(tx: system.Transaction, work: Path, size: int) -> Path:
    image = work / "disk.img"
    tx.apply(system.MadeFile(str(image), size))
    loop = tx.apply(system.LoopDevice(str(image), direct_io=True))
    mkfs(loop)
    mnt = work / "mnt"
    tx.apply(system.MadeDir(str(mnt)))
    tx.apply(system.Mount(loop, str(mnt), "ext4", "noatime"))
    return mnt


def write_every_other_block(path: Path, count: int) -> None:
    block = b"backburner extents bench ".ljust(BLOCK, b".")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for i in range(count):
            os.pwrite(fd, block, 2 * i * BLOCK)
        os.fsync(fd)
    finally:
        os.close(fd)


def write_contiguous(path: Path, size: int) -> None:
    chunk = os.urandom(8 * MiB)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.posix_fallocate(fd, 0, size)  # one allocation: as contiguous as ext4 can
        for off in range(0, size, len(chunk)):
            os.pwrite(fd, chunk[:size - off], off)
        os.fsync(fd)
    finally:
        os.close(fd)


def timed(fn, repeat: int) -> list[float]:  # noqa: ANN001 - any callable
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def cli_show(path: Path) -> None:
    with open(os.devnull, "w") as null:
        subprocess.run([sys.executable, "-m", "backburner", "extents", "show", str(path)],
                       stdout=null, check=True, timeout=120)


FIO_SETUPS = (("psync", 1, MiB), ("libaio", 8, MiB), ("psync", 1, 16 * MiB))


def fio_rate(dev: str, offset: int, size: int, engine: str, depth: int, bs: int) -> float:
    bs = min(bs, size)  # fio refuses a block larger than the range
    argv = ["fio", "--name=seq", f"--filename={dev}", "--readonly", "--rw=read", f"--bs={bs}",
            "--direct=1", f"--ioengine={engine}", f"--iodepth={depth}", f"--offset={offset}",
            f"--size={size}", "--output-format=json"]
    out = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=600)
    return float(json.loads(out.stdout)["jobs"][0]["read"]["bw_bytes"])


def fio_over_runs(lay: extents.Layout, engine: str, depth: int, bs: int) -> float:
    """fio's sequential rate over exactly the device bytes verify reads, run by run."""
    seconds = sum(r.length / fio_rate(lay.device.path, r.physical, r.length, engine, depth, bs)
                  for r in lay.runs)
    return sum(r.length for r in lay.runs) / seconds


def drop_file_cache(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def warm_file_cache(path: Path) -> None:
    with open(path, "rb", buffering=0) as f:
        while f.read(8 * MiB):
            pass


def verify_rates(path: Path, repeat: int, cold: bool) -> list[float]:
    rates = []
    for _ in range(repeat):
        (drop_file_cache if cold else warm_file_cache)(path)
        res = extents.verify(path)
        if res.mismatch is not None:
            raise SystemExit(f"verify found a mismatch: {res.mismatch.describe()}")
        rates.append(res.checked_bytes / res.seconds)
    return rates


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="1G", help="the contiguous file for verify (default 1G)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per measurement (default 3)")
    args = ap.parse_args()
    size = quantities.parse_size(args.size, what="--size", minimum=64 * MiB)
    system.require_root("extents_speed (a loop device, mkfs, a mount)")
    interrupts.install()
    work = Path(tempfile.mkdtemp(prefix="extents-speed-"))
    rows: list[tuple[str, str, str]] = []
    try:
        with system.Transaction("extents-speed") as tx:
            mnt = build_testbed(tx, work, size + 2 * EXTENTS * BLOCK + GiB // 2)
            sparse, big = mnt / "sparse", mnt / "big"
            print(f"writing {EXTENTS} one-block extents ...", file=sys.stderr, flush=True)
            write_every_other_block(sparse, EXTENTS)
            lay = extents.layout_of(sparse)
            assert lay.extents == EXTENTS, lay.extents
            lib = statistics.median(timed(lambda: extents.layout_of(sparse), args.repeat))
            cli = statistics.median(timed(lambda: cli_show(sparse), args.repeat))
            rows += [("show, 100,000 extents: layout_of (in-process)", f"{lib:.3f} s",
                      f"{lib / SHOW_TARGET_S:.2f} of the 1 s budget"),
                     ("show, 100,000 extents: whole CLI to /dev/null", f"{cli:.3f} s",
                      f"{cli / SHOW_TARGET_S:.2f} of the 1 s budget")]
            print(f"writing {quantities.human_size(size)} ...", file=sys.stderr, flush=True)
            write_contiguous(big, size)
            blay = extents.layout_of(big)
            fio: dict[tuple[str, int, int], list[float]] = {s: [] for s in FIO_SETUPS}
            warm, cold = [], []
            for rnd in range(args.repeat):  # interleaved: a busy machine's noise hits all
                print(f"round {rnd + 1}/{args.repeat}: fio, verify ...", file=sys.stderr,
                      flush=True)
                for setup in FIO_SETUPS:
                    fio[setup].append(fio_over_runs(blay, *setup))
                warm += verify_rates(big, 1, cold=False)
                cold += verify_rates(big, 1, cold=True)
            frag = statistics.median(verify_rates(sparse, 1, cold=False))
            fio_med = {s: statistics.median(v) for s, v in fio.items()}
            best = max(fio_med, key=lambda s: fio_med[s])
            device_bps = fio_med[best]
            warm_bps, cold_bps = statistics.median(warm), statistics.median(cold)
            where = f"the file's {blay.totals.runs} runs on {blay.device.path}"
            rows += [(f"fio --rw=read --direct=1 --ioengine={e} --iodepth={d} "
                      f"--bs={quantities.size_text(b)}, {where}"
                      + (" (the device's rate)" if (e, d, b) == best else ""),
                      f"{v / 1e6:.0f} MB/s", f"{v / device_bps:.2f}")
                     for (e, d, b), v in fio_med.items()]
            rows += [
                ("verify, file pages cached", f"{warm_bps / 1e6:.0f} MB/s",
                 f"{warm_bps / device_bps:.2f}"),
                ("verify, file pages dropped (reads twice the bytes)",
                 f"{cold_bps / 1e6:.0f} MB/s",
                 f"{cold_bps / device_bps:.2f} ({2 * cold_bps / device_bps:.2f} in device "
                 "bytes)"),
                ("verify, 100,000 extents of 4 KiB (cached; IOPS-bound)",
                 f"{frag / 1e6:.1f} MB/s", f"{frag / device_bps:.3f}"),
            ]
    finally:
        system.remove_tree(str(work))
    print("| measurement | median | ratio |\n|---|---:|---:|")
    for name, value, ratio in rows:
        print(f"| {name} | {value} | {ratio} |")
    fio_version = subprocess.run(["fio", "--version"], capture_output=True,
                                 text=True).stdout.strip()
    print(f"\nCommand: `{shlex.join(['.venv/bin/python', *sys.argv])}` (as root); "
          f"{args.repeat} runs per measurement; {fio_version}; kernel {platform.release()}, "
          f"{os.cpu_count()} CPUs; ext4 on a direct-IO loop device over a sparse image.")
    missed = []
    if max(lib, cli) >= SHOW_TARGET_S:
        missed.append("show under 1 s")
    if warm_bps / device_bps < VERIFY_TARGET:
        missed.append("verify at 80 % of the device's rate")
    if missed:
        print(f"\ntargets missed: {', '.join(missed)}", file=sys.stderr)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
