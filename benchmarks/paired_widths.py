#!/usr/bin/env python3
"""How much narrower is the paired sequence than the two medians' box, on real runs?

For every loaded cell of the given result databases: the median per-round ratio with its
95% paired confidence sequence (what `bench` stops on and `report` shows for a run until
decided), the ratio of medians with the box of the two medians' 97.5% sequences (what it
replaced), the log width of the box over the paired one, the spread (scaled MAD) of the
per-round log ratios, and about how many trials the paired sequence would need to decide
the cell at ±10% (`stats.trials_needed`). Pure reading, a second or two.

Usage: .venv/bin/python benchmarks/paired_widths.py RESULTS.db [RESULTS.db ...]
Figures: docs/measurements/startup.md ("The quick preset").
"""

from __future__ import annotations

import math
import sys

import numpy as np

from backburner import report, stats


def main(paths: list[str]) -> int:
    if not paths:
        print(__doc__.strip().splitlines()[-2], file=sys.stderr)
        return 64
    print("| database | cell | n | paired [CI] | box [CI] | box / paired width "
          "| spread of d | trials needed |")
    print("|---|---|--:|---|---|--:|--:|--:|")
    for path in paths:
        data = report.load(path)
        for cell in data.cells:
            base = data.baseline_of(cell)
            if cell.unloaded or base is None or not cell.samples() or not base.samples():
                continue
            pairs = stats.pair_rounds(cell.timed_by_round(), base.timed_by_round())
            p = stats.paired_ratio_cs(pairs)
            b = stats.ratio_cs(cell.samples(), base.samples())
            finite = p.lo > 0 and b.lo > 0 and math.isfinite(p.hi) and math.isfinite(b.hi)
            width = f"{math.log(b.hi / b.lo) / math.log(p.hi / p.lo):.2f}" if finite else "-"
            spread = 1.4826 * float(np.median(np.abs(pairs.d - np.median(pairs.d))))
            needed = stats.trials_needed(pairs, 0.10, 0.95)
            print(f"| {path} | {cell.label} | {pairs.n} | {p.ratio:.2f} [{p.lo:.2f}–{p.hi:.2f}] "
                  f"| {b.ratio:.2f} [{b.lo:.2f}–{b.hi:.2f}] | {width} | {spread:.3f} "
                  f"| {needed if needed is not None else 'none'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
