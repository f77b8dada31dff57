#!/usr/bin/env python3
"""How soon a load reaches its steady pace after it starts: the least `--settle` that lets a
probe meet the load as it will stay. Runs `backburner bench` with an instant probe and a
long settle, samples the sectors read from every loop device every 50 ms meanwhile, finds
each start of the load (a rise after at least 0.3 s of near silence) and reports, per start,
the read rate per 100 ms and the time to 80% of that start's steady pace (the median rate
from 0.5 s until the load stops).

Usage: sudo .venv/bin/python benchmarks/load_ramp.py [--load L] [--device D] [--settle S]
       [--trials N] [--scheduler S ...]
"""

from __future__ import annotations

import argparse
import glob
import statistics
import subprocess
import sys
import tempfile
import time

STEP_S = 0.05
QUIET_MB_S = 5.0
QUIET_STEPS = 6


def sample(argv: list[str]) -> tuple[list[tuple[float, int]], int]:
    """(monotonic time, bytes read by all loop devices) every STEP_S while argv runs."""
    proc = subprocess.Popen(argv)  # noqa: S603 - our own command line
    out: list[tuple[float, int]] = []
    while proc.poll() is None:
        total = 0
        for stat in glob.glob("/sys/block/loop*/stat"):
            try:
                with open(stat) as f:
                    total += int(f.read().split()[2]) * 512
            except (OSError, ValueError, IndexError):
                continue  # a loop device detached between the glob and the read
        out.append((time.monotonic(), total))
        time.sleep(STEP_S)
    return out, proc.returncode


def starts(rates: list[float]) -> list[list[float]]:
    """Each run of the load: the rates from a rise after silence until the next silence."""
    runs: list[list[float]] = []
    quiet, current = QUIET_STEPS, None
    for r in rates:
        if r < QUIET_MB_S:
            quiet += 1
            if quiet >= QUIET_STEPS and current:
                runs.append(current)
                current = None
            continue
        if current is None and quiet >= QUIET_STEPS:
            current = []
        if current is not None:
            current.append(r)
        quiet = 0
    return [run for run in runs if len(run) * STEP_S >= 1.0]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--load", default="readers:10:seq")
    ap.add_argument("--device", default="testbed:4G")
    ap.add_argument("--settle", type=float, default=3.0)
    ap.add_argument("--trials", type=int, default=4)
    ap.add_argument("--scheduler", action="append")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bb-ramp-") as tmp:
        argv = [sys.executable, "-m", "backburner", "bench", "--device", args.device,
                "--load", args.load, "--probe", "instant=true", "--settle", str(args.settle),
                "--policy", "default", "-r", str(args.trials), "--no-html", "-q"]
        for sched in args.scheduler or ["mq-deadline", "bfq"]:
            argv += ["--scheduler", sched]
        print("$ backburner " + " ".join(argv[3:]), flush=True)
        argv += ["-o", f"{tmp}/ramp.db"]
        samples, status = sample(argv)
    if status != 0:
        return status
    rates = [(b1 - b0) / (t1 - t0) / 1e6
             for (t0, b0), (t1, b1) in zip(samples, samples[1:], strict=False)]
    reach = []
    print("MB/s per 100 ms from each start of the load; time to 80% of its steady pace")
    for run in starts(rates):
        buckets = [statistics.fmean(run[i:i + 2]) for i in range(0, len(run), 2)]
        steady = statistics.median(run[int(0.5 / STEP_S):])
        t80 = next(i for i, r in enumerate(run) if r >= 0.8 * steady) * STEP_S
        reach.append(t80)
        print(f"{t80:4.2f} s  steady {steady:5.0f}  " +
              " ".join(f"{b:4.0f}" for b in buckets[:20]))
    if reach:
        print(f"{len(reach)} starts: 80% of the steady pace after {statistics.median(reach):.2f} s "
              f"(median), {max(reach):.2f} s (max)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
