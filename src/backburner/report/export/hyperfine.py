"""hyperfine's JSON format, so its plotting scripts (plot_whisker.py, plot_histogram.py, ...)
and anything else that reads hyperfine results work on a bench run: one result per cell,
``command`` naming the cell, ``times`` its counted start-up times (seconds), with mean,
stddev (sample), median, min, max, mean user and system CPU seconds and exit codes — the
same keys and types hyperfine writes, plus hyperfine's optional ``parameters`` with the
cell's dimensions."""

from __future__ import annotations

import json
import statistics
from typing import Any, TextIO

from ..data import CellData, ReportData
from .registry import exporter


@exporter("hyperfine-json")
def write(data: ReportData, out: TextIO, tolerance: float | None, confidence: float) -> None:
    data.require_one_machine()  # a cell pools the trials of one machine only
    results = [_result(c) for c in data.cells if c.samples()]
    json.dump({"results": results}, out, indent=2, ensure_ascii=False, allow_nan=False)
    out.write("\n")


def _result(cell: CellData) -> dict[str, Any]:
    trials = cell.sample_trials()
    times = [float(t["wall_s"]) for t in trials]
    return {
        "command": f"{cell.cell.probe} [{cell.label}]",
        "mean": statistics.fmean(times),
        "stddev": statistics.stdev(times) if len(times) > 1 else 0.0,
        "median": statistics.median(times),
        "user": statistics.fmean(float(t["user_s"] or 0.0) for t in trials),
        "system": statistics.fmean(float(t["sys_s"] or 0.0) for t in trials),
        "min": min(times),
        "max": max(times),
        "times": times,
        "exit_codes": [int(t["exit_code"] or 0) for t in trials],
        "parameters": {k: v for k, v in cell.cell.as_dict().items() if k != "probe"},
    }
