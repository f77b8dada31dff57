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
