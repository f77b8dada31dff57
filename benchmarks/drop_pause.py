#!/usr/bin/env python3
"""Does a pause between the cache drop and the start change an unloaded cold start?

The S suite sleeps after it drops the caches and before it starts its probe; bench starts
the probe at once, into the reads every process on the machine makes to fill its cache
again (benchmarks/drop_storm.py). This runs `bench --preset s-startup --load none` with
`system.drop_caches` wrapped so that each drop is followed by a pause taken in turn from
--pauses (shuffled within each round, so drift of the machine meets every pause alike),
logs which pause each trial got, and prints the cold start's median and its distribution-
free 95% interval per pause, with the load average before and after.

Usage (as root, on a quiet machine; about 6 s a trial):
    .venv/bin/python benchmarks/drop_pause.py [--scheduler mq-deadline] [--rounds 15]
        [--pauses 0,0.2,1] [--seed 1] [--workdir DIR]
Figures: docs/measurements/startup.md, "The S suite side by side".
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

#: Runs inside bench's process (python -c): each drop, then the pause its turn names.
WRAP = """
import json, random, sys, time
from backburner import system
pauses, rounds, seed, log = json.loads(sys.argv.pop(1))
rng = random.Random(seed)
order = [p for _ in range(rounds) for p in rng.sample(pauses, len(pauses))]
dropper = system.drop_caches
def drop_then_pause():
    dropper()
    pause = order.pop(0) if order else 0.0
    with open(log, "a") as f:
        f.write(f"{pause}\\n")
    time.sleep(pause)
system.drop_caches = drop_then_pause
from backburner.cli import main
sys.exit(main())
"""


def interval(values: list[float]) -> tuple[float, float]:
    """The distribution-free 95% interval of a median: order statistics by the binomial."""
    from math import comb

    n, xs = len(values), sorted(values)
    k = 0
    while k + 1 < n - k - 1 and sum(comb(n, i) for i in range(k + 2)) / 2 ** n < 0.025:
        k += 1
    return xs[k], xs[n - 1 - k]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scheduler", default="mq-deadline")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--pauses", default="0,0.2,1")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workdir", type=Path)
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("drop_pause: needs root (bench drops the page cache)", file=sys.stderr)
        return 1
    pauses = sorted({float(p) for p in args.pauses.split(",")})
    work = Path(tempfile.mkdtemp(prefix="drop-pause-", dir=args.workdir))
    db, log = work / "r.db", work / "pauses"
    trials = args.rounds * len(pauses)
    cfg = json.dumps([pauses, args.rounds, args.seed, str(log)])
    load_before = os.getloadavg()
    subprocess.run([sys.executable, "-I", "-c", WRAP, cfg, "bench", "--preset", "s-startup",
                    "--load", "none", "--scheduler", args.scheduler, "-r", str(trials),
                    "--seed", str(args.seed), "-o", str(db)], check=True, cwd="/")
    load_after = os.getloadavg()
    got = [float(x) for x in log.read_text().split()]
    conn = sqlite3.connect(db)
    rows = list(conn.execute("SELECT wall_s, status FROM trials WHERE cold = 1 AND "
                             "status != 'aborted' ORDER BY started_at"))
    if len(rows) != len(got):
        print(f"drop_pause: {len(got)} drops for {len(rows)} cold trials: cannot pair them",
              file=sys.stderr)
        return 1
    walls = [w if status == "ok" else None for w, status in rows]
    print(f"scheduler {args.scheduler}, {args.rounds} trials a pause; load average "
          f"{load_before[0]:.2f} before, {load_after[0]:.2f} after; database {db}")
    print("| pause after the drop | cold start: median [95% CI] | trials |")
    print("| --: | --: | --: |")
    for pause in pauses:
        mine = [w for w, p in zip(walls, got, strict=True) if p == pause and w is not None]
        if not mine:
            print(f"| {pause:g} s | no trial ended ok | 0 |")
            continue
        lo, hi = interval(mine)
        print(f"| {pause:g} s | {statistics.median(mine):.3f} s [{lo:.3f}–{hi:.3f}] "
              f"| {len(mine)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
