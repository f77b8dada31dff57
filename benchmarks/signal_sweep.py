#!/usr/bin/env python3
"""Send `govern net` SIGTERM at many moments of its start and count the signals it lost
(still running, pacing, long after): the fault campaign draws a few moments at random,
this sweeps a window of them.

    python benchmarks/signal_sweep.py [--from 2.8] [--to 3.3] [--step 0.05] [--rounds 2]

Each run shapes a veth of its own (fault_net.netdev) in a mount namespace of its own with
a bpffs at /sys/fs/bpf; one that lost its signal is killed and its changes restored.
Needs root. Prints one line per run that lost it, and the count.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import fault_net

BB = [sys.executable, "-m", "backburner"]


def one(d: Path, delay_s: float, wait_s: float) -> str | None:
    """The stderr of a run that lost the SIGTERM sent `delay_s` after its start."""
    env = {**os.environ, "BACKBURNER_STATE_DIR": str(d / "state")}
    proc = subprocess.Popen([*fault_net.PRIVATE_BPFFS, *BB, "govern", "net", "--netns",
                             fault_net.netns_of(d), "--dev", fault_net.DEV, "--uplink", "1mbit"],
                            env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    time.sleep(delay_s)
    proc.send_signal(signal.SIGTERM)
    try:
        proc.communicate(timeout=wait_s)
        return None
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        _, err = proc.communicate()
        subprocess.run([*BB, "restore"], env=env, capture_output=True, timeout=120)
        return err.decode(errors="replace")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--from", dest="start", type=float, default=2.8)
    p.add_argument("--to", dest="end", type=float, default=3.3)
    p.add_argument("--step", type=float, default=0.05)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--wait", type=float, default=30.0, help="seconds it has to stop")
    args = p.parse_args()
    if os.geteuid() != 0:
        sys.exit("signal_sweep.py needs root")
    d = Path(tempfile.mkdtemp(prefix="bb-sweep-"))
    fault_net.netdev(d)
    delays = [args.start + i * args.step
              for i in range(int(round((args.end - args.start) / args.step)) + 1)]
    lost = runs = 0
    try:
        for _ in range(args.rounds):
            for delay in delays:
                runs += 1
                err = one(d, delay, args.wait)
                if err is not None:
                    lost += 1
                    last = next((x for x in reversed(err.splitlines()) if "Error" in x
                                 or "Terminated" in x or "ignored" in x), "")
                    print(f"SIGTERM at {delay:.2f} s: lost ({last.strip()})", flush=True)
    finally:
        fault_net.drop_netdev(d)
        subprocess.run(["rm", "-rf", str(d)], check=False)
    print(f"{lost} of {runs} SIGTERMs lost")
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(main())
