"""JSON: everything (runs, per-cell statistics and verdicts, every trial); see
docs/reference/json-schema.md."""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from typing import Any, TextIO

from ... import __version__, stats
from ...store import TRIAL_FIELDS
from ..caveats import caveat_text
from ..data import ReportData
from ..summary import RESAMPLES, SEED, Row, notes, summary_rows
from ..words import OUTLIER_RULE, band_rule_text, row_verdict_text
from .registry import exporter

FORMAT = "backburner-results"
#: 2: summary.median_ci is the exact order-statistic interval (was median_ci_exact), the
#: percentile bootstrap is summary.median_ci_bootstrap (was median_ci); 3: verdict kinds
#: "at-most" and "undecided" (was "inconclusive"), statistics.tolerance null where the band
#: a person notices sized each verdict's band (statistics.band, verdict params band,
#: band_reference_s)
VERSION = 3


@exporter("json")
def write(data: ReportData, out: TextIO, tolerance: float | None, confidence: float) -> None:
    json.dump(to_json(data, tolerance=tolerance, confidence=confidence), out, indent=2,
              ensure_ascii=False, allow_nan=False)
    out.write("\n")


def clean(value: Any) -> Any:
    """JSON-safe: NaN/inf become null, tuples become lists."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean(v) for v in value]
    return value


def to_json(data: ReportData, *, tolerance: float | None = None, confidence: float = 0.95
            ) -> dict[str, Any]:
    """The JSON export as a dict."""
    rows = summary_rows(data, tolerance=tolerance, confidence=confidence)
    cells = []
    for c, r in zip(data.cells, rows, strict=True):
        cells.append({
            "key": c.key, **c.cell.as_dict(), "unloaded": c.unloaded, "ids": list(c.cell_ids),
            "run_ids": list(c.run_ids), "mode": r.mode, "n": r.n,
            "sample_trial_ids": [t["id"] for t in c.sample_trials(r.mode)],
            "timeouts": r.timeouts,
            "timeout_limit_s": r.timeout_limit, "failed": r.failed, "aborted": r.aborted,
            "warmups": r.warmups,
            "summary": _summary(r.summary),
            "baseline": r.baseline_key,
            "ratio_to_baseline": asdict(r.ratio) if r.ratio else None,
            "verdict": _verdict(r),
            "warnings": [_caveat(w) for w in r.warnings],
            "background_mbps": {"read": r.read_mbps, "write": r.write_mbps},
            "bulk_speed": r.bulk.speed if r.bulk else None,
            "bulk_speed_unit": f"{r.bulk.unit}/s" if r.bulk else None,
            "bulk_speed_ratio": asdict(r.bulk.ratio) if r.bulk and r.bulk.ratio else None,
        })
    trials = []
    for c in data.cells:
        for t in c.trials:
            trials.append({"id": t["id"], "run_id": t["run_id"], "cell_id": t["cell_id"],
                           "cell_key": c.key, **{f: t[f] for f in TRIAL_FIELDS}})
    trials.sort(key=lambda t: t["id"])
    return clean({
        "format": FORMAT,
        "version": VERSION,
        "generated_by": f"backburner {__version__}",
        "generated_at": data.read_at,
        "source": {"path": data.path, "schema_version": data.schema_version},
        "statistics": {"tolerance": tolerance, "band": _band(tolerance),
                       "confidence": confidence,
                       "bootstrap_resamples": RESAMPLES, "bootstrap_seed": SEED,
                       "outlier_rule": OUTLIER_RULE, "outlier_fence": stats.TUKEY_K},
        "notes": [caveat_text(n) for n in notes(data)],
        "note_codes": [{"code": str(n.code), "params": dict(n.params)} for n in notes(data)],
        "runs": [asdict(r) for r in data.runs],
        "cells": cells,
        "trials": trials,
    })


def _band(tolerance: float | None) -> dict[str, Any]:
    """How each verdict's band was set: by hand, or by the rule with its constants."""
    rule = {"rule": "given" if tolerance is not None else "noticeable",
            "text": band_rule_text(tolerance)}
    if tolerance is None:
        rule.update(fraction=stats.NOTICEABLE_FRACTION, seconds=stats.NOTICEABLE_S,
                    widest=stats.WIDEST)
    return rule


def _summary(s: stats.Summary | None) -> dict[str, Any] | None:
    """A cell's summary, with the outlier rule in words after the outliers it found."""
    if s is None:
        return None
    out: dict[str, Any] = {}
    for key, value in asdict(s).items():
        out[key] = value
        if key == "outliers":
            out["outlier_rule"] = OUTLIER_RULE
    return out


def _verdict(r: Row) -> dict[str, Any]:
    """The verdict's kind, its sentence and the numbers behind it."""
    return {"kind": str(r.verdict_kind), "text": row_verdict_text(r),
            "params": dict(r.verdict_params)}


def _caveat(c: stats.Caveat) -> dict[str, Any]:
    """A warning's code, its sentence and the numbers behind it."""
    return {"code": str(c.code), "message": caveat_text(c), "params": dict(c.params)}
