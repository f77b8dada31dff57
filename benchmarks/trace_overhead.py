#!/usr/bin/env python3
"""What does tracing cost? Traced / untraced wall time of a syscall-heavy command, per engine.

Runs the same command through `backburner trace`'s own machinery (`record.Session`: the
launcher, the engine, the schedstat sampler) untraced and under every engine that can run
here, interleaved round by round so that a drift of the machine falls on all of them, and
prints a Markdown table:

* job wall: the command's own wall time as its launcher measured it (fork to wait4), so the
  tracer's start-up and post-processing are not in it; traced / untraced is the slowdown a
  traced program sees;
* per syscall: (traced - untraced) job wall / syscalls traced: the cost of one traced call;
* session: everything `trace record` takes for one run (tracer start, the run, reading the
  tracer's output), for planning.

The default command, `dd if=/dev/zero of=/dev/null bs=1 count=N`, makes two syscalls per
byte and little else. `auto` picks the cheapest available engine; this script is where
"cheapest" comes from.

Usage: .venv/bin/python benchmarks/trace_overhead.py [--rounds 5] [--bytes 100000]
(as root for perf; a minute or two). Exit status 0; 69 if no tracer can run.
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
import time

from backburner import __version__
from backburner.trace import engines, profile, record


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5, help="runs per engine (interleaved)")
    ap.add_argument("--bytes", type=int, default=100_000, help="dd byte count (2 syscalls each)")
    ap.add_argument("command", nargs="*", help="another command to time instead of dd")
    args = ap.parse_args()
    argv = args.command or ["dd", "if=/dev/zero", "of=/dev/null", "bs=1",
                            f"count={args.bytes}", "status=none"]
    names = [n for n, why in engines.status() if why is None and n != "none"]
    if not names:
        print("no tracer can run here (apt-get install strace linux-perf)", file=sys.stderr)
        return 69
    walls: dict[str, list[float]] = {n: [] for n in ["none", *names]}
    sessions: dict[str, list[float]] = {n: [] for n in walls}
    calls: dict[str, list[int]] = {n: [] for n in names}
    stacks = {n: record.Session(engines.ENGINES[n]()) for n in walls}
    for s in stacks.values():
        s.__enter__()
    try:
        for i in range(args.rounds):
            order = list(walls) if i % 2 == 0 else list(reversed(walls))
            for name in order:
                t0 = time.perf_counter()
                run, outcome = stacks[name].run(argv, i, traced=name != "none")
                sessions[name].append(time.perf_counter() - t0)
                if not outcome.ok:
                    raise SystemExit(f"{shlex.join(argv)} failed under {name}: "
                                     f"{outcome.describe()}")
                walls[name].append(outcome.wall_s)
                if name != "none":
                    merged = profile.merge_syscalls(run.threads)
                    calls[name].append(sum(s.calls for s in merged.values()))
    finally:
        for s in stacks.values():
            s.__exit__(None, None, None)

    base = statistics.median(walls["none"])
    print(f"backburner {__version__} trace overhead: `{shlex.join(argv)}`, "
          f"{args.rounds} interleaved rounds, medians\n")
    print("| engine | job wall s [min-max] | traced / untraced | syscalls | µs per syscall "
          "| session s |")
    print("| :-- | --: | --: | --: | --: | --: |")
    for name in walls:
        med = statistics.median(walls[name])
        spread = f"{med:.3f} [{min(walls[name]):.3f}-{max(walls[name]):.3f}]"
        n = statistics.median(calls[name]) if name in calls else None
        per_call = f"{(med - base) / n * 1e6:.1f}" if n else "-"
        print(f"| {name} | {spread} | {med / base:.2f}x | {f'{n:,.0f}' if n else '-'} | "
              f"{per_call} | {statistics.median(sessions[name]):.2f} |")
    cheapest = min(names, key=lambda n: statistics.median(walls[n]))
    print(f"\ncheapest here: {cheapest}; `auto` prefers {engines.PREFERENCE[0]} when it can "
          f"run ({' > '.join(engines.PREFERENCE)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
