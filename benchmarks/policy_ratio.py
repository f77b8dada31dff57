#!/usr/bin/env python3
"""One policy against another, cell by cell, in stored results: the ratio of the probe's
medians with its 95% interval (the statistics `report` uses). Written for govern's
end-to-end target: a governed cell within 10% of the same cell with `background`.

Usage: .venv/bin/python benchmarks/policy_ratio.py RESULTS.db [MORE.db ...] [--a govern]
    [--b background]
Prints one line per (probe, preparation, scheduler, load) that has both policies.
"""

from __future__ import annotations

import argparse
import sys

from backburner import stats
from backburner.base.errors import BackburnerError
from backburner.report import data


def ok_times(cell: data.CellData) -> list[float]:
    return [t["wall_s"] for t in cell.counted if t["status"] == "ok"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dbs", nargs="+")
    ap.add_argument("--a", default="govern")
    ap.add_argument("--b", default="background")
    args = ap.parse_args()
    for path in args.dbs:
        try:
            cells = data.load(path).cells
        except BackburnerError as err:
            print(f"policy_ratio.py: {err}", file=sys.stderr)
            return err.exit_status
        by_key = {(c.cell.probe, c.cell.prepare, c.cell.scheduler, c.cell.load,
                   c.cell.policy): c for c in cells}
        for (probe, prep, sched, load, policy), cell in by_key.items():
            other = by_key.get((probe, prep, sched, load, args.b))
            if policy != args.a or other is None:
                continue
            r = stats.ratio_of_medians(ok_times(cell), ok_times(other))
            print(f"{path}: {sched} · {load}: {args.a} / {args.b} = {r.ratio:.2f} "
                  f"[{r.lo:.2f}–{r.hi:.2f}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
