"""Counter parsers against fixed kernel text, deltas exactly, and the live readers against
this kernel's /proc (a real process tree for the schedstat sampler)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from backburner.trace import counters

INTERRUPTS = """\
           CPU0       CPU1
  1:          9          0   IO-APIC   1-edge      i8042
 24:          1          2  IO-APIC   5-edge      ACPI:Ged
LOC:      52071      75287   Local timer interrupts
RES:      17920      17308   Rescheduling interrupts
CAL:      76442      39535   Function call interrupts
ERR:          0
"""
STAT = """\
cpu  31245 197 10347 309607 2569 0 310 22 0 0
cpu0 7760 99 3492 165227 491 0 80 6 0 0
intr 1835352 0 0 0
ctxt 3285288
btime 1700000000
processes 18631
procs_running 2
procs_blocked 0
softirq 631806 0 66320 4
"""
PSI = """\
some avg10=0.79 avg60=0.85 avg300=1.25 total=13776110
full avg10=0.79 avg60=0.81 avg300=1.15 total=12624006
"""


def test_parse_interrupts() -> None:
    irqs = counters.parse_interrupts(INTERRUPTS)
    assert irqs["CAL"] == counters.IrqLine("Function call interrupts", (76442, 39535))
    assert irqs["24"].desc == "IO-APIC 5-edge ACPI:Ged" and irqs["24"].total == 3
    assert irqs["ERR"].per_cpu == (0,)
    assert counters.parse_interrupts("") == {}


def test_parse_stat_and_psi_and_schedstat() -> None:
    stat = counters.parse_stat(STAT)
    assert stat["ctxt"] == 3285288 and stat["processes"] == 18631 and stat["intr"] == 1835352
    assert stat["softirq"] == 631806 and stat["cpu_user"] == 31245 and stat["cpu_steal"] == 22
    assert "procs_running" not in stat and "btime" not in stat
    assert counters.parse_psi(PSI) == {"some": 13776110, "full": 12624006}
    assert counters.parse_schedstat("71707 6545970 2\n") == (71707, 6545970, 2)
    assert counters.parse_schedstat("garbage") is None


def _snap(t_ns: int, cal: tuple[int, int], ctxt: int, io_some: int, loc: int = 5,
          extra: dict | None = None) -> counters.Snapshot:
    irqs = {"CAL": counters.IrqLine("Function call interrupts", cal),
            "LOC": counters.IrqLine("Local timer interrupts", (loc, loc))}
    irqs.update(extra or {})
    return counters.Snapshot(t_ns, irqs, {"ctxt": ctxt, "cpu_user": 100},
                             {"io": {"some": io_some, "full": 0}}, clock_ticks=100)


def test_parse_inner_ids_takes_the_innermost_namespace() -> None:
    status = ("Name:\tpython3\nTgid:\t27261\nPid:\t27302\nPPid:\t27259\n"
              "NStgid:\t27261\t1\nNSpid:\t27302\t42\nNSpgid:\t27259\t0\n")
    assert counters.parse_inner_ids(status) == (42, 1)
    assert counters.parse_inner_ids("NStgid:\t500\nNSpid:\t501\n") == (501, 500)
    assert counters.parse_inner_ids("Name:\tx\nPid:\t3\n") is None


def test_delta_is_exact_and_drops_reset_lines() -> None:
    a = _snap(1_000_000_000, (10, 20), 1000, 2_000_000, loc=50,
              extra={"9": counters.IrqLine("x", (1, 1))})
    b = _snap(3_500_000_000, (15, 120), 1600, 2_500_000, loc=40,
              extra={"10": counters.IrqLine("new", (1, 1))})
    b.stat["cpu_user"] = 350
    d = counters.delta(a, b)
    assert d["window_s"] == pytest.approx(2.5)
    assert d["interrupts"]["CAL"] == {"desc": "Function call interrupts", "per_cpu": [5, 100],
                                      "total": 105}
    assert "LOC" not in d["interrupts"]  # went down: re-registered, not reported wrong
    assert "9" not in d["interrupts"] and "10" not in d["interrupts"]
    assert d["stat"] == {"ctxt": 600, "cpu_user": pytest.approx(2.5)}
    assert d["psi"] == {"io": {"some": pytest.approx(0.5), "full": 0.0}}
    assert counters.summary(d) == {"psi_io_some_s": pytest.approx(0.5), "psi_io_full_s": 0.0,
                                   "ctxt": 600, "irq_CAL": 105}


def test_descendants() -> None:
    parents = {2: 1, 3: 2, 4: 3, 5: 2, 9: 8}
    assert counters.descendants(parents, 1) == {2: 1, 3: 2, 5: 2, 4: 3}
    assert counters.descendants(parents, 4) == {}


def test_window_on_this_kernel() -> None:
    w = counters.Window()
    w.start()
    with open(os.devnull, "w") as null:
        for _ in range(50):  # some context switches of our own
            subprocess.run(["true"], stdout=null, check=True)
    d = w.stop()
    assert d["window_s"] > 0
    assert d["stat"]["ctxt"] >= 50 and d["stat"]["processes"] >= 50
    assert all(v["total"] >= 0 for v in d["interrupts"].values())
    if Path("/proc/pressure/io").exists():
        assert set(d["psi"]["io"]) >= {"some"} and d["psi"]["io"]["some"] >= 0
    with pytest.raises(RuntimeError):
        counters.Window().stop()


CHILD = r"""
import os, sys, threading, time
def spin():
    end = time.monotonic() + 0.6
    while time.monotonic() < end:
        pass
t = threading.Thread(target=spin, name="spinner"); t.start()
print(threading.get_native_id(), t.native_id, flush=True)
t.join()
sys.stdin.read()
"""


@pytest.mark.skipif(not counters.schedstat_available(), reason="kernel without schedstat")
def test_sampler_follows_every_thread_of_the_tree() -> None:
    sampler = counters.ThreadSampler(os.getpid(), skip_depth=0, interval=0.02)
    sampler.start()
    with subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True) as proc:
        main_tid, thread_tid = map(int, proc.stdout.readline().split())
        time.sleep(0.7)
        seen = sampler.stop()
        proc.communicate("")
    assert {main_tid, thread_tid} <= set(seen)
    spinner = seen[thread_tid]
    assert spinner.pid == proc.pid and spinner.samples >= 3
    # it spun for 0.6 s of the clock, always runnable: on a CPU or waiting for one (on a
    # busy machine, such as the suite's own workers on 2 cores, most of it waiting); the
    # samples saw at least half of that
    assert spinner.run_s > 0 and spinner.wait_s >= 0 and spinner.slices >= 1
    assert spinner.run_s + spinner.wait_s >= 0.3, spinner
    assert sampler.sweeps >= 10
