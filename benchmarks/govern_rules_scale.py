#!/usr/bin/env python3
"""How does reading rules scale with their number? (target: linear; 20,000 rules checked
in seconds, not the 20 s to check and 81 s to combine it took when the index searched the
list of rules for every name.)

For each size, one rule file of that many rules is written (a private, root-owned rules
directory), in three shapes: every rule names its program (`names`); one rule in ten names
none and matches by its path instead, so every name's candidates are merged with those
(`mixed`); every rule names its program and has a cmdline pattern of its own with a
repetition, so each is probed for pathological backtracking when read (`cmdline`). The
phases are timed in this process (CPU seconds: parse, combine, the breadth check) and the
whole command as a user runs it (`backburner govern check DIR --no-defaults`: its CPU
seconds and wall seconds, Python's start included). The load average is printed beside.

Usage: .venv/bin/python benchmarks/govern_rules_scale.py [--rules 5000,10000,20000]
    [--shapes names,mixed,cmdline]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from backburner.govern import broad, rulefile

SHAPES: dict[str, Callable[[int], str]] = {
    "names": lambda i: f'match = {{ comm = "bbscale{i}" }}',
    "mixed": lambda i: (f'match = {{ exe = "/opt/bbscale/{i}/*" }}' if i % 10 == 9 else
                        f'match = {{ comm = "bbscale{i}" }}'),
    "cmdline": lambda i: f"match = {{ comm = \"bbscale{i}\", cmdline = '--job={i}( \\S+)*$' }}",
}


def rule_file(n: int, shape: str) -> str:
    return "".join(f'[[rule]]\nname = "r{i}"\n{SHAPES[shape](i)}\nio = "idle"\n\n'
                   for i in range(n))


def phases(text: str) -> dict[str, float]:
    """CPU seconds of each phase of reading one rule file (as `govern check` reads it)."""
    rulefile._VERDICTS.clear()  # every pattern probed, as in a fresh process
    out = {}
    t = time.process_time()
    parsed = rulefile.parse_file(text, "scale.toml")
    out["parse"] = time.process_time() - t
    t = time.process_time()
    ruleset, errors = rulefile.combine([parsed])
    out["combine"] = time.process_time() - t
    t = time.process_time()
    errors += broad.broad_errors(ruleset)
    out["broad"] = time.process_time() - t
    assert not parsed.errors and not errors, (parsed.errors + errors)[:3]
    return out


def check_command(text: str) -> tuple[float, float]:
    """CPU and wall seconds of `backburner govern check DIR --no-defaults` on the file."""
    root = Path(tempfile.mkdtemp(prefix="bb-scale-"))
    try:
        rules = root / "rules"
        rules.mkdir(mode=0o755)
        (rules / "scale.toml").write_text(text)
        (rules / "scale.toml").chmod(0o644)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "backburner", "govern", "check", str(rules),
                            "--no-defaults"], capture_output=True, text=True, timeout=3600)
        wall = time.perf_counter() - t
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if r.returncode != 0:
            raise SystemExit(f"govern check failed ({r.returncode}): {r.stderr[-500:]}")
        return (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime), wall
    finally:
        shutil.rmtree(root)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rules", default="5000,10000,20000", help="sizes, comma-separated")
    ap.add_argument("--shapes", default=",".join(SHAPES), help="shapes, comma-separated")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("govern_rules_scale: run as root (govern check reads only root's rule files)",
              file=sys.stderr)
        return 77
    print(f"load average {Path('/proc/loadavg').read_text().split(' ', 3)[:3]}")
    print("| rules | shape | parse | combine | breadth | `govern check`: CPU, wall | CPU per "
          "rule |")
    print("| --: | --- | --: | --: | --: | --: | --: |")
    for n in (int(x) for x in args.rules.split(",")):
        for shape in args.shapes.split(","):
            text = rule_file(n, shape)
            t = phases(text)
            cpu, wall = check_command(text)
            print(f"| {n:,} | {shape} | {t['parse']:.2f} s | {t['combine']:.2f} s | "
                  f"{t['broad']:.2f} s | {cpu:.2f} s, {wall:.2f} s | {cpu / n * 1e3:.2f} ms |",
                  flush=True)
    print(f"load average {Path('/proc/loadavg').read_text().split(' ', 3)[:3]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
