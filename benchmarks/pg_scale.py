#!/usr/bin/env python3
"""A lab writing into one PostgreSQL store at once, and reading 100,000 trials back.

N writer processes (N = 1, 8, 32), each a "machine" with its own run, insert 1,000 trials
one commit at a time, as `bench` does; the script reports trials per second and checks
that every trial arrived exactly once. Then, over a database holding 100,000 trials of 100
machines, the lab-wide `compare --by machine` and one machine's `report` are timed.

    python benchmarks/pg_scale.py [--url postgresql://...] [--writers 1,8,32] [--trials 1000]

Without --url it starts a throwaway PostgreSQL cluster (as the test suite does; root, with
Debian's postgresql package). Prints a table of figures.
"""

from __future__ import annotations

import argparse
import multiprocessing
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import helpers  # noqa: E402  - the suite's throwaway cluster

from backburner.store import Store  # noqa: E402
from backburner.store.cell import Cell

SCHEDULERS = ("mq-deadline", "bfq")
LOADS = ("none", "readers:10:seq", "install-loop")


def _writer(url: str, n: int, trials: int, barrier: multiprocessing.Barrier) -> None:
    s = Store.open(url)
    run = s.add_run(f"pg_scale writer {n}", {"writer": n}, n, {"kernel": "lab"}, "scale",
                    hostname=f"lab-machine-{n:02d}", machine=f"{n:032x}")
    cells = [s.add_cell(run, Cell("probe", "disk", sched, load,
                                  "-" if load == "none" else "default"))
             for sched in SCHEDULERS for load in LOADS]
    barrier.wait()
    for i in range(trials):
        t = 1.8e9 + i
        s.add_trial(run, cells[i % len(cells)], round=i // len(cells), warmup=0, status="ok",
                    cold=1, wall_s=0.2 + (i % 7) * 0.01, in_blocks=100, started_at=t,
                    ended_at=t + 0.3)
    s.finish_run(run)
    s.close()


def writers(url: str, n: int, trials: int) -> tuple[float, int, int]:
    """(trials per second, trials stored, distinct (run, cell, round)) for n writers."""
    Store.create(url).close()
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(n + 1)
    procs = [ctx.Process(target=_writer, args=(url, i, trials, barrier)) for i in range(n)]
    for p in procs:
        p.start()
    barrier.wait()
    t0 = time.monotonic()
    for p in procs:
        p.join()
        if p.exitcode != 0:
            sys.exit(f"a writer failed (exit {p.exitcode})")
    seconds = time.monotonic() - t0
    s = Store.open(url, readonly=True)
    rows = s.trials(include_warmup=True)
    s.close()
    distinct = len({(t["run_id"], t["cell_id"], t["round"]) for t in rows})
    return n * trials / seconds, len(rows), distinct


def url_trials(url: str) -> int:
    s = Store.open(url, readonly=True)
    try:
        return len(s.trials(include_warmup=True))
    finally:
        s.close()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", help="an existing database (default: a throwaway cluster)")
    p.add_argument("--writers", default="1,8,32")
    p.add_argument("--trials", type=int, default=1000)
    args = p.parse_args()
    cluster = None if args.url else helpers.start_pg_cluster()
    try:
        new = (lambda: args.url) if args.url else cluster.new_database  # type: ignore[union-attr]
        print("| writers | trials/s | stored | distinct | every trial once |")
        print("| --: | --: | --: | --: | --- |")
        for n in (int(x) for x in args.writers.split(",")):
            rate, stored, distinct = writers(new(), n, args.trials)
            ok = stored == distinct == n * args.trials
            print(f"| {n} | {rate:,.0f} | {stored:,} | {distinct:,} | {'yes' if ok else 'NO'} |")
        url = new()
        writers(url, 100, 1000)  # 100,000 trials from 100 machines
        # one report covers one machine; the lab-wide view is compare --by machine
        for what, argv in (("compare --by machine", ["compare", url, "--by", "machine"]),
                           ("report --machine", ["report", url, "--machine",
                                                 "lab-machine-07"])):
            t0 = time.monotonic()
            r = subprocess.run([sys.executable, "-m", "backburner", *argv],
                               capture_output=True, text=True, timeout=600)
            took = time.monotonic() - t0
            if r.returncode != 0:
                sys.exit(f"{what} failed: {r.stderr.strip()}")
            print(f"`backburner {what}` over {url_trials(url):,} stored trials: {took:.2f} s, "
                  "the whole command (start-up, load, statistics, table)")
    finally:
        if cluster is not None:
            helpers.stop_pg_cluster(cluster)
    return 0


if __name__ == "__main__":
    sys.exit(main())
