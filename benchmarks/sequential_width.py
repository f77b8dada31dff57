#!/usr/bin/env python3
"""How wide is the sequential interval `bench` stops on, against a fixed-n one, and how many
trials does a cell need to be decided?

Prints three Markdown tables (figures in docs/design/statistics.md, "Why a confidence sequence"):

1. per trial count n: the order statistics bounding a median at 97.5% -- fixed n (exact
   binomial), the shipped confidence sequence (`stats.accepted_counts`), and a
   group-sequential boundary with the horizon fixed at --max-runs and Pocock-like alpha
   spending over every round as a look, computed exactly (the count below the true median is
   a simple symmetric random walk, so the chance of ever leaving the boundary follows by
   dynamic programming);
2. the half-width of the ratio's sequential intervals in units of sigma (median over
   simulated lognormal pairs): the two medians' box (`stats.ratio_cs`) and the rounds'
   paired ratios (`stats.paired_ratio_cs`, what `bench` ships), against the normal
   approximation of a fixed-n interval;
3. the trials a cell needs to be called "indistinguishable" at a given spread, tolerance and
   true ratio: (c sigma / margin)^2 with c the constant of table 2, for both intervals.

Pure computation, a few seconds. Usage: .venv/bin/python benchmarks/sequential_width.py
[--horizon N] [--pairs N]
"""

from __future__ import annotations

import argparse
import math

import numpy as np
from scipy.stats import binom

from backburner import stats

COUNTS = (10, 15, 20, 30, 40, 60)
CONFIDENCE = 0.975  # each median's, so that the ratio's box holds with 95%


def fixed_first(n: int, confidence: float) -> int:
    """The largest k with P(B < k) + P(B > n - k) <= alpha, B ~ Binomial(n, 1/2)."""
    best = 0
    for k in range(1, n // 2 + 1):
        if 2 * binom.cdf(k - 1, n, 0.5) <= 1 - confidence:
            best = k
    return best


def group_sequential_first(horizon: int, confidence: float) -> dict[int, int]:
    """k_n for n = 1..horizon: the boundary keeping counts k_n..n-k_n, each k_n the largest
    that keeps the exact chance of having left the boundary by n under
    alpha * log(1 + (e - 1) n / horizon)."""
    alpha = 1 - confidence
    mass = np.array([1.0])
    spent = 0.0
    first: dict[int, int] = {}
    for n in range(1, horizon + 1):
        step = np.zeros(n + 1)
        step[:-1] += mass / 2
        step[1:] += mass / 2
        budget = alpha * math.log(1 + (math.e - 1) * n / horizon)
        k = 0
        while k + 1 <= n - (k + 1):
            out = step[: k + 1].sum() + step[n - k:].sum()
            if spent + out > budget:
                break
            k += 1
        if k:
            spent += step[:k].sum() + step[n - k + 1:].sum()
            step[:k] = 0.0
            step[n - k + 1:] = 0.0
        mass = step
        first[n] = k
    return first


def half_width(n: int, pairs: int, rng: np.random.Generator, paired: bool) -> float:
    """Median half-width (log units, per unit sigma) of a sequential ratio interval: the
    two medians' box, or the rounds' paired ratios."""
    sigma = 0.1
    widths = []
    for _ in range(pairs):
        a, b = rng.lognormal(0, sigma, n), rng.lognormal(0, sigma, n)
        if paired:
            r = stats.paired_ratio_cs(stats.pair_rounds(
                {i: (float(x), False) for i, x in enumerate(a)},
                {i: (float(x), False) for i, x in enumerate(b)}))
        else:
            r = stats.ratio_cs(a, b)
        widths.append(math.log(r.hi / r.lo) / 2 if r.lo > 0 and math.isfinite(r.hi)
                      else math.inf)
    return float(np.median(widths)) / sigma


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--horizon", type=int, default=60)
    ap.add_argument("--pairs", type=int, default=300)
    args = ap.parse_args()
    gs = group_sequential_first(args.horizon, CONFIDENCE)
    print(f"Median bounds at {CONFIDENCE:.1%}: x_(k) .. x_(n-k+1)\n")
    print(f"| n | fixed n | sequence (shipped) | group-sequential, horizon {args.horizon} |")
    print("|--:|--:|--:|--:|")
    for n in COUNTS:
        seq = stats.accepted_counts(n, CONFIDENCE)
        print(f"| {n} | {fixed_first(n, CONFIDENCE)} | {seq[0] if seq else 0} | "
              f"{gs.get(n, '-')} |")
    rng = np.random.default_rng(5)
    print(f"\nRatio half-width / sigma, median of {args.pairs} lognormal pairs\n")
    print("| n | two medians' box | × √n | paired rounds (shipped) | × √n "
          "| fixed-n normal approximation |")
    print("|--:|--:|--:|--:|--:|--:|")
    box, paired = [], []
    for n in COUNTS:
        h = half_width(n, args.pairs, rng, paired=False)
        p = half_width(n, args.pairs, rng, paired=True)
        box.append(h * math.sqrt(n))
        paired.append(p * math.sqrt(n))
        fixed = 1.96 * math.sqrt(2) * math.sqrt(math.pi / 2) / math.sqrt(n)
        print(f"| {n} | {h:.2f} | {h * math.sqrt(n):.1f} | {p:.2f} | {p * math.sqrt(n):.1f} "
              f"| {fixed:.2f} |")
    # from 20 trials on, where the constants settle
    constants = {"box": float(np.median(box[2:])), "paired": float(np.median(paired[2:]))}
    print("\nTrials a cell needs to be called indistinguishable: (c σ / margin)², "
          + ", ".join(f"c = {c:.1f} ({name})" for name, c in constants.items()) + "\n")
    print("| tolerance | true ratio | interval | σ 0.05 | σ 0.10 | σ 0.15 | σ 0.25 |")
    print("|--:|--:|---|--:|--:|--:|--:|")
    for tol in (0.1, 0.2, 0.5):
        for ratio in (1.0, 1.05, 1.1):
            margin = min(math.log((1 + tol) / ratio), math.log(ratio / (1 - tol)))
            for name, c in constants.items():
                cells = [f"{(c * s / margin) ** 2:.0f}" if margin > 0 else "never"
                         for s in (0.05, 0.10, 0.15, 0.25)]
                print(f"| ±{tol:.0%} | {ratio} | {name} | " + " | ".join(cells) + " |")

if __name__ == "__main__":
    main()
