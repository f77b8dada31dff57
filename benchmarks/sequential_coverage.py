#!/usr/bin/env python3
"""Does stopping a cell once it is decided keep the intervals and verdicts honest?

Simulates many studies with a known truth (`backburner.stats.simulation`: a loaded cell and
its baseline, lognormal start-up times, the loaded median ``ratio`` times the baseline's),
each run under the stopping rule `bench` ships (`stats.stopping.decision`, checked after
every round) against the band a person notices for the start's length (±25% for a 0.2 s
start, ±10% for a 9 s one), and prints a Markdown table per start length and spread: how
often the interval the study ended with covers the true ratio, how often its call
("slower", "at most", "indistinguishable", "faster") was wrong, how its studies ended (on
its budget; given up out of reach, and of those how many the budget would have decided
after all), and the mean trials per cell. The same rule stopping on an unadjusted interval
(Student's t of the paired log ratios, valid at one fixed n) is shown beside it: the
negative control, what re-running and re-reading a fixed-count report amounts to.

Usage: .venv/bin/python benchmarks/sequential_coverage.py [--studies N] [--min-runs N]
       [--max-runs N] [--start S ...] [--sigma S ...] [--no-peeking]
The defaults (1000 studies per ratio, starts of 0.2 s and 9 s, spreads 0.05, 0.1 and 0.2,
min 8 and max 40 runs: the quick preset's budget) took about 15 minutes on the development
VM; exit status 0, or 1 if a coverage falls under the confidence or a wrong-call rate over 1
- confidence. Figures: docs/measurements/statistics.md.
"""

from __future__ import annotations

import argparse
import sys
import time

from backburner import stats
from backburner.stats.simulation import Outcome, simulate

RATIOS = (1.0, 1.05, 1.1, 1.2, 1.3, 3.0)


def row(name: str, out: Outcome) -> str:
    calls = ", ".join(f"{kind} {n}" for kind, n in sorted(out.calls.items()))
    return (f"| {out.ratio:g} | {name} | {out.coverage:.1%} | {out.wrong_rate:.1%} | "
            f"{calls} | {out.budget} | {out.out_of_reach} ({out.given_up_decidable}) | "
            f"{out.trials:.1f} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--studies", type=int, default=1000)
    ap.add_argument("--min-runs", type=int, default=8)
    ap.add_argument("--max-runs", type=int, default=40)
    ap.add_argument("--start", type=float, action="append",
                    help="the unloaded start's median, seconds (default 0.2 and 9)")
    ap.add_argument("--sigma", type=float, action="append")
    ap.add_argument("--no-peeking", action="store_true")
    args = ap.parse_args()
    rule = stats.Rule(args.min_runs, args.max_runs)
    ok = True
    started = time.monotonic()
    for start in args.start or [0.2, 9.0]:
        band = rule.band(start)
        for sigma in args.sigma or [0.05, 0.1, 0.2]:
            print(f"\n{start:g} s start (band ±{band.tolerance:.0%}, {band.basis}), lognormal "
                  f"sigma {sigma:g}, {args.studies} studies per ratio, min {rule.min_runs} / "
                  f"max {rule.max_runs} runs, confidence {rule.confidence:.0%}\n")
            print("| ratio | intervals | coverage | wrong calls | calls (studies) "
                  "| on budget | out of reach (decidable) | trials/cell |")
            print("|---|---|--:|--:|---|--:|--:|--:|")
            for ratio in RATIOS:
                seed = int(ratio * 1000 + sigma * 100 + start)
                out = simulate(rule, ratio, start_s=start, sigma=sigma,
                               studies=args.studies, seed=seed)
                ok &= out.coverage >= rule.confidence and \
                    out.wrong_rate <= 1 - rule.confidence
                print(row("paired sequence (shipped)", out), flush=True)
                if not args.no_peeking:
                    peek = simulate(rule, ratio, start_s=start, sigma=sigma,
                                    studies=args.studies, seed=seed, peeking=True)
                    print(row("unadjusted t, peeking", peek), flush=True)
    print(f"\n{time.monotonic() - started:.0f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
