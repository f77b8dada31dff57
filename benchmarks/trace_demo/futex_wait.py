"""Demo for `backburner trace compare`: a waiter that blocks on a condition (a futex).

The same worker as spin_wait.py; the main thread sleeps in threading.Condition.wait() until
the worker notifies it, so it makes a handful of futex(2) calls instead of spinning.

    python3 benchmarks/trace_demo/futex_wait.py [--rounds 1500] [--cpus 1]
"""

from __future__ import annotations

import sys
import threading

from _common import options, work


def main() -> int:
    args = options(__doc__.splitlines()[0])
    cond = threading.Condition()
    result: list[str] = []

    def worker() -> None:
        digest = work(args.rounds)
        with cond:
            result.append(digest)
            cond.notify()

    thread = threading.Thread(target=worker)
    thread.start()
    with cond:
        while not result:
            cond.wait()
    thread.join()
    print(f"{result[0][:16]} after blocking", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
