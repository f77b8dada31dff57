"""CSV: one row per trial (warm-ups included, marked), every stored field."""

from __future__ import annotations

import csv
import json
from typing import Any, TextIO

from ...store import TRIAL_FIELDS
from ..data import ReportData
from .registry import exporter

CELL_FIELDS = ("run_id", "cell_id", "cell_key", "probe", "device", "scheduler", "load",
               "policy", "prepare")
FIELDS = (*CELL_FIELDS, "trial_id", "counted", *TRIAL_FIELDS)


@exporter("csv")
def write(data: ReportData, out: TextIO, tolerance: float | None, confidence: float) -> None:
    w = csv.writer(out, lineterminator="\n")
    w.writerow(FIELDS)
    rows = []
    for c in data.cells:
        cell = c.cell
        for t in c.trials:
            rows.append((t["id"], [t["run_id"], t["cell_id"], c.key, cell.probe, cell.device,
                                   cell.scheduler, cell.load, cell.policy, cell.prepare,
                                   t["id"],
                                   0 if t["warmup"] else 1]
                         + [_value(f, t[f]) for f in TRIAL_FIELDS]))
    for _, row in sorted(rows, key=lambda x: x[0]):
        w.writerow(row)


def _value(name: str, value: Any) -> Any:
    if name == "extra":
        return json.dumps(value, sort_keys=True)
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)  # shortest round-tripping form
    return value
