"""The bench progress bar starts no thread (spawn forks with a pre-exec hook: a thread holding
a lock at the fork can deadlock the child) and still draws every update."""

from __future__ import annotations

import io
import subprocess
import sys
import threading

from rich.console import Console

from backburner.bench import ui
from backburner.bench.runner import Progress


def test_progress_bar_starts_no_thread_and_redraws_itself() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=120)
    before = threading.active_count()
    with ui.progress_bar(console) as report:
        p = Progress(total=3, cell="bfq · none · -")
        report(p)
        assert threading.active_count() == before
        p.done, p.cell, p.last = 1, "bfq · readers:1:seq · background", "ok 0.123s"
        report(p)
        assert threading.active_count() == before
        assert "readers:1:seq" in out.getvalue() and "ok 0.123s" in out.getvalue()
        assert "1/3" in out.getvalue()
    assert threading.active_count() == before


def test_bench_modules_start_no_native_threads() -> None:
    """Importing everything bench runs (numpy's BLAS would start threads) leaves one task."""
    code = ("import os, backburner.cli\n"
            "from backburner.bench import config, devices, loads, matrix, probes, runner, ui\n"
            "from backburner.slowdisk import device\n"
            "print(len(os.listdir('/proc/self/task')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "1"


def test_the_time_left_is_the_pace_so_far_bounded_by_the_budget() -> None:
    """A shrinking total (decided cells skip their slots) is no clock: the time left is
    the slots still to run at the pace so far, and never more than the budget left."""
    p = Progress(total=100, started=1000.0)
    assert p.left_s(1010.0) is None and p.left_text(1010.0) == "time left: estimating"
    p.done = 10  # 10 slots in 20 s: 2 s each, 90 to go
    assert p.left_s(1020.0) == 180.0 and p.left_text(1020.0) == "about 3m left"
    p.total = 40  # decided cells skipped 60 slots
    assert p.left_s(1020.0) == 60.0
    p.deadline = 1050.0  # 30 s of budget left, then each cell ends its block
    assert p.left_s(1020.0) == 32.0
    assert p.left_s(2000.0) == p.left_s(2000.0) == (2000.0 - 1000.0) / 10
    resumed = Progress(total=50, done=30, done_at_start=30, started=0.0)
    assert resumed.left_s(5.0) is None  # the slots done before this session set no pace


def test_plain_lines_show_the_time_left_and_the_budget_that_ended_cells(
        capsys: object) -> None:
    console = Console(file=io.StringIO(), force_terminal=False)
    with ui.progress_bar(console) as report:
        p = Progress(total=4, cell="bfq · readers:10:seq · background", started=0.0)
        p.done, p.last = 1, "ok 0.2s"  # one slot since the monotonic clock's 0: a while
        report(p)
        p.events.append("the time budget (2m30s of trials, --max-time) ended 1 cell before "
                        "it was decided: bfq · readers:10:seq · background")
        report(p)
        report(p)  # told once
    err = capsys.readouterr().err  # type: ignore[attr-defined]
    assert "[1/4, about " in err and "left] bfq" in err
    assert err.count("backburner: bench: the time budget (2m30s") == 1
