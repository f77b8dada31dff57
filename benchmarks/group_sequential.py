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

A second table compares looks and spending on the same t interval (normal log ratios at
sigma 0.13, 8 to 24 pairs): a look at every round, every 4th round (shipped), every 4th
with alpha in proportion to the look's count; the share decided by 24 and the coverage (the
whole alpha to the t interval: the shipped design keeps a tenth for timeouts).

A third table measures what the t interval's normal model costs when the per-round log
ratios are not normal (heavy tails, skew, a second mode, rare large outliers): how often the
group-sequential interval a study stopped on (±10%) covers their mean (its estimand) and
their median (the ratio a typical round shows, the sequence's estimand).

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


#: Per-round log ratios that are not normal: name -> a sampler of n of them.
SHAPES = {
    "heavy tails (Student t, 3 df, scale 0.08)":
        lambda rng, n: 0.08 * rng.standard_t(3, n),
    "skewed (gamma start-ups, shape 2, against tight ones)":
        lambda rng, n: np.log(rng.gamma(2.0, 0.5, n)) - np.log(rng.gamma(50.0, 0.02, n)),
    "two modes (20% of rounds 1.5x, sigma 0.1)":
        lambda rng, n: rng.normal(0, 0.1, n) + (rng.random(n) < 0.2) * math.log(1.5),
    "rare outliers (10% of rounds 3x, sigma 0.1)":
        lambda rng, n: rng.normal(0, 0.1, n) + (rng.random(n) < 0.1) * math.log(3.0),
}


#: Looks and the weight of each look's alpha: name -> (looks, weights), for 8 to 24 pairs.
SPENDING = {
    "every round, even": (list(range(8, 25)), [1.0] * 17),
    "every 4th, even (shipped)": ([8, 12, 16, 20, 24], [1.0] * 5),
    "every 4th, in proportion to the count": ([8, 12, 16, 20, 24], [8, 12, 16, 20, 24]),
}


def spending(studies: int, sigma: float = 0.13) -> None:
    """The t interval at each look (no timeouts: the whole alpha), stopped on once
    decided: another spending rule, on the same interval, computed for all studies at
    once."""
    print("\n| looks, spending | ±10%, 1.0 | ±10%, 1.05 | ±20%, 1.10 | coverage |")
    print("|---|--:|--:|--:|--:|")
    for name, (looks, weights) in SPENDING.items():
        alphas = 0.05 * np.asarray(weights) / sum(weights)
        cells, worst = [], 1.0
        for tolerance, ratio in ((0.10, 1.0), (0.10, 1.05), (0.20, 1.10)):
            rng = np.random.default_rng(7)
            d = rng.normal(math.log(ratio), sigma, (studies, looks[-1]))
            edges = math.log(1 - tolerance), math.log(1 + tolerance)
            done = np.zeros(studies, dtype=bool)
            decided = np.zeros(studies, dtype=bool)
            covered = np.zeros(studies, dtype=bool)
            for n, alpha in zip(looks, alphas, strict=True):
                mean = d[:, :n].mean(axis=1)
                half = t.ppf(1 - alpha / 2, n - 1) * d[:, :n].std(axis=1, ddof=1) / math.sqrt(n)
                lo, hi = mean - half, mean + half
                ok = (lo > edges[1]) | (hi < edges[0]) | ((lo >= edges[0]) & (hi <= edges[1]))
                now = ~done & (ok | (n == looks[-1]))
                decided[now], done[now] = ok[now], True
                covered[now] = ((lo <= math.log(ratio)) & (math.log(ratio) <= hi))[now]
            cells.append(f"{decided.mean():.0%}")
            worst = min(worst, float(covered.mean()))
        print(f"| {name} | {' | '.join(cells)} | {worst:.1%} or more |", flush=True)


def shapes(studies: int, lo: int, hi: int, design: stats.Design) -> None:
    print("\n| per-round log ratios | mean | median | covers the mean | covers the median |")
    print("|---|--:|--:|--:|--:|")
    for i, (name, sample) in enumerate(SHAPES.items()):
        rng = np.random.default_rng(100 + i)
        big = sample(rng, 1_000_000)
        mean, median = float(np.mean(big)), float(np.median(big))
        ends = [run(sample(rng, hi), lo, hi, 0.10, design)[2] for _ in range(studies)]
        covers = [sum(r.lo <= math.exp(x) <= r.hi for r in ends) / studies
                  for x in (mean, median)]
        print(f"| {name} | {math.exp(mean):.3f}x | {math.exp(median):.3f}x "
              f"| {covers[0]:.1%} | {covers[1]:.1%} |", flush=True)


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
    spending(10 * args.studies)
    shapes(args.studies, lo, hi, design)
    print(f"\n{time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
