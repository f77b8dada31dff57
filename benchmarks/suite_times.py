#!/usr/bin/env python3
"""Where the test suite's time and CPU go, from the file `BACKBURNER_TEST_TIMES=FILE
scripts/test` writes (tests/conftest.py: a line per test phase, its seconds, outcome,
nodeid and CPU seconds).

    .venv/bin/python benchmarks/suite_times.py FILE [--top N]

Prints, as a Markdown table, the files that took the most wall time and the most CPU
(the suite's own process and the children it reaped: QEMU's CPU lands on the phase that
stops its guest), with each part's total. No pass/fail: a profile for keeping the suite
inside its time (docs/measurements/overhead.md).
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict


def load(path: str) -> dict[str, list[float]]:
    """File -> [wall s, CPU s, phases without a CPU figure]."""
    per: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    with open(path) as f:
        for line in f:
            fields = line.rstrip("\n").split("\t")
            if len(fields) < 4:
                continue
            row = per[fields[3].split("::")[0]]
            row[0] += float(fields[0])
            if len(fields) > 4 and fields[4]:
                row[1] += float(fields[4])
            else:
                row[2] += 1
    return per


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file")
    ap.add_argument("--top", type=int, default=15)
    args = ap.parse_args(argv)
    per = load(args.file)
    for part, keep in (("host and alone", lambda f: not f.startswith("tests/vm/")),
                       ("guest", lambda f: f.startswith("tests/vm/"))):
        rows = {f: r for f, r in per.items() if keep(f)}
        if not rows:
            continue
        wall, cpu = sum(r[0] for r in rows.values()), sum(r[1] for r in rows.values())
        print(f"\n{part}: {len(rows)} files, {wall:.0f} s of test time, {cpu:.0f} CPU-s\n")
        print("| file | wall s | CPU s |\n| --- | --: | --: |")
        for f, r in sorted(rows.items(), key=lambda kv: (-kv[1][1], -kv[1][0]))[:args.top]:
            print(f"| {f} | {r[0]:.1f} | {r[1]:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
