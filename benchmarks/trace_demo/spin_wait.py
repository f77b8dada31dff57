"""Demo for `backburner trace compare`: a waiter that spins with sched_yield(2).

The main thread waits for a worker thread to finish a fixed amount of work (hashing, with
short waits in between) by polling a flag and calling os.sched_yield() meanwhile, the
pattern behind many "why is it spinning" regressions. Compare it with futex_wait.py, which
waits on a threading.Condition (a futex).

Both pin themselves to one CPU (--cpus 1, the default), as on a busy machine: while the
worker waits, the spinner yields in a tight loop; each time the worker wakes, it has to
preempt the spinner (an involuntary context switch). hashlib releases the GIL on large
buffers, so the worker really runs while the waiter spins.

    python3 benchmarks/trace_demo/spin_wait.py [--rounds 1500] [--cpus 1]
"""

from __future__ import annotations

import os
import sys
import threading

from _common import options, work


def main() -> int:
    args = options(__doc__.splitlines()[0])
    done = threading.Event()  # used as a flag only: nobody sleeps on it
    result: list[str] = []

    def worker() -> None:
        result.append(work(args.rounds))
        done.set()

    thread = threading.Thread(target=worker)
    thread.start()
    spins = 0
    while not done.is_set():
        os.sched_yield()
        spins += 1
    thread.join()
    print(f"{result[0][:16]} after {spins} yields", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
