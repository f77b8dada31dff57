"""The caveats and notes a report adds beside its verdicts: why a cell's figure is weak
(too few trials, timeouts, outliers, a start that was not cold), and what a policy's
levers did on the disks of the run.

`stats` and `summary` hold each caveat as a code with numbers; this module says each one
in words (one entry per code in a table: a test checks none is missing), so the terminal,
Markdown, HTML and the JSON export's ``message`` say the same. The verdicts themselves are
`words`'.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from .. import stats
from ..base.quantities import (
    DASH,
    INFINITY,
    fmt_pct,
)
from ..stats import CaveatCode, TimeoutReach
from .data import ReportData
from .summary import NoteCode, RowCaveat, notes
from .words import GE, Params, are, plural_s, were

_TIMEOUT_EFFECT = {
    TimeoutReach.EVERYTHING: "no trial completed, so only a lower bound of the time is known",
    TimeoutReach.MEDIAN: f"so the median is only a lower bound ({GE}) and its interval is "
                         "open above",
    TimeoutReach.INTERVAL: f"so the median's interval is open above ({INFINITY})",
    TimeoutReach.NOTHING: "they do not reach the median or its interval",
}


def _too_few_trials(p: Params) -> str:
    n = int(p["trials"])
    head = "no completed trials" if n == 0 else f"only {n} trial{plural_s(n)}"
    return (f"{head}: too few for a {fmt_pct(float(p['confidence']))} interval of the median; "
            f"use {p.get('option', '--trials')} {p['advised']} or more")


def _timeouts(p: Params) -> str:
    n = int(p["count"])
    return (f"{n} trial{plural_s(n)} timed out and {are(n)} counted in this cell at the limit "
            f"{'they' if n != 1 else 'it'} hit (the probe took at least that long), not "
            f"dropped: {_TIMEOUT_EFFECT[TimeoutReach(p['reach'])]}; raise --timeout if the "
            "probe is merely slow, or treat this configuration as pathological")


def _bimodal(p: Params) -> str:
    return (f"samples look bimodal (bimodality coefficient {float(p['coefficient']):.2f} > "
            f"{p['threshold']}); the median may describe neither mode: look at the strip "
            "plot and run more trials")


def _not_cold(p: Params) -> str:
    if p["evidence"] == "blocks":
        return (f"the probe's cold trials read {float(p['cold_blocks']):.0f} blocks from disk "
                f"(median), no more than warm ones ({float(p['warm_blocks']):.0f}): caches "
                "were probably not dropped, or the probe's files are on a RAM-backed "
                "filesystem")
    return ("the probe's cold time equals its warm time: caches were probably not dropped, "
            "or the probe's files are not on the device under test")


def _outliers(p: Params) -> str:
    k, n = int(p["count"]), int(p["trials"])
    return (f"{k} of {n} trials ({k / n:.0%}) are outliers by Tukey's rule (flagged, not "
            "dropped); stop other activity on the machine, check the strip plot, or run "
            "more trials")


def _failed(p: Params) -> str:
    n = int(p["count"])
    return (f"{n} trial{plural_s(n)} failed (the probe exited with an error or was killed) and "
            f"{are(n)} not in the samples; the exit codes are in the CSV export")


def _aborted(p: Params) -> str:
    n = int(p["count"])
    return (f"{n} trial{plural_s(n)} {were(n)} skipped after repeated timeouts and {are(n)} not "
            "in the samples; raise --timeout or --abort-factor to measure them")


def _no_baseline_cell(p: Params) -> str:
    return (f"there is no unloaded cell for scheduler {p['scheduler']}: add load none to "
            "the matrix to get a ratio to unloaded")


_CAVEATS: dict[str, Callable[[Params], str]] = {
    CaveatCode.TOO_FEW_TRIALS: _too_few_trials,
    CaveatCode.TIMEOUTS: _timeouts,
    CaveatCode.BIMODAL: _bimodal,
    CaveatCode.NOT_COLD: _not_cold,
    CaveatCode.OUTLIERS: _outliers,
    RowCaveat.FAILED: _failed,
    RowCaveat.ABORTED: _aborted,
    RowCaveat.WARM: lambda p: ("caches were not dropped before these trials (cold=0): they "
                               "measure warm start-up, not the cold start the background "
                               "load affects most"),
    RowCaveat.NO_BASELINE: _no_baseline_cell,
    NoteCode.UNFINISHED_RUN: lambda p: (
        f"run {p['run']} has no finish time: bench was interrupted or is still running, so "
        "cells may have fewer trials than planned (`bench --resume` continues it)"),
    NoteCode.POOLED_RUNS: lambda p: (
        f"{p['runs']} runs in this database; trials of the same cell are pooled"),
    NoteCode.UNEQUAL_TRIALS: lambda p: (
        f"cells have unequal numbers of counted trials ({p['fewest']}{DASH}{p['most']})"),
}


def caveat_text(c: stats.Caveat) -> str:
    """A warning about a cell, or a note about a report: what it means and what to do."""
    return _CAVEATS[c.code](c.params)


def notes_text(data: ReportData) -> list[str]:
    """The report's notes (`summary.notes`) in words, then which levers acted per cell."""
    return [caveat_text(n) for n in notes(data)] + levers_text(data)


#: A policy's IO levers in words (the keys bench records, `kernel.levers.LEVERS`).
_LEVERS = {"io": "the IO class", "io-weight": "the IO weight", "group-io": "io.prio.class",
           "io-latency": "io.latency", "io-cost": "io.cost"}


def _levers(keys: Iterable[str]) -> str:
    words = [_LEVERS.get(k, k) for k in keys]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _lever_record(policy: str, rec: Mapping[str, object]) -> str | None:
    acted = [str(k) for k in rec.get("acted") or []]  # type: ignore[attr-defined]
    ignored = [str(k) for k in rec.get("ignored") or []]  # type: ignore[attr-defined]
    if not acted and not ignored:
        return None
    parts = []
    if acted:
        weight = f" ({rec['weight']})" if rec.get("weight") else ""
        wb = "" if "io-weight" not in acted else (
            ", its buffered writeback too" if rec.get("writeback") else
            ", not on buffered writeback")
        parts.append(f"{_levers(acted)}{weight} acted{wb}")
    if ignored:
        parts.append(f"{_levers(ignored)} did nothing")
    return f"{policy}: " + "; ".join(parts)


def levers_text(data: ReportData) -> list[str]:
    """Per scheduler, which of each policy's IO levers acted on the device under test, as
    the run recorded them (runs before they were recorded say nothing)."""
    out: list[str] = []
    for run in data.runs:
        device = run.environment.get("device")
        by_sched = device.get("levers") if isinstance(device, dict) else None
        if not isinstance(by_sched, dict):
            continue
        for sched, by_policy in by_sched.items():
            said = [t for p, rec in (by_policy or {}).items()
                    if isinstance(rec, dict) and (t := _lever_record(p, rec))]
            line = f"levers under {sched} on the device under test: {'; '.join(said)}"
            if said and line not in out:
                out.append(line)
    return out
