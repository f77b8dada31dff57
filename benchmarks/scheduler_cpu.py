#!/usr/bin/env python3
"""What does BFQ cost where the device is fast? Requests per second and CPU time per request
of `none`, `mq-deadline` and `bfq` on a loop device over a file in tmpfs: a device that is
never the bottleneck (its "media" is memory), so the CPU the block layer spends is what
limits it, and the scheduler's share of that CPU shows.

    sudo .venv/bin/python benchmarks/scheduler_cpu.py [--rounds 5] [--seconds 6]

fio reads 4 KiB at random with direct IO, at queue depth 32 (one process, libaio) and at
queue depth 1 (the latency case), rotating the schedulers' order each round. CPU per request
is counted where it is spent: fio's own user and system time (the submission path, where a
scheduler inserts requests and often dispatches them) and the run time of the kernel's
worker threads over the same seconds (kworkers: the loop driver's own work, reading the
tmpfs file, and the completions). The loop device's own cost is the same under every
scheduler, so a scheduler's own cost is its CPU per request minus `none`'s, taken round by
round (the same minute of a shared machine). The kernel threads' time includes whatever
else the machine's kworkers did meanwhile: read it with the load average printed beside it.

Prints one line per run, then a table of medians (and ranges) per scheduler and depth.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

SCHEDULERS = ("none", "mq-deadline", "bfq")
DEPTHS = (32, 1)
SIZE = 1 << 30
TICK = os.sysconf("SC_CLK_TCK")


def kthread_ns() -> int:
    """Run time of every kernel worker thread (kworker*), from /proc/PID/schedstat."""
    total = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            if not Path(f"/proc/{pid}/comm").read_text().startswith("kworker"):
                continue
            total += int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return total


def run_fio(dev: str, depth: int, seconds: float) -> dict:
    argv = ["fio", "--name=r", f"--filename={dev}", "--direct=1", "--rw=randread", "--bs=4k",
            "--ioengine=libaio", f"--iodepth={depth}", f"--runtime={seconds}",
            "--time_based", "--norandommap", "--output-format=json"]
    before = kthread_ns()
    done = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=seconds + 60)
    kernel_ns = kthread_ns() - before
    job = json.loads(done.stdout)["jobs"][0]
    ios = job["read"]["total_ios"]
    runtime_s = job["read"]["runtime"] / 1000  # ms
    # usr_cpu/sys_cpu: percent of the job's run time
    fio_s = (job["usr_cpu"] + job["sys_cpu"]) / 100 * runtime_s
    return {"iops": ios / runtime_s, "fio_us": fio_s / ios * 1e6,
            "kthreads_us": kernel_ns / 1000 / ios, "ios": ios}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--seconds", type=float, default=6.0)
    args = p.parse_args()
    if os.geteuid() != 0:
        print("needs root (a tmpfs mount and a loop device)", file=sys.stderr)
        return 77
    mnt = tempfile.mkdtemp(prefix="bb-schedcpu-")
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={SIZE + (64 << 20)}", "bb-schedcpu",
                    mnt], check=True)
    dev = None
    try:
        image = Path(mnt, "disk.img")
        with open(image, "wb") as f:  # written, not sparse: every read is of memory
            block = os.urandom(1 << 20)
            for _ in range(SIZE >> 20):
                f.write(block)
        dev = subprocess.run(["losetup", "--find", "--show", str(image)], capture_output=True,
                             text=True, check=True).stdout.strip()
        name = os.path.basename(dev)
        Path(f"/sys/block/{name}/queue/rotational").write_text("0")
        results: dict[tuple[str, int], list[dict]] = {}
        print(f"# {dev} over tmpfs, {os.cpu_count()} CPUs, "
              f"kernel {os.uname().release}", flush=True)
        for rnd in range(args.rounds):
            order = SCHEDULERS[rnd % 3:] + SCHEDULERS[:rnd % 3]
            for depth in DEPTHS:
                for sched in order:
                    Path(f"/sys/block/{name}/queue/scheduler").write_text(sched)
                    r = run_fio(dev, depth, args.seconds)
                    r["load"] = Path("/proc/loadavg").read_text().split()[0]
                    results.setdefault((sched, depth), []).append(r)
                    print(f"round {rnd} qd{depth} {sched}: {r['iops']:.0f} IOPS, fio "
                          f"{r['fio_us']:.2f} us/req, kworkers {r['kthreads_us']:.2f} us/req "
                          f"(load {r['load']})", flush=True)
    finally:
        if dev:
            subprocess.run(["losetup", "-d", dev], check=False)
        subprocess.run(["umount", mnt], check=False)
        os.rmdir(mnt)
    print("\n| depth | scheduler | requests/s (median, range) | CPU µs/request: fio "
          "| kworkers | total | above none's (median of rounds) |")
    print("| --: | --- | --: | --: | --: | --: | --: |")
    for depth in DEPTHS:
        base = results[("none", depth)]
        for sched in SCHEDULERS:
            got = results[(sched, depth)]
            iops = [r["iops"] for r in got]
            total = [r["fio_us"] + r["kthreads_us"] for r in got]
            above = [t - (b["fio_us"] + b["kthreads_us"]) for t, b in zip(total, base,
                                                                           strict=True)]
            print(f"| {depth} | {sched} | {statistics.median(iops):,.0f} "
                  f"({min(iops):,.0f}–{max(iops):,.0f}) "
                  f"| {statistics.median(r['fio_us'] for r in got):.2f} "
                  f"| {statistics.median(r['kthreads_us'] for r in got):.2f} "
                  f"| {statistics.median(total):.2f} "
                  f"| {statistics.median(above):+.2f} ({min(above):+.2f}–{max(above):+.2f}) |")
    loads = sorted(float(r["load"]) for rs in results.values() for r in rs)
    print(f"\nload average (1 min) over the runs: {loads[0]:.2f}–{loads[-1]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
