"""What the lean core buys: the wall time of `backburner run -- true` (and `policies`,
`apply --dry-run`) against the bare job and against what importing the heavy optional
dependencies alone costs — the price every `run` would pay if they were not optional.

    .venv/bin/python benchmarks/startup_cost.py [--runs N]

Prints medians over N runs and the ratios; no pass/fail.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

PY = sys.executable
CASES = {
    "true (the bare job)": ["true"],
    "backburner run -- true": [PY, "-m", "backburner", "run", "--", "true"],
    "backburner run --io idle --cpu idle -- true":
        [PY, "-m", "backburner", "run", "--io", "idle", "--cpu", "idle", "--", "true"],
    "backburner policies": [PY, "-m", "backburner", "policies"],
    "backburner apply --unit x --dry-run": [PY, "-m", "backburner", "apply", "--unit", "x",
                                            "--dry-run"],
    "python -c pass": [PY, "-c", "pass"],
    "python -c 'import numpy, scipy.stats, matplotlib.figure, rich.console'":
        [PY, "-c", "import numpy, scipy.stats, matplotlib.figure, rich.console"],
}


def median_s(argv: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    for argv in CASES.values():  # warm the page cache and the bytecode caches
        subprocess.run(argv, stdout=subprocess.DEVNULL, check=True)
    results = {name: median_s(argv, args.runs) for name, argv in CASES.items()}
    base = results["python -c pass"]
    run = results["backburner run -- true"]
    heavy = results["python -c 'import numpy, scipy.stats, matplotlib.figure, rich.console'"]
    print(f"{'command':<72} {'median':>9} {'x python':>9}")
    for name, secs in results.items():
        print(f"{name:<72} {secs * 1000:7.1f}ms {secs / base:8.2f}x")
    print(f"\nbackburner run -- true costs {(run - base) * 1000:.1f} ms over a bare interpreter;"
          f" importing the report extras alone would add {(heavy - base) * 1000:.1f} ms "
          f"({heavy / run:.1f}x the whole of `run`).")


if __name__ == "__main__":
    main()
