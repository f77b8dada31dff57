#!/usr/bin/env python3
"""Where does the reaction time of `govern` go? A timeline per exec, medians over N.

`govern_reaction.py` measures from inside the child: a probe that spins on ioprio_get
from its main() can see the change no earlier than its own main(). This shows what lies
behind that figure. The daemon runs with two of its functions wrapped to note the time
(CLOCK_MONOTONIC, as the probe's): when it reads the exec event, and its first
ioprio_set of each PID. The probe prints when its main() began. All times are from T0,
the clock reading of the driver's child just before execve. Without the daemon, the same
probe's exec-to-main() is measured as a baseline.

If "first set" comes before "main()", the class was idle before the program ran a line of
its own, and the reaction seen from inside is the program's own start; if "main()" is
then later than the baseline, the daemon's work slowed that start (on a machine with few
CPUs it can run on the same one).

Usage (as root): .venv/bin/python benchmarks/govern_timeline.py [--runs 300] [--gap-ms 5]
    [--nice -10] [--no-exec-filter] [--pin]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

import govern_lib as lib

#: Run as `python -c WRAPPER govern run ...`: the CLI, with two functions timed.
WRAPPER = """
import atexit, json, os, sys, time
from backburner.kernel import priorities
from backburner.govern import execwatch
from backburner.cli import main
seen, first = {}, {}
read = execwatch.ExecWatch.read
def timed_read(self):
    t = time.monotonic_ns()
    got = read(self)
    for pid, _ in got:
        seen.setdefault(pid, t)
    return got
execwatch.ExecWatch.read = timed_read
set_value = priorities._ioprio_set_value
def timed_set(tid, value):
    set_value(tid, value)
    first.setdefault(tid, time.monotonic_ns())
priorities._ioprio_set_value = timed_set
atexit.register(lambda: json.dump({"read": seen, "set": first},
                                  open(os.environ["BB_TIMELINE"], "w")))
sys.argv[0] = "backburner"
sys.exit(main(sys.argv[1:]))
"""


def median(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[len(xs) // 2] if xs else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--gap-ms", type=float, default=5.0)
    ap.add_argument("--nice", type=int, default=-10)
    ap.add_argument("--no-exec-filter", action="store_true")
    ap.add_argument("--pin", action="store_true",
                    help="the daemon on the last CPU, the programs on the first: an "
                    "experiment showing whether sharing a CPU is what delays them")
    args = ap.parse_args()
    lib.require_root()
    where = lib.private_dir()
    name = f"bbgovtime{os.getpid() % 10000:04d}"
    out_json = where / "timeline.json"
    daemon = None
    try:
        driver, probe = lib.compile_tools(where, name)
        rules = lib.probe_rules(where, name, "timeline", 'io = "idle"\n')
        base = [int(x) / 1e3 for x in lib.drive(driver, probe, args.runs, args.gap_ms, "start")]
        extra = ("--no-exec-filter",) if args.no_exec_filter else ()
        daemon = lib.Daemon(where, rules, *extra, nice=args.nice, python=("-c", WRAPPER),
                            env_extra={"BB_TIMELINE": str(out_json)})
        mode = daemon.status()["exec_events"]
        cpus = sorted(os.sched_getaffinity(0))
        pin: list[str] = []
        if args.pin and len(cpus) > 1:
            os.sched_setaffinity(daemon.pid, {cpus[-1]})
            pin = ["taskset", "-c", str(cpus[0])]
        rows = [tuple(int(x) for x in line.split())
                for line in lib.drive(driver, probe, args.runs, args.gap_ms, "timeline", pin)]
        code = daemon.stop()
        daemon = None
        if code != 0:
            print(f"the daemon ended with status {code}", file=sys.stderr)
            return 1
        times = json.loads(Path(out_json).read_text())
        print_timeline(rows, times, base, mode, args)
        return 0
    finally:
        if daemon is not None:
            daemon.stop()
        shutil.rmtree(where, ignore_errors=True)


def print_timeline(rows: list[tuple[int, ...]], times: dict, base: list[float], mode: str,
                   args: argparse.Namespace) -> None:
    read, first = times["read"], times["set"]
    woke = [(read[str(pid)] - t0) / 1e3 for _i, _m, pid, t0 in rows if str(pid) in read]
    sets = [(first[str(pid)] - t0) / 1e3 for _i, _m, pid, t0 in rows if str(pid) in first]
    mains = [m / 1e3 for _i, m, _p, _t in rows]
    idles = [i / 1e3 for i, _m, _p, _t in rows]
    before = sum(1 for _i, m, pid, t0 in rows
                 if str(pid) in first and first[str(pid)] - t0 <= m)
    print(f"govern timeline, {len(rows)} execs (exec events: {mode}, daemon nice "
          f"{args.nice}{', pinned apart' if args.pin else ''}), medians in µs from the "
          "clock reading just before execve:")
    print("| daemon reads the event | daemon sets the IO class | probe's main() | probe sees "
          "idle | main() without the daemon | set before main() |")
    print("| --: | --: | --: | --: | --: | --: |")
    print(f"| {median(woke):.0f} | {median(sets):.0f} | {median(mains):.0f} | "
          f"{median(idles):.0f} | {median(base):.0f} | {before} of {len(rows)} |")


if __name__ == "__main__":
    sys.exit(main())
