"""What the two trace demos share, so that their only difference is how they wait."""

from __future__ import annotations

import argparse
import hashlib
import os
import time

BLOCK = bytes(1 << 18)
#: Every third block the worker waits 0.2 ms, as a worker waiting for IO or a lock would.
PAUSE_EVERY = 3
PAUSE_S = 0.0002


def options(description: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--rounds", type=int, default=1500,
                        help="256 KiB blocks the worker hashes")
    parser.add_argument("--cpus", type=int, default=1, help="CPUs to run on (0: all)")
    args = parser.parse_args()
    pin(args.cpus)
    return args


def pin(cpus: int) -> None:
    """Run on the first `cpus` allowed CPUs; threads started later inherit it."""
    if cpus > 0 and hasattr(os, "sched_setaffinity"):
        allowed = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, allowed[:cpus])


def work(rounds: int) -> str:
    """Fixed work: hashing (hashlib releases the GIL on large buffers) with short waits.

    While the worker waits, a spinning waiter has the CPU to itself and yields in a tight
    loop; when the worker wakes, it preempts the spinner: an involuntary context switch a
    blocked waiter never has.
    """
    digest = hashlib.sha256()
    for i in range(rounds):
        digest.update(BLOCK)
        if i % PAUSE_EVERY == 0:
            time.sleep(PAUSE_S)
    return digest.hexdigest()
