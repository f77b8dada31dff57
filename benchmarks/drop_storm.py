#!/usr/bin/env python3
"""How much the machine's disk reads after a cache drop, and for how long.

`bench` drops the page cache, dentries and inodes before every cold trial. Every process on
the machine then reads back what it needs, from the same disk a loop testbed's image lies
on; a probe started at once meets those reads, one started after a load has settled (two
seconds later) does not. This samples the disk's read counter (/proc/diskstats) every
50 ms for a second before a drop and two seconds after it, several times, and prints the
median read rate per 50 ms bin -- the size and length of that storm on this machine.

Usage (as root): .venv/bin/python benchmarks/drop_storm.py [--disk vda] [--repeats 6]
Drops the caches --repeats times (as bench does). Figures: docs/measurements/startup.md,
"The S suite side by side".
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

BIN_S = 0.05


def sectors_read(disk: str) -> int:
    with open("/proc/diskstats") as f:
        for line in f:
            fields = line.split()
            if fields[2] == disk:
                return int(fields[5])
    raise SystemExit(f"no disk {disk!r} in /proc/diskstats")


def sample(disk: str, bins: int) -> list[int]:
    out, last = [], sectors_read(disk)
    for _ in range(bins):
        time.sleep(BIN_S)
        now = sectors_read(disk)
        out.append(now - last)
        last = now
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--disk", default="vda")
    ap.add_argument("--repeats", type=int, default=6)
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("drop_storm: needs root (it drops the page cache)", file=sys.stderr)
        return 1
    runs = []
    for _ in range(args.repeats):
        before = sample(args.disk, 20)
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3")
        runs.append(before + sample(args.disk, 40))
        time.sleep(1.0)
    rates = [statistics.median(col) * 512 / BIN_S / 1e6 for col in zip(*runs, strict=True)]
    print(f"{args.disk}: MB/s read per {BIN_S * 1000:.0f} ms, median of {args.repeats}")
    print("1 s before the drop:", " ".join(f"{r:.0f}" for r in rates[:20]))
    print("2 s after the drop: ", " ".join(f"{r:.0f}" for r in rates[20:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
