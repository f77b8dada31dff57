#!/usr/bin/env python3
"""Within a run's horizon, how much sooner does the group-sequential interval decide a cell
than the confidence sequence?

For each tolerance, spread sigma of the per-round log ratios and true ratio, simulates
studies of normal per-round log ratios (lognormal start-up times, paired by round) and
stops each one at the first count from --min-runs to --max-runs where the verdict is
decided, once with the confidence sequence (`stats.paired_ratio_cs`, what a run without a
horizon gets) and once with the group-sequential design (`stats.groupseq`, what `bench`
ships when it knows max_runs), and prints a Markdown table: the share of studies decided
by --max-runs, the mean trials a study took, and the share whose last interval covers the
truth. For scale, the share a fixed-n t interval at --max-runs would decide (no looks
before it, so no error rate spent on them: the most any interval at that count could do).
The out-of-reach guard is left out, to compare the intervals alone.

Usage: .venv/bin/python benchmarks/group_sequential.py [--studies N] [--min-runs N]
       [--max-runs N]
The defaults (2000 studies per row, the quick preset's 8 to 24 trials) take under a
minute on the development VM. Figures: docs/bench.md, "Why a group-sequential interval".
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from scipy.stats import t

from backburner import stats
from backburner.stats.simulation import wrong_call

TOLERANCES = (0.10, 0.20)
SIGMAS = (0.09, 0.13, 0.18)
RATIOS = (1.0, 1.05, 1.10)


def run(d: np.ndarray, lo: int, hi: int, tolerance: float,
        design: stats.Design | None) -> tuple[int, bool, stats.RatioCI]:
    """Trials, whether decided, and the last interval of one study."""
    for n in range(lo, hi + 1):
        none = np.zeros(n, dtype=bool)
        v = stats.paired_verdict(stats.Pairs(d[:n], none, none), tolerance=tolerance,
                                 design=design)
        if v.kind != stats.VerdictKind.INCONCLUSIVE or n == hi:
            return n, v.kind != stats.VerdictKind.INCONCLUSIVE, v.ratio
    raise AssertionError("unreachable")


def fixed_t(d: np.ndarray, tolerance: float) -> bool:
    n = d.size
    half = t.ppf(0.975, n - 1) * d.std(ddof=1) / math.sqrt(n)
    r = stats.RatioCI(math.exp(d.mean()), math.exp(d.mean() - half),
                      math.exp(d.mean() + half), 0.95)
    return stats.classify(r, tolerance) != stats.VerdictKind.INCONCLUSIVE


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--studies", type=int, default=2000)
    ap.add_argument("--min-runs", type=int, default=8)
    ap.add_argument("--max-runs", type=int, default=24)
    args = ap.parse_args()
    lo, hi = args.min_runs, args.max_runs
    design = stats.Design(lo, hi)
    started = time.monotonic()
    print(f"{args.studies} studies per row, {lo} to {hi} pairs, looks at "
          f"{', '.join(map(str, design.looks))}; decided by {hi} / mean trials / coverage\n")
    print("| tolerance | sigma | ratio | confidence sequence | group-sequential (shipped) "
          f"| fixed-n t at {hi}: decided |")
    print("|--:|--:|--:|--:|--:|--:|")
    for tolerance in TOLERANCES:
        for sigma in SIGMAS:
            for ratio in RATIOS:
                rng = np.random.default_rng(int(1000 * tolerance + 100 * sigma + ratio * 10))
                studies = rng.normal(math.log(ratio), sigma, (args.studies, hi))
                cells = []
                for kind in (None, design):
                    runs = [run(d, lo, hi, tolerance, kind) for d in studies]
                    decided = sum(r[1] for r in runs) / len(runs)
                    trials = sum(r[0] for r in runs) / len(runs)
                    covered = sum(r[2].lo <= ratio <= r[2].hi for r in runs) / len(runs)
                    wrong = sum(wrong_call(stats.classify(r[2], tolerance), ratio, tolerance)
                                for r in runs) / len(runs)
                    assert wrong <= 0.05, (tolerance, sigma, ratio, kind, wrong)
                    cells.append(f"{decided:.0%} / {trials:.1f} / {covered:.1%}")
                best = sum(fixed_t(d, tolerance) for d in studies) / len(studies)
                print(f"| ±{tolerance:.0%} | {sigma:g} | {ratio:g} | {cells[0]} | {cells[1]} "
                      f"| {best:.0%} |", flush=True)
    print(f"\n{time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
