#!/usr/bin/env python3
"""How long a load must run before the probe starts, under BFQ: the quick preset's start
(Python importing a few stdlib packages) under its 10 sequential readers, one bench run per
`--settle` value, the readers at the default IO class (as the probe) and at the idle class
(the background policy) beside it. Prints, per settle, each cell's median start and its
ratio to the unloaded median of the same run, with every loaded trial's time.

BFQ merges a queue made within 0.6 s of the last one made, in the same group at the same
IO class and level, into that one (stable merging): a start that soon after the readers'
start is served as part of a reader. The background policy's readers are at another
class, so they are the control.

Usage: sudo .venv/bin/python benchmarks/settle_sweep.py [--settle S ...] [--trials N]
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile

from backburner.bench import presets

SETTLES = (0.25, 0.5, 0.55, 0.65, 0.75, 1.0, 2.0)


def run(settle: float, trials: int, db: str) -> int:
    argv = [sys.executable, "-m", "backburner", "bench", "--device", "testbed:4G",
            "--probe", f"python={presets.PYTHON_PROBE}", "--load", "none",
            "--load", "readers:10:seq", "--scheduler", "bfq", "--policy", "default",
            "--policy", "background", "--settle", str(settle), "-r", str(trials),
            "--no-html", "-q", "-o", db]
    return subprocess.run(argv, stdout=subprocess.DEVNULL).returncode  # noqa: S603 - ours


def times(db: str) -> dict[str, list[tuple[str, float | None]]]:
    """policy -> [(status, seconds)] of the counted trials ("-" for the unloaded cell)."""
    con = sqlite3.connect(db)
    out: dict[str, list[tuple[str, float | None]]] = {}
    for policy, status, wall in con.execute(
            "select c.policy, t.status, t.wall_s from trials t join cells c on c.id = t.cell_id"
            " where t.warmup = 0 order by t.id"):
        out.setdefault(policy, []).append((status, wall))
    con.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--settle", type=float, action="append")
    ap.add_argument("--trials", type=int, default=6)
    args = ap.parse_args()
    if any(not 0 <= s <= 60 for s in args.settle or []) or args.trials < 1:
        ap.error("--settle takes seconds from 0 to 60, --trials 1 or more")
    print("| settle s | unloaded median s | readers default: median (× unloaded), trials s "
          "| readers background: median (× unloaded), trials s |")
    print("| --: | --: | :-- | :-- |")
    with tempfile.TemporaryDirectory(prefix="bb-settle-") as tmp:
        for settle in args.settle or SETTLES:
            db = f"{tmp}/settle-{settle}.db"
            status = run(settle, args.trials, db)  # a timed-out trial fails the run
            got = times(db) if os.path.exists(db) else {}
            unloaded = [w for s, w in got.get("-", []) if s == "ok" and w is not None]
            if not unloaded:  # bench refused or stopped before an unloaded start
                print(f"settle_sweep.py: bench measured no unloaded start at --settle "
                      f"{settle:g} (status {status}); its message is above", file=sys.stderr)
                return status or 1
            base = statistics.median(unloaded)
            cols = []
            for policy in ("default", "background"):
                rows = got.get(policy, [])
                ok = [w for s, w in rows if s == "ok" and w is not None]
                shown = " ".join(f"{w:.2f}" if s == "ok" and w is not None else s
                                 for s, w in rows)
                cols.append(f"{statistics.median(ok):.2f} ({statistics.median(ok) / base:.2f}×),"
                            f" {shown}" if ok else shown or "–")
            print(f"| {settle:g} | {base:.3f} | {cols[0]} | {cols[1]} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
