#!/usr/bin/env python3
"""How close is a slowdisk to its model? Measured through the loop device with fio.

For each profile, a slowdisk is created exactly as `backburner slowdisk create` does
(`slowdisk.device.create`: daemon, direct-IO loop device, queue settings, hand-over; then
`remove`), and fio reads the LOOP DEVICE with ``--direct=1 --ioengine=psync`` (one request
at a time, no page cache):

1. random 4 KiB reads over the whole image for RUNTIME seconds (at least ~100 reads: the
   slow dvd runs longer): mean and median latency as fio reports them (fio's median is its
   bucketed clat percentile, within ~1 %);
2. sequential 1 MiB reads from offset 0 for RUNTIME seconds: throughput.

Model, for the same access pattern, from `slowdisk.model.Disk`:
- random: a replay of 20000 uniformly random 4 KiB reads, each arriving when the previous
  one finished (mean and median); "exact" is the daemon's own modelled latency of the very
  requests fio made (stats.json: modelled_latency_s / received), i.e. the timing error with
  no sampling noise;
- sequential: a replay of the same number of 1 MiB reads from offset 0, split into the FUSE
  request size the daemon saw (concurrent pieces, as the kernel sends them), back to back.
The simulator's own time per request (stats.json overhead_mean_s: lock, model, real IO on the
image, Python, late wake-ups) is given for the random phase, whose requests are all small.
The dvd profile reads a pre-filled read-only image (random bytes); the others a sparse one.

Usage (root): .venv/bin/python benchmarks/slowdisk_accuracy.py [--profiles a,b] [--runtime S]
Takes about a minute. Prints a Markdown table; exit status 1 if a target is missed
(random-read mean within 10 % of the model; the simulator's own time < 0.5 ms per request,
not counting the real reads of the image, which overlap the modelled time).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

from backburner import system
from backburner.slowdisk import device
from backburner.slowdisk.drive import Profile
from backburner.slowdisk.model import Disk
from backburner.slowdisk.profiles import get_profile

PROFILES = ["hdd-5400", "hdd-7200", "dvd", "sdcard", "flat:5"]
IMAGE_SIZE = 1 << 30
DVD_IMAGE_SIZE = 256 << 20
KiB4 = 4096
MiB = 1 << 20
MIN_RANDOM_READS = 100
REPLAY_READS = 20000
TARGET_ERR = 0.10
TARGET_OVERHEAD_S = 0.5e-3


@dataclass
class Row:
    profile: str
    reads: int
    mean_s: float
    median_s: float
    model_mean_s: float
    model_median_s: float
    exact_s: float  # the daemon's modelled mean for the requests fio made
    seq_bps: float
    model_seq_bps: float
    chunk: int
    seq_seeks: int
    seq_requests: int
    overhead_s: float
    image_io_s: float
    late: int

    @staticmethod
    def err(measured: float, model: float) -> float:
        return (measured - model) / model


def fio(dev: str, rw: str, bs: str, runtime: float) -> dict:
    argv = ["fio", "--name=acc", f"--filename={dev}", "--direct=1", "--ioengine=psync",
            f"--rw={rw}", f"--bs={bs}", "--time_based", f"--runtime={runtime:g}",
            "--randseed=1", "--output-format=json"]
    out = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=600)
    return json.loads(out.stdout)["jobs"][0]["read"]


def stats(dev: str) -> dict:
    return device.read_stats(dev)


def model_random(p: Profile, size: int) -> tuple[float, float]:
    disk = Disk(p, size)
    rng = random.Random(7)
    t = 0.0
    lat = []
    for _ in range(REPLAY_READS):
        off = rng.randrange(0, size // KiB4) * KiB4
        _, finish = disk.service(off, KiB4, False, t)
        lat.append(finish - t)
        t = finish
    return statistics.fmean(lat), statistics.median(lat)


def model_sequential(p: Profile, size: int, n: int, bs: int, chunk: int) -> float:
    """Throughput of `n` back-to-back reads of `bs` from offset 0, each sent as bs/chunk
    pieces arriving together (as the loop device hands a 1 MiB read to FUSE)."""
    disk = Disk(p, size)
    t = 0.0
    off = 0
    for _ in range(n):
        end = t
        for k in range(max(1, bs // chunk)):
            _, finish = disk.service((off + k * chunk) % size, chunk, False, t)
            end = max(end, finish)
        off += bs
        t = end
    return n * bs / t


def image_for(profile: Profile, tmp: str) -> tuple[str, bool]:
    path = os.path.join(tmp, f"{profile.name.replace(':', '-')}.img")
    if not profile.read_only_medium:
        return path, False
    with open(path, "wb") as f:  # a pressed disc: real data on every sector
        for _ in range(DVD_IMAGE_SIZE // (8 * MiB)):
            f.write(os.urandom(8 * MiB))
    return path, True


def measure(name: str, runtime: float, tmp: str) -> Row:
    p = get_profile(name)
    path, filled = image_for(p, tmp)
    size = DVD_IMAGE_SIZE if filled else IMAGE_SIZE
    model_mean, model_median = model_random(p, size)
    disk = device.create(device.CreateOptions(name, path, None if filled else size))
    try:
        dev = disk.device
        time.sleep(0.2)  # the daemon's start-up round-trip probe is done
        rand_runtime = min(max(runtime, 1.1 * MIN_RANDOM_READS * model_mean), 4 * runtime)
        a = stats(dev)
        r = fio(dev, "randread", "4k", rand_runtime)
        b = stats(dev)
        s = fio(dev, "read", "1m", runtime)
        c = stats(dev)
    finally:
        device.remove(disk.device)
        os.unlink(path)
    n = b["received"] - a["received"]
    own = b["overhead_mean_s"] * b["received"] - a["overhead_mean_s"] * a["received"]
    seq_requests = c["received"] - b["received"]
    chunk = (c["bytes_read"] - b["bytes_read"]) // max(seq_requests, 1)
    chunk = 1 << max(12, min(20, round(chunk).bit_length() - 1))  # a power of two
    return Row(
        profile=name, reads=r["total_ios"], mean_s=r["lat_ns"]["mean"] / 1e9,
        median_s=r["clat_ns"]["percentile"]["50.000000"] / 1e9,
        model_mean_s=model_mean, model_median_s=model_median,
        exact_s=(b["modelled_latency_s"] - a["modelled_latency_s"]) / n,
        seq_bps=s["bw_bytes"],
        model_seq_bps=model_sequential(p, size, s["total_ios"], MiB, chunk),
        chunk=chunk, seq_seeks=c["seeks"] - b["seeks"], seq_requests=seq_requests,
        overhead_s=own / n, image_io_s=(b["backing_io_s"] - a["backing_io_s"]) / n,
        late=b["late_requests"] - a["late_requests"])


def table(rows: list[Row]) -> str:
    def ms(x: float) -> str:
        return f"{x * 1e3:.2f}"

    def pct(x: float) -> str:
        return f"{100 * x:+.1f} %"

    out = ["| profile | random 4K reads | mean ms (model) | err | median ms (model) | err | "
           "err vs exact model | seq 1M MB/s (model) | err | sim overhead ms/req "
           "(of which image IO) | late > 1 ms |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        out.append(
            f"| {r.profile} | {r.reads} | {ms(r.mean_s)} ({ms(r.model_mean_s)}) | "
            f"{pct(Row.err(r.mean_s, r.model_mean_s))} | {ms(r.median_s)} "
            f"({ms(r.model_median_s)}) | {pct(Row.err(r.median_s, r.model_median_s))} | "
            f"{pct(Row.err(r.mean_s, r.exact_s))} | {r.seq_bps / 1e6:.1f} "
            f"({r.model_seq_bps / 1e6:.1f}) | {pct(Row.err(r.seq_bps, r.model_seq_bps))} | "
            f"{ms(r.overhead_s)} ({ms(r.image_io_s)}) | {r.late} |")
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profiles", default=",".join(PROFILES))
    ap.add_argument("--runtime", type=float, default=5.0, help="seconds per phase (default 5)")
    args = ap.parse_args()
    system.require_root("slowdisk_accuracy (FUSE mounts and loop devices)")
    rows = []
    with tempfile.TemporaryDirectory(dir="/var/tmp", prefix="slowdisk-accuracy-") as tmp:
        for name in args.profiles.split(","):
            print(f"measuring {name} ...", file=sys.stderr, flush=True)
            rows.append(measure(name.strip(), args.runtime, tmp))
    print(table(rows))
    print()
    print(f"Command: `{shlex.join(['.venv/bin/python', *sys.argv])}` (as root); fio "
          f"{subprocess.run(['fio', '--version'], capture_output=True, text=True).stdout.strip()}"
          f", --direct=1 --ioengine=psync on the loop device, {args.runtime:g} s per phase; "
          f"kernel {platform.release()}, {os.cpu_count()} CPUs. Model: slowdisk.model.Disk "
          f"replaying the same pattern; exact model: the daemon's modelled latency of the very "
          f"requests fio made.")
    for r in rows:
        print(f"- {r.profile}: sequential 1 MiB reads reached the daemon as "
              f"{r.seq_requests} requests of ~{r.chunk // 1024} KiB; "
              f"{max(r.seq_seeks - 1, 0)} were charged a seek besides the jump to offset 0 "
              "(pieces of one split read reaching the daemon out of order)")
    # The image IO happens before the daemon's sleep, inside the modelled time: it costs the
    # simulator capacity, not latency. The target is on the rest.
    missed = [r.profile for r in rows if abs(Row.err(r.mean_s, r.model_mean_s)) > TARGET_ERR
              or r.overhead_s - r.image_io_s > TARGET_OVERHEAD_S]
    if missed:
        print(f"\ntargets missed by: {', '.join(missed)}", file=sys.stderr)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
