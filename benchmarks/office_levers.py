#!/usr/bin/env python3
"""Beyond the idle class: which lever brings the office start to at most 1.05x unloaded,
and what it costs the installs (issue 45). On the office preset's device and loads (a
simulated 5400 rpm disk; flatpak installing and uninstalling an app from a shell loop and
from one long-lived process), under BFQ and mq-deadline.

  run screen   the levers with the short probe (the Python stand-in), 6 trials a cell:
               the idle class, the throttle (pause 100/250/500 ms x duty 0.1/0.25/0.5,
               with the idle class), the background policy
  run bfq      BFQ's tunables with the idle class (slice_idle 0/16/32 ms against its 8,
               low_latency off, strict_guarantees on) as setup variants
  run writer   the few best levers with Writer's first window (--policy, repeatable)
  run free     each lever's load alone for a minute (an instant probe, caches kept): its
               pace between starts, for the duty cycle
  table DB...  per lever: the start's ratio to unloaded [95% CI], the installs' bytes per
               second during the starts, their rounds per minute, the pace over a duty
               cycle (a start every 2 minutes), the longest pause of the bulk work, and
               the machine's load average while it was measured

Duty cycle: a start every CYCLE_S seconds; the rest of the cycle the load runs at its free
pace (`run free`, matched by scheduler, load and policy), in finished rounds (an install
and an uninstall) per minute: free x (CYCLE_S - T_start) / CYCLE_S, T_start the median
start of the lever's trials, no credit for what the load did during the start (a lower
bound). Rounds, not bytes: a round that installs and removes its files before they are
written back moves almost nothing to the disk. The free run keeps the caches (--warm), as
a machine between starts does. In one run with a cache drop before each trial, two of
six cells ran 57-59 rounds a minute that moved 54-146 MB in all, the other four 6-8 rounds
and 700-930 MB. The fast cells were a defect of the load, since fixed: a round stopped
between flatpak's import and its deploy left the app's ref and objects in the repository,
and later rounds wrote almost nothing. Without a free measurement the cycle column is
empty.

Usage: .venv/bin/python benchmarks/office_levers.py run screen [-o DB] [--trials N]
       .venv/bin/python benchmarks/office_levers.py table DB... [--free DB]
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import time
from typing import Any

import numpy as np

from backburner import stats
from backburner.base.errors import BackburnerError
from backburner.bench import presets
from backburner.report import data

DEVICE = "slowdisk:hdd-5400:4G"
LOADS = ("flatpak-loop", "flatpak-api")
SCHEDULERS = ("mq-deadline", "bfq")
CYCLE_S = 120.0
TARGET = 1.05
RESAMPLES = 10_000
MIN_N = stats.min_trials(0.95)
MB = 1e6

THROTTLES = [f"io=idle,pause-ms={p},min-duty={d}" for p in (100, 250, 500)
             for d in (0.1, 0.25, 0.5)]
SCREEN_POLICIES = ["default", "io=idle", "background", "throttle", *THROTTLES]
BFQ_VARIANTS = ["si0=bfq:slice_idle=0", "si16=bfq:slice_idle=16", "si32=bfq:slice_idle=32",
                "ll0=bfq:low_latency=0", "strict=bfq:strict_guarantees=1"]


def bench_argv(kind: str, out: str, trials: int, policies: list[str],
               schedulers: list[str], loads: list[str], probe: str = "short") -> list[str]:
    """The bench command line of one run of the study."""
    argv = [sys.executable, "-m", "backburner", "bench", "--device", DEVICE,
            "--trials", str(trials), "--settle", "2", "--timeout", "120", "-o", out, "-q"]
    for load in loads:
        argv += ["--load", load]
    for sched in schedulers:
        argv += ["--scheduler", sched]
    for pol in policies:
        argv += ["--policy", pol]
    if kind == "writer":
        argv += ["--probe", presets.office_probe()]
        if (ready := presets.office_ready()) is not None:
            argv += ["--ready", ready]
    elif kind == "free":  # no start to speak of: the load's own pace over a minute
        argv += ["--probe", "instant=true", "--load-lifetime", "cell", "--block",
                 str(trials), "--settle", "60", "--warm", "-w", "0"]
    elif probe == "standin":
        argv += ["--probe", presets.standin_probe()]
    else:
        argv += ["--probe", f"python={presets.PYTHON_PROBE}"]
    if kind == "bfq":
        for variant in BFQ_VARIANTS:
            argv += ["--setup-variant-tune", variant]
    return argv


def run(args: argparse.Namespace) -> int:
    policies = args.policy or {"screen": SCREEN_POLICIES, "bfq": ["default", "io=idle"],
                               "writer": ["default", "io=idle"],
                               "free": ["default", "io=idle"]}[args.kind]
    schedulers = args.scheduler or (["bfq"] if args.kind == "bfq" else list(SCHEDULERS))
    loads = args.load or (["flatpak-loop"] if args.kind in ("screen", "bfq") else list(LOADS))
    out = args.output or time.strftime(f"results/levers-{args.kind}-%Y%m%d-%H%M%S.db")
    argv = bench_argv(args.kind, out, args.trials, policies, schedulers, loads, args.probe)
    print("$ " + shlex.join(["backburner", *argv[3:]]), flush=True)
    print(f"loadavg before: {_loadavg()}", flush=True)
    status = subprocess.run(argv).returncode  # noqa: S603 - our own command line
    print(f"loadavg after: {_loadavg()}", flush=True)
    return status


def _loadavg() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


# --- the table ------------------------------------------------------------------------------


def _trial_values(cell: data.CellData, key: str, field: str) -> list[float]:
    out = []
    for t in cell.counted:
        part = t["extra"].get(key)
        if t["status"] == "ok" and isinstance(part, dict) and isinstance(
                part.get(field), int | float):
            out.append(float(part[field]))
    return out


def _rate_ci(nums: np.ndarray, dens: np.ndarray, rng: np.random.Generator
             ) -> tuple[float, float, float]:
    """sum(nums) / sum(dens), with a percentile bootstrap over trials."""
    point = float(nums.sum() / dens.sum()) if dens.sum() > 0 else float("nan")
    if len(nums) < MIN_N:
        return point, float("nan"), float("nan")
    idx = rng.integers(0, len(nums), size=(RESAMPLES, len(nums)))
    with np.errstate(divide="ignore", invalid="ignore"):
        boot = nums[idx].sum(axis=1) / dens[idx].sum(axis=1)
    lo, hi = np.nanquantile(boot, [0.025, 0.975])
    return point, float(lo), float(hi)


def _during(cell: data.CellData) -> tuple[np.ndarray, np.ndarray, list[float]]:
    """Per ok trial: the load's bytes and the seconds of the start, and the longest
    stretch without progress in it."""
    b, s, stall = [], [], []
    for t in cell.counted:
        d = t["extra"].get("bulk_during")
        if t["status"] == "ok" and isinstance(d, dict) and d.get("seconds"):
            b.append(float(d["bytes"]))
            s.append(float(d["seconds"]))
            stall.append(float(d["longest_stall_s"]))
    return np.array(b), np.array(s), stall


def _rounds(cell: data.CellData) -> tuple[np.ndarray, np.ndarray]:
    r, s = [], []
    for t in cell.counted:
        bulk = t["extra"].get("bulk")
        if isinstance(bulk, dict) and "rounds" in bulk and bulk.get("seconds"):
            r.append(float(bulk["rounds"]))
            s.append(float(bulk["seconds"]))
    return np.array(r), np.array(s)


def _free_rates(free: data.ReportData | None) -> dict[tuple[str, str, str], float]:
    """(scheduler, load, policy) -> the load's rounds per minute with nothing starting."""
    out: dict[tuple[str, str, str], float] = {}
    if free is None:
        return out
    for cell in free.cells:
        rates = [60 * float(t["extra"]["bulk"]["rounds"]) / float(t["extra"]["bulk"]["seconds"])
                 for t in cell.counted if isinstance(t["extra"].get("bulk"), dict)
                 and t["extra"]["bulk"].get("seconds") and "rounds" in t["extra"]["bulk"]]
        if rates:
            out[(cell.cell.scheduler, cell.cell.load, cell.cell.policy)] = float(
                np.median(rates))
    return out


def rows(report: data.ReportData, free: data.ReportData | None) -> list[dict[str, Any]]:
    rng = np.random.default_rng(1)
    pace = _free_rates(free)
    unloaded = {(c.cell.scheduler, c.cell.prepare): c for c in report.cells if c.unloaded}
    out = []
    for cell in report.cells:
        if cell.unloaded:
            continue
        c = cell.cell
        base = unloaded.get((c.scheduler, "none")) or unloaded.get((c.scheduler, c.prepare))
        times = cell.samples()
        row: dict[str, Any] = {"scheduler": c.scheduler, "load": c.load, "policy": c.policy,
                               "variant": c.prepare, "n": len(times)}
        if base is not None and times and base.samples():
            r = stats.ratio_of_medians(times, base.samples(), resamples=RESAMPLES, seed=1)
            enough = min(len(times), len(base.samples())) >= MIN_N
            row["ratio"] = (r.ratio, r.lo, r.hi) if enough else (r.ratio, np.nan, np.nan)
            row["base_s"] = float(np.median(base.samples()))
            row["median_s"] = float(np.median(times))
        b, s, stall = _during(cell)
        if len(b):
            row["during"] = _rate_ci(b, s, rng)
            row["longest_stall_s"] = (float(np.median(stall)), max(stall))
            free_rate = pace.get((c.scheduler, c.load, c.policy))
            if free_rate is not None:
                t_start = float(np.median(times))
                row["cycle"] = free_rate * max(CYCLE_S - t_start, 0) / CYCLE_S
                row["free"] = free_rate
        rounds, secs = _rounds(cell)
        if len(rounds):
            per_min = _rate_ci(rounds * 60, secs, rng)
            row["rounds_min"] = per_min
        pauses = _trial_values(cell, "bulk", "longest_pause_s")
        if pauses:
            row["longest_pause_s"] = (float(np.median(pauses)), max(pauses))
        loads = [t["extra"]["loadavg"][0] for t in cell.counted
                 if len(t["extra"].get("loadavg") or []) == 3]
        if loads:
            row["loadavg"] = (float(np.median(loads)), min(loads), max(loads))
        out.append(row)
    return out


def _ci(v: tuple[float, float, float] | None, fmt: str, scale: float = 1.0) -> str:
    if v is None:
        return "–"
    point, lo, hi = (x / scale for x in v)
    if np.isnan(lo):
        return f"{point:{fmt}} (n<{MIN_N})"
    return f"{point:{fmt}} [{lo:{fmt}}–{hi:{fmt}}]"


COLUMNS = ("scheduler", "load", "lever", "n", "start × unloaded [95% CI]",
           "installs MB/s during the starts", "rounds/min", "free rounds/min",
           "rounds/min over a 2-min cycle, at least",
           "longest stall in a start, median (max) s", "longest pause, max s",
           "load average, median (min–max)")


def cells_of(row: dict[str, Any]) -> list[str]:
    """One table row's cells, as text."""
    lever = row["policy"] + (f" + {row['variant']}" if row["variant"] != "none" else "")
    ratio = row.get("ratio")
    within = ratio is not None and not np.isnan(ratio[2]) and ratio[2] <= TARGET
    stall, pause, la = row.get("longest_stall_s"), row.get("longest_pause_s"), \
        row.get("loadavg")
    return [row["scheduler"], row["load"], lever, str(row["n"]),
            _ci(ratio, ".2f") + (" **≤1.05**" if within else ""),
            _ci(row.get("during"), ".2f", MB), _ci(row.get("rounds_min"), ".1f"),
            f"{row['free']:.1f}" if "free" in row else "–",
            f"{row['cycle']:.1f}" if "cycle" in row else "–",
            f"{stall[0]:.2f} ({stall[1]:.2f})" if stall else "–",
            f"{pause[1]:.2f}" if pause else "–",
            f"{la[0]:.1f} ({la[1]:.1f}–{la[2]:.1f})" if la else "–"]


def table(args: argparse.Namespace) -> int:
    try:
        free = data.load(args.free) if args.free else None
        reports = [data.load(db) for db in args.db]
    except BackburnerError as err:
        print(f"office_levers.py: {err}", file=sys.stderr)
        return err.exit_status
    print("| " + " | ".join(COLUMNS) + " |")
    print("| --- | --- | --- | " + " | ".join("--:" for _ in COLUMNS[3:]) + " |")
    for report in reports:
        for row in rows(report, free):
            print("| " + " | ".join(cells_of(row)) + " |")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("kind", choices=("screen", "bfq", "writer", "free"))
    r.add_argument("-o", "--output")
    r.add_argument("--trials", type=int, default=6)
    r.add_argument("--policy", action="append")
    r.add_argument("--scheduler", action="append")
    r.add_argument("--load", action="append", choices=LOADS)
    r.add_argument("--probe", choices=("short", "standin"), default="short",
                   help="the screen's probe: Python importing a few stdlib packages "
                   "(short), or the office preset's stand-in (matplotlib and numpy)")
    t = sub.add_parser("table")
    t.add_argument("db", nargs="+")
    t.add_argument("--free", help="a `run free` database: the loads' pace between starts")
    args = ap.parse_args()
    return run(args) if args.command == "run" else table(args)


if __name__ == "__main__":
    sys.exit(main())
