#!/usr/bin/env python3
"""What a command's start costs, for two or more installs of backburner side by side:
the wall and CPU time of `python -I -m backburner COMMAND`, and `-X importtime`'s
cumulative time of `backburner.cli` (building the parser), each install's runs alternated
one by one so that the load of a shared machine falls on all of them alike.

    .venv/bin/python benchmarks/cli_start.py [--runs N] NAME=PYTHON [NAME=PYTHON ...]

PYTHON is an interpreter that imports the backburner to measure (a venv's, e.g. one whose
site-packages holds a .pth naming a checkout's src/). Prints the medians per install and
command as a Markdown table, with the load average before and after; no pass/fail.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time

COMMANDS = (["run", "--", "true"], ["--version"])


def timed(argv: list[str]) -> tuple[float, float]:
    """(wall s, user + sys CPU s) of one run, from / with its output discarded."""
    t0 = time.perf_counter()
    with open(os.devnull, "w") as null:
        proc = subprocess.Popen(argv, cwd="/", stdout=null, stderr=null)
        _, _, usage = os.wait4(proc.pid, 0)
    proc.returncode = 0  # reaped here, for wait4's rusage
    return time.perf_counter() - t0, usage.ru_utime + usage.ru_stime


def cli_import_ms(python: str) -> float:
    """`-X importtime`'s cumulative microseconds of backburner.cli, in ms."""
    done = subprocess.run([python, "-I", "-X", "importtime", "-m", "backburner", "run", "--",
                           "true"], cwd="/", capture_output=True, text=True, check=True)
    for line in done.stderr.splitlines():
        fields = line.split("|")
        if len(fields) == 3 and fields[2].strip() == "backburner.cli" \
                and not fields[2].startswith("  "):
            return int(fields[1]) / 1000
    raise SystemExit(f"{python}: no backburner.cli in -X importtime's output")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("installs", nargs="+", metavar="NAME=PYTHON")
    args = ap.parse_args()
    installs = dict(spec.split("=", 1) for spec in args.installs)
    load_before = open("/proc/loadavg").read().strip()
    for python in installs.values():  # warm: bytecode written, files cached
        for cmd in COMMANDS:
            timed([python, "-I", "-m", "backburner", *cmd])
    wall: dict[tuple[str, str], list[float]] = {}
    cpu: dict[tuple[str, str], list[float]] = {}
    imports: dict[str, list[float]] = {}
    for i in range(args.runs):
        order = list(installs.items())
        if i % 2:
            order.reverse()
        for name, python in order:
            for cmd in COMMANDS:
                w, c = timed([python, "-I", "-m", "backburner", *cmd])
                wall.setdefault((name, " ".join(cmd)), []).append(w)
                cpu.setdefault((name, " ".join(cmd)), []).append(c)
            imports.setdefault(name, []).append(cli_import_ms(python))
    print(f"load average before: {load_before}; after: {open('/proc/loadavg').read().strip()}")
    print(f"\n| install | command | wall median | CPU median | importtime backburner.cli "
          f"(median of {args.runs}) |\n| --- | --- | --: | --: | --: |")
    for (name, cmd), times in wall.items():
        print(f"| {name} | `{cmd}` | {statistics.median(times) * 1000:.0f} ms | "
              f"{statistics.median(cpu[name, cmd]) * 1000:.0f} ms | "
              f"{statistics.median(imports[name]):.0f} ms |")


if __name__ == "__main__":
    main()
