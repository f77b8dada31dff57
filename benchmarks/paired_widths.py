#!/usr/bin/env python3
"""How much narrower are the paired intervals than the two medians' box, on real runs?

For every loaded cell of the given result databases: the ratio with its 95% group-sequential
interval planned from the run's --min-runs and --max-runs (what `bench` stops on and
`report` shows for one run until decided), the median per-round ratio with its 95% paired
confidence sequence (what several runs pooled get), the log width of the sequence over the
group-sequential one, the ratio of medians with the box of the two medians' 97.5%
sequences, the log width of the box over the sequence, the spread (scaled MAD) of the
per-round log ratios, and about how many trials a decision at ±10% would need
(`stats.trials_needed`, with the run's design). Pure reading, a second or two.

Usage: .venv/bin/python benchmarks/paired_widths.py RESULTS.db [RESULTS.db ...]
Figures: docs/benchmarks.md ("The quick preset").
"""

from __future__ import annotations

import math
import sys

import numpy as np

from backburner import report, stats
from backburner.report import summary


def _ci(r: stats.RatioCI | None) -> str:
    return "-" if r is None else f"{r.ratio:.2f} [{r.lo:.2f}–{r.hi:.2f}]"


def _over(wide: stats.RatioCI, narrow: stats.RatioCI | None) -> str:
    """The log width of one interval over another's; - where either is open."""
    if narrow is None or not all(r.lo > 0 and math.isfinite(r.hi) for r in (wide, narrow)):
        return "-"
    return f"{math.log(wide.hi / wide.lo) / math.log(narrow.hi / narrow.lo):.2f}"


def main(paths: list[str]) -> int:
    if not paths:
        print(__doc__.strip().splitlines()[-2], file=sys.stderr)
        return 64
    print("| database | cell | n | group-sequential [CI] | paired sequence [CI] "
          "| sequence / group-sequential width | box [CI] | box / sequence width "
          "| spread of d | trials needed |")
    print("|---|---|--:|---|---|--:|---|--:|--:|--:|")
    for path in paths:
        data = report.load(path)
        design = summary.horizon(data, 0.95)
        for cell in data.cells:
            base = data.baseline_of(cell)
            if cell.unloaded or base is None or not cell.samples() or not base.samples():
                continue
            pairs = stats.pair_rounds(cell.timed_by_round(), base.timed_by_round())
            g = stats.paired_ratio_gs(pairs, design) if design else None
            p = stats.paired_ratio_cs(pairs)
            b = stats.ratio_cs(cell.samples(), base.samples())
            spread = 1.4826 * float(np.median(np.abs(pairs.d - np.median(pairs.d))))
            needed = stats.trials_needed(pairs, 0.10, 0.95, design)
            print(f"| {path} | {cell.label} | {pairs.n} | {_ci(g)} | {_ci(p)} | {_over(p, g)} "
                  f"| {_ci(b)} | {_over(b, p)} | {spread:.3f} "
                  f"| {needed if needed is not None else 'none'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
