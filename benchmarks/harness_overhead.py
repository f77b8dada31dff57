#!/usr/bin/env python3
"""How much does backburner's own timing add to a trial? Compared with hyperfine.

Times the same command with `bench.probes.time_probe` (what every bench trial uses: warm,
no load, no cache drop, no chroot) and with `hyperfine -N` (no shell), in one run, and
prints a Markdown table of medians, their spread and the ratio backburner / hyperfine:

1. `true`: nearly nothing to time, so the difference is the harness's own cost per spawn
   (Python's fork + pre-exec hook + wait4, against hyperfine's posix_spawn).
2. `sleep 0.05`: a ~50 ms probe that is stable even on a busy machine (a timer, not CPU
   work that other load would stretch), for the agreement of the two tools.

Usage: .venv/bin/python benchmarks/harness_overhead.py [--runs N] [--slow-runs N]
Takes well under two minutes. Exit status 0; 69 if hyperfine is not installed.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from backburner.bench import probes

WARMUP = 5


def quartiles(xs: list[float]) -> tuple[float, float, float]:
    q1, med, q3 = statistics.quantiles(xs, n=4, method="inclusive")
    return q1, med, q3


def time_backburner(argv: list[str], runs: int) -> tuple[list[float], float]:
    """Reported wall times (s) of `runs` probes, and the harness's wall-clock cost per call."""
    probe = probes.Probe.parse(shlex.join(argv)).resolve()
    for _ in range(WARMUP):
        probes.time_probe(probe, timeout=10)
    walls = []
    t0 = time.perf_counter()
    for _ in range(runs):
        result = probes.time_probe(probe, timeout=10)
        if result.status != "ok":
            raise SystemExit(f"probe {probe.text} ended {result.status}")
        walls.append(result.wall_s)
    per_call = (time.perf_counter() - t0) / runs
    return walls, per_call


def time_hyperfine(argv: list[str], runs: int) -> tuple[list[float], str]:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "hf.json")
        cmd = ["hyperfine", "-N", "--warmup", str(WARMUP), "--runs", str(runs),
               "--export-json", out, "--style", "none", shlex.join(argv)]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(out) as f:
            data = json.load(f)
    return data["results"][0]["times"], shlex.join(cmd).replace(out, "OUT.json")


def ms(x: float) -> str:
    return f"{x * 1e3:.3f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=200, help="runs of `true` per tool")
    ap.add_argument("--slow-runs", type=int, default=100, help="runs of the ~50 ms probe")
    args = ap.parse_args()
    if shutil.which("hyperfine") is None:
        print("hyperfine is not installed (apt-get install hyperfine)", file=sys.stderr)
        return 69

    cases = [(["true"], args.runs), (["sleep", "0.05"], args.slow_runs)]
    rows = []
    ratios = []
    for argv, runs in cases:
        bb, per_call = time_backburner(argv, runs)
        hf, hf_cmd = time_hyperfine(argv, runs)
        bq, hq = quartiles(bb), quartiles(hf)
        real = probes.Probe.parse(shlex.join(argv)).resolve().argv
        bb_cmd = f"probes.time_probe(Probe({real!r}), timeout=10)"
        rows.append((shlex.join(argv), "backburner", bb_cmd, runs, bq, per_call))
        rows.append((shlex.join(argv), "hyperfine", hf_cmd, runs, hq, None))
        ratios.append((shlex.join(argv), bq[1] / hq[1], bq[1] - hq[1]))

    print(f"Harness overhead, {time.strftime('%Y-%m-%d %H:%M')}, kernel {os.uname().release}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}\n")
    print("| probe | tool | command | runs | median ms | IQR ms | cost/call ms |")
    print("|---|---|---|---:|---:|---:|---:|")
    for probe, tool, cmd, runs, (q1, med, q3), per_call in rows:
        cost = ms(per_call) if per_call is not None else "-"
        print(f"| `{probe}` | {tool} | `{cmd}` | {runs} | {ms(med)} | {ms(q3 - q1)} | {cost} |")
    print()
    print("| probe | median ratio backburner / hyperfine | difference ms |")
    print("|---|---:|---:|")
    for probe, ratio, diff in ratios:
        print(f"| `{probe}` | {ratio:.3f} | {diff * 1e3:+.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
