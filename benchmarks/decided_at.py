#!/usr/bin/env python3
"""At which look would a run until decided have stopped each cell, at other tolerances?

For every loaded cell of the given result databases (each one run until decided) and each
tolerance: the first look of the run's group-sequential design (`stats.groupseq`, planned
from its --min-runs and --max-runs) whose interval decides the cell, its verdict and
interval, and how many seconds after the run's start that look's last trial ended. The
design holds at every look at once, so a run stopping on another tolerance would have
stopped at that look with that interval; the time is an upper bound (such a run skips the
slots of the cells it has stopped, so its rounds are shorter). Pure reading.

Usage: .venv/bin/python benchmarks/decided_at.py [--tolerance T ...] RESULTS.db [...]
Figures: docs/benchmarks.md ("The quick preset").
"""

from __future__ import annotations

import argparse

from backburner import report, stats
from backburner.report import summary


def first_look(pairs: stats.Pairs, design: stats.Design,
               tolerance: float) -> tuple[int, stats.Verdict] | None:
    for look in design.looks:
        if look > pairs.n:
            return None
        seen = stats.Pairs(pairs.d[:look], pairs.open_above[:look], pairs.open_below[:look])
        v = stats.paired_verdict(seen, tolerance=tolerance, design=design)
        if v.kind != stats.VerdictKind.INCONCLUSIVE:
            return look, v
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tolerance", type=float, action="append")
    ap.add_argument("databases", nargs="+")
    args = ap.parse_args()
    print("| tolerance | database | cell | decided at | verdict [CI] | seconds after the start |")
    print("|--:|---|---|--:|---|--:|")
    for tolerance in args.tolerance or [0.10, 0.15, 0.20, 0.25]:
        for path in args.databases:
            data = report.load(path)
            design = summary.horizon(data, 0.95)
            if design is None:
                raise SystemExit(f"{path}: not one run until decided")
            start = data.runs[0].started_at
            for cell in data.cells:
                base = data.baseline_of(cell)
                if cell.unloaded or base is None:
                    continue
                mine, theirs = cell.timed_by_round(), base.timed_by_round()
                pairs = stats.pair_rounds(mine, theirs)
                found = first_look(pairs, design, tolerance)
                if found is None:
                    print(f"| ±{tolerance:.0%} | {path} | {cell.label} | - | undecided | - |")
                    continue
                look, v = found
                last = sorted(set(mine) & set(theirs))[look - 1]
                ended = max(float(t["ended_at"]) for c in (cell, base) for t in c.mode_trials()
                            if (int(t["run_id"]), int(t["round"])) == last)
                r = v.ratio
                print(f"| ±{tolerance:.0%} | {path} | {cell.label} | {look} | {v.kind.value} "
                      f"{r.ratio:.2f} [{r.lo:.2f}–{r.hi:.2f}] | {ended - start:.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
