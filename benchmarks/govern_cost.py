#!/usr/bin/env python3
"""What does `govern` cost while nothing matches? (targets: < 0.5% of one core at
100 exec/s of non-matching programs; memory steady over 100,000 execs.)

The daemon runs with a rule set shaped like the built-in one (as many rules, as many names
per rule, the same keys), with every name changed so that nothing on this machine matches
and nothing here is re-prioritised. A C loop (vfork + execve of /bin/true, on an absolute
schedule) then starts programs:

1. 100 per second for 60 s, once with the daemon as shipped (the kernel filters exec
   events by program name: a perf tracepoint) and once with `--no-exec-filter` (every exec
   from the process connector, a read of /proc/PID/comm each): the daemon's CPU time (the
   scheduler's nanosecond sum, /proc/PID/schedstat) over the wall time, as a share of one
   core, and its wake-ups (voluntary context switches). For reference, the same schedule
   with a bare Python loop that only receives the connector's exec events (the cost of
   waking a Python process at all, on this machine).
2. 100,000 as fast as they go, as shipped: the daemon's RSS (VmRSS) before, every 10,000
   execs and after, and its CPU time per exec.

Usage (as root): .venv/bin/python benchmarks/govern_cost.py [--rate 100] [--seconds 60]
    [--execs 100000] [--floor-seconds 20] [--nice N]
Exit status 0; 69 without a C compiler.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import govern_lib as lib

from backburner.govern import rulefile, rulesources


def shaped_like_defaults() -> str:
    """The built-in rules with every program name prefixed so that none matches here."""
    parsed, _errors = rulesources.parse(rulesources.builtin_sources())
    out = []
    for rule in parsed.rules:
        match = {}
        for key in rule.match.given():
            values = [v.pattern if hasattr(v, "pattern") else v
                      for v in getattr(rule.match, key)]
            if key in ("comm", "parent"):
                values = [f"zq{v}"[:15] for v in values]
            elif key == "exe":
                values = [v.replace("*/", "*/zq") for v in values]
            match[key] = values
        items = ", ".join(f"{k} = {json.dumps(v)}" for k, v in match.items())
        out.append(f'[[rule]]\nname = "cost-{rule.name}"\nmatch = {{ {items} }}\n'
                   f'policy = "{rule.policy.spec()}"\n'
                   + ("throttle = true\n" if rule.throttle else ""))
    text = "\n".join(out)
    check, errors = rulefile.combine([rulefile.parse_file(text, "cost.toml")])
    assert not errors and len(check.rules) == len(parsed.rules), errors
    return text


FLOOR = r"""
import resource, signal, subprocess, sys
from backburner.kernel import proc_events
conn = proc_events.Connector()
conn.narrow(proc_events.STARTS)
class Done(Exception):
    pass
def done(*_):
    raise Done
signal.signal(signal.SIGCHLD, done)
driver, true, n, rate = sys.argv[1:]
r0 = resource.getrusage(resource.RUSAGE_SELF)
subprocess.Popen([driver, "spawn", true, n, rate])
try:
    while True:
        conn.sock.recv_into(conn.buf)
except Done:
    pass
r1 = resource.getrusage(resource.RUSAGE_SELF)
print(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
"""


def bare_listener_cost(driver: Path, true: str, rate: float, seconds: float) -> float:
    """CPU share of a process that does nothing but receive the exec events."""
    n = int(rate * seconds)
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-c", FLOOR, str(driver), true, str(n), str(rate)],
                         capture_output=True, text=True, check=True).stdout
    return float(out) / (time.monotonic() - t0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", type=float, default=100.0)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--execs", type=int, default=100_000)
    ap.add_argument("--floor-seconds", type=float, default=20.0,
                    help="how long to measure the bare-listener reference (0: skip)")
    ap.add_argument("--nice", type=int, default=None,
                    help="run the daemon at this nice value (the unit uses -10)")
    args = ap.parse_args()
    lib.require_root()
    where = lib.private_dir()
    daemon = None
    try:
        driver, _probe = lib.compile_tools(where, "bbgovcostprobe")
        rules_text = shaped_like_defaults()
        true = shutil.which("true") or "/bin/true"
        rules = lib.rules_dir(where, rules_text)
        n = int(args.rate * args.seconds)
        print(f"govern cost with {rules_text.count('[[rule]]')} rules shaped like the "
              "built-in ones, none matching:")
        for label, extra in (("with no-exec-filter", ("--no-exec-filter",)),
                             ("as shipped", ())):
            daemon = lib.Daemon(where, rules, *extra, nice=args.nice)
            time.sleep(1.0)  # let start-up settle (imports, the first scan)
            mode = daemon.status()["exec_events"]
            cpu0, wake0, t0 = daemon.cpu_s(), daemon.wakeups(), time.monotonic()
            subprocess.run([str(driver), "spawn", true, str(n), str(args.rate)], check=True)
            wall = time.monotonic() - t0
            cpu, wakes = daemon.cpu_s() - cpu0, daemon.wakeups() - wake0
            print(f"- {label} (exec events: {mode}): {n} execs at {n / wall:.1f}/s for "
                  f"{wall:.1f} s: daemon CPU {cpu * 1e3:.3f} ms = {cpu / wall * 100:.3f}% of "
                  f"one core ({cpu / n * 1e6:.1f} µs per exec), {wakes} wake-ups")
            if extra:
                code = daemon.stop()
                daemon = None
                if code != 0:
                    return 1
        if args.floor_seconds > 0:
            floor = bare_listener_cost(driver, true, args.rate, args.floor_seconds)
            print(f"- reference, same schedule: a bare Python loop that only receives the "
                  f"connector's exec events costs {floor * 100:.3f}% of one core here (what "
                  "any Python listener pays per wake-up on this machine)")

        rss = [daemon.rss_kib()]
        step = max(1, args.execs // 10)
        cpu0, t0 = daemon.cpu_s(), time.monotonic()
        done = 0
        while done < args.execs:
            k = min(step, args.execs - done)
            subprocess.run([str(driver), "spawn", true, str(k), "0"], check=True)
            done += k
            rss.append(daemon.rss_kib())
        wall = time.monotonic() - t0
        cpu = daemon.cpu_s() - cpu0
        print(f"- {done} execs as fast as they go ({done / wall:.0f}/s, {wall:.0f} s): daemon "
              f"CPU {cpu / done * 1e6:.1f} µs per exec ({cpu / wall * 100:.1f}% of one core)")
        print(f"- RSS (KiB) every {step} execs: {' '.join(map(str, rss))}; "
              f"growth {rss[-1] - rss[0]:+d} KiB, max {max(rss)} KiB")
        code = daemon.stop()
        daemon = None
        return 0 if code == 0 else 1
    finally:
        if daemon is not None:
            daemon.stop()
        shutil.rmtree(where, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
