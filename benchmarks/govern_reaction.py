#!/usr/bin/env python3
"""How fast does `govern` put a new matching program on the back burner? (target:
p50 < 1 ms, p99 < 5 ms from exec to idle IO class, measured from inside the child.)

A C driver forks N times; each child reads CLOCK_MONOTONIC and execs the probe, a program
the rule matches by name. The probe spins on ioprio_get(2) of its own thread until its IO
class is idle and prints the time since that clock reading: the execve itself (the kernel
sends the exec event from inside it) plus the daemon's reaction, as the child sees it. The
driver is the same binary under another name, so it is never governed itself; each child
starts with the driver's (default) IO class. Between probes the driver sleeps `--gap-ms`,
so every exec finds the daemon idle (a machine starts a few programs a second, not
thousands).

The same driver first measures the baseline without the daemon: exec until the program's
main() runs (the part of the reaction time that is the kernel's and the loader's).

Usage (as root): .venv/bin/python benchmarks/govern_reaction.py [--runs 1000] [--gap-ms 5]
    [--policy io|io-cpu|background] [--nice N] [--no-exec-filter]
Prints the percentiles; exit status 0, 69 without a C compiler.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys

import govern_lib as lib

POLICIES = {
    "io": 'io = "idle"\n',  # the IO class only: what the probe watches
    # With SCHED_IDLE too, the probe itself runs at the lowest CPU priority from the moment
    # it is changed: it notices the change only when nothing else wants a CPU, which on a
    # busy machine adds that wait to what it measures.
    "io-cpu": 'io = "idle"\ncpu = "idle"\n',
    "background": 'policy = "background"\n',  # + cgroup weights (a move per process)
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--gap-ms", type=float, default=5.0)
    ap.add_argument("--policy", choices=sorted(POLICIES), default="io")
    ap.add_argument("--nice", type=int, default=None,
                    help="run the daemon at this nice value (the unit uses -10)")
    ap.add_argument("--no-exec-filter", action="store_true",
                    help="the daemon takes every exec from the connector (the fallback)")
    args = ap.parse_args()
    lib.require_root()
    where = lib.private_dir()
    name = f"bbgovprobe{os.getpid() % 10000:04d}"
    daemon = None
    try:
        driver, probe = lib.compile_tools(where, name)
        rules = lib.probe_rules(where, name, "bench-reaction", POLICIES[args.policy])
        base = sorted(int(x) / 1e6
                      for x in lib.drive(driver, probe, args.runs, args.gap_ms, "start"))
        extra = ("--no-exec-filter",) if args.no_exec_filter else ()
        daemon = lib.Daemon(where, rules, *extra, nice=args.nice)
        mode = daemon.status()["exec_events"]
        cpu0 = daemon.cpu_s()
        out = "\n".join(lib.drive(driver, probe, args.runs, args.gap_ms, "probe"))
        cpu = daemon.cpu_s() - cpu0
        rss = daemon.rss_kib()
        code = daemon.stop()
        daemon = None
        if code != 0:
            print(f"the daemon ended with status {code}", file=sys.stderr)
            return 1
        values = [int(x) for x in out.split()]
        missed = sum(1 for v in values if v < 0)
        lat = sorted(v / 1e6 for v in values if v >= 0)
        print(f"govern reaction, {len(values)} execs of a matching program "
              f"(policy {args.policy}, {args.gap_ms:g} ms apart, exec events: {mode}), "
              "exec -> idle IO class seen from inside the child:")
        print("| p50 | p90 | p99 | max | mean | never idle (1 s) |")
        print("| --: | --: | --: | --: | --: | --: |")
        print(f"| {lib.percentile(lat, 50):.3f} ms | {lib.percentile(lat, 90):.3f} ms "
              f"| {lib.percentile(lat, 99):.3f} ms | {lat[-1]:.3f} ms "
              f"| {statistics.fmean(lat):.3f} ms | {missed} |")
        print(f"baseline without the daemon, exec until main() of the same program: p50 "
              f"{lib.percentile(base, 50):.3f} ms, p90 {lib.percentile(base, 90):.3f} ms, "
              f"p99 {lib.percentile(base, 99):.3f} ms")
        print(f"daemon CPU for the {len(values)} matches: {cpu * 1e3:.0f} ms "
              f"({cpu / max(1, len(values)) * 1e6:.0f} µs per governed process, with "
              f"journal, cgroups and status); RSS {rss} KiB")
        return 0
    finally:
        if daemon is not None:
            daemon.stop()
        shutil.rmtree(where, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
