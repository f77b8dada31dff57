#!/usr/bin/env python3
"""The two questions the original office experiment left open, answered from stored results
of `backburner bench --preset office-hdd` (or any run with flatpak-loop and flatpak-api):

1. How much slower do the installs get with the idle IO class? Install rounds per minute
   of each load, per scheduler and policy, over the windows the load ran in (the settle time
   and the office start of every counted trial: the price is paid while something else
   wants the disk), with a 95% bootstrap interval over trials, and the idle class's rate
   relative to the default's.
2. Do the long-lived installer (flatpak-api) and the shell loop (flatpak-loop) hurt the
   start differently? The ratio of the start's medians, api / loop, per scheduler and
   policy, with the 95% interval `report` uses and a verdict against ±10%: same, different,
   or cannot tell at this n.

Usage: .venv/bin/python benchmarks/office_questions.py RESULTS.db [--markdown]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from backburner import stats
from backburner.base.errors import BackburnerError
from backburner.report import data

LOOP, API = "flatpak-loop", "flatpak-api"
TOLERANCE = 0.10
RESAMPLES = 10_000
#: The fewest trials a side needs for a 95% interval (the median's, distribution-free): a
#: bootstrap of fewer is an interval in name only.
MIN_N = stats.min_trials(0.95)
#: "are they different?" is two-sided: an interval whose upper end alone is in the band
#: ("at most") cannot tell
VERDICT = {"indistinguishable": "same", "slower": "different (api slower)",
           "faster": "different (api faster)", "at-most": "cannot tell at this n",
           "undecided": "cannot tell at this n"}


def rounds_and_seconds(cell: data.CellData) -> tuple[np.ndarray, np.ndarray]:
    """Install rounds finished and seconds the load ran, per counted trial that has them."""
    rounds, seconds = [], []
    for t in cell.counted:
        bulk = t["extra"].get("bulk")
        if isinstance(bulk, dict) and bulk.get("seconds") and "rounds" in bulk:
            rounds.append(float(bulk["rounds"]))
            seconds.append(float(bulk["seconds"]))
    return np.array(rounds), np.array(seconds)


def rate_ci(rounds: np.ndarray, seconds: np.ndarray, rng: np.random.Generator
            ) -> tuple[float, float, float]:
    """Rounds per minute over all windows (total rounds / total time), and a percentile
    bootstrap interval resampling whole trials."""
    point = 60.0 * rounds.sum() / seconds.sum()
    idx = rng.integers(0, len(rounds), size=(RESAMPLES, len(rounds)))
    boot = 60.0 * rounds[idx].sum(axis=1) / seconds[idx].sum(axis=1)
    lo, hi = np.quantile(boot, [0.025, 0.975])
    return point, float(lo), float(hi)


def ratio_ci(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray],
             rng: np.random.Generator) -> tuple[float, float, float]:
    """rate(a) / rate(b), each side resampled on its own (independent cells)."""
    (ra, sa), (rb, sb) = a, b
    ia = rng.integers(0, len(ra), size=(RESAMPLES, len(ra)))
    ib = rng.integers(0, len(rb), size=(RESAMPLES, len(rb)))
    with np.errstate(divide="ignore", invalid="ignore"):
        boot = (ra[ia].sum(axis=1) / sa[ia].sum(axis=1)) / (rb[ib].sum(axis=1)
                                                            / sb[ib].sum(axis=1))
    boot = boot[np.isfinite(boot)]
    point = (ra.sum() / sa.sum()) / (rb.sum() / sb.sum()) if rb.sum() else float("nan")
    if not boot.size:
        return point, float("nan"), float("nan")
    lo, hi = np.quantile(boot, [0.025, 0.975])
    return float(point), float(lo), float(hi)


def ok_times(cell: data.CellData) -> list[float]:
    return [t["wall_s"] for t in cell.counted if t["status"] == "ok"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("db")
    args = ap.parse_args()
    try:
        cells = data.load(args.db).cells
    except BackburnerError as err:
        print(f"office_questions.py: {err}", file=sys.stderr)
        return err.exit_status
    by = {(c.cell.scheduler, c.cell.load, c.cell.policy): c for c in cells}
    schedulers = list(dict.fromkeys(c.cell.scheduler for c in cells))
    policies = [p for p in dict.fromkeys(c.cell.policy for c in cells) if p != "-"]
    rng = np.random.default_rng(1)
    print("1. install rounds per minute while the office starts (95% CI over trials)\n")
    print("| scheduler | load | policy | trials | rounds/min [95% CI] | vs default [95% CI] |")
    print("| --- | --- | --- | --: | --: | --: |")
    for sched in schedulers:
        for load in (LOOP, API):
            default = by.get((sched, load, "default"))
            for policy in policies:
                cell = by.get((sched, load, policy))
                if cell is None:
                    continue
                rs = rounds_and_seconds(cell)
                if not len(rs[0]):
                    continue
                rate, lo, hi = rate_ci(*rs, rng)
                ci = f" [{lo:.1f}–{hi:.1f}]" if len(rs[0]) >= MIN_N else " (n too small)"
                rel = ""
                ref = rounds_and_seconds(default) if default is not None else None
                if ref is not None and policy != "default" and len(ref[0]):
                    r, rlo, rhi = ratio_ci(rs, ref, rng)
                    rel = (f"{r:.2f}× [{rlo:.2f}–{rhi:.2f}]"
                           if min(len(rs[0]), len(ref[0])) >= MIN_N else f"{r:.2f}×")
                print(f"| {sched} | {load} | {policy} | {len(rs[0])} | {rate:.1f}{ci} | "
                      f"{rel} |")
    print("\n2. the start under the long-lived installer vs the shell loop "
          f"(ratio of medians, api / loop, ±{TOLERANCE:.0%})\n")
    print("| scheduler | policy | loop median s (max) | api median s (max) | "
          "api / loop [95% CI] | verdict |")
    print("| --- | --- | --: | --: | --: | --- |")
    for sched in schedulers:
        for policy in policies:
            loop, api = by.get((sched, LOOP, policy)), by.get((sched, API, policy))
            if loop is None or api is None:
                continue
            a, b = ok_times(api), ok_times(loop)
            if not a or not b:
                continue
            r = stats.ratio_of_medians(a, b, resamples=RESAMPLES, seed=1)
            if min(len(a), len(b)) >= MIN_N:
                ci, verdict = f" [{r.lo:.2f}–{r.hi:.2f}]", VERDICT[str(stats.classify(
                    r, TOLERANCE))]
            else:
                ci, verdict = "", "cannot tell at this n (too few trials for an interval)"
            print(f"| {sched} | {policy} | {np.median(b):.2f} ({max(b):.1f}) | "
                  f"{np.median(a):.2f} ({max(a):.1f}) | {r.ratio:.2f}×{ci} | {verdict} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
