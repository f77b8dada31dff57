"""What the two trace demos share, so that their only difference is how they wait."""

from __future__ import annotations

import argparse
import hashlib
import os

BLOCK = bytes(1 << 20)


def options(description: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--rounds", type=int, default=1000, help="MiB the worker hashes")
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
    """Fixed CPU work that releases the GIL (hashlib does on large buffers)."""
    digest = hashlib.sha256()
    for _ in range(rounds):
        digest.update(BLOCK)
    return digest.hexdigest()
