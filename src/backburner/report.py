"""Reports from a result database: summary rows, terminal/text tables, HTML, exports, compare.

Reading never writes: the database is opened read-only and read inside one transaction, so a
database `bench` is still writing (WAL) gives one consistent snapshot, and an interrupted run
(no finished_at, cells with fewer trials) reports what it has.

Definitions used throughout (and in the HTML notes):

* A *cell* is (probe, device, scheduler, load, policy); trials of the same cell in several
  runs of one database are pooled. Load "none" is the unloaded baseline (policy "-").
* A cell's *samples* are ``wall_s`` of its counted trials (round > 0, warmup = 0) with status
  ok. Timeouts are counted and shown, never sampled; failed and aborted trials are counted.
* Cold trials (caches dropped) are the measurement. The ``not-cold`` check has two kinds of
  evidence. Direct: the probe's own block reads (``in_blocks``, from wait4's rusage) in its
  cold trials must exceed those of its warm trials (counted warm trials, else the warm-up
  round, which bench runs without dropping caches); if they do not, the cold trials did not
  read from disk. By time: when the database also holds at least 3 counted warm trials of
  the cell, a cold median within 10% of their median. (A single warm-up's *time* is too
  noisy a reference on fast storage, so it is used only through its block count.) A cell
  with only warm counted trials is reported warm.
* The baseline of a loaded cell is the unloaded cell with the same probe, device, scheduler
  and cold/warm mode.
* Bootstraps use seed 0 and 10,000 resamples, so a report is reproducible.
"""

from __future__ import annotations

import csv
import html
import io
import json
import math
import shutil
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, TextIO

import numpy as np
from rich import box
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from . import __version__, stats
from .errors import DataError, UsageError
from .store import TRIAL_FIELDS, Run, Store

SEED = 0
RESAMPLES = 10_000
MB = 1e6
EXPORT_FORMATS = ("csv", "json", "markdown")
JSON_FORMAT = "backburner-results"
JSON_VERSION = 1

# --------------------------------------------------------------------------- loading


@dataclass
class CellData:
    """One logical cell and all its trials (warm-ups included), oldest first."""

    key: str
    probe: str
    device: str
    scheduler: str
    load: str
    policy: str
    cell_ids: tuple[int, ...]
    run_ids: tuple[int, ...]
    trials: list[dict[str, Any]]

    @property
    def unloaded(self) -> bool:
        return self.load == "none"

    @property
    def label(self) -> str:
        return f"{self.scheduler} · {self.load} · {self.policy}"

    @property
    def counted(self) -> list[dict[str, Any]]:
        """Trials that count (not warm-ups), any status."""
        return [t for t in self.trials if not t["warmup"]]

    @property
    def mode(self) -> str:
        """"cold" if any counted trial was cold (those are then the measurement), else "warm"."""
        counted = self.counted
        if not counted or any(t["cold"] for t in counted):
            return "cold"
        return "warm"

    def mode_trials(self, mode: str | None = None) -> list[dict[str, Any]]:
        want = 1 if (mode or self.mode) == "cold" else 0
        return [t for t in self.counted if bool(t["cold"]) == bool(want)]

    def samples(self, mode: str | None = None) -> list[float]:
        return [t["wall_s"] for t in self.mode_trials(mode)
                if t["status"] == "ok" and t["wall_s"] is not None]

    def timeout_limits(self, mode: str | None = None) -> list[float]:
        """For each counted timeout, the limit it hit (its wall_s, else extra.limit_s)."""
        out = []
        for t in self.mode_trials(mode):
            if t["status"] == "timeout":
                limit = t["wall_s"] if t["wall_s"] is not None else t["extra"].get("limit_s")
                out.append(float(limit) if limit is not None else math.nan)
        return out

    def count(self, status: str, mode: str | None = None) -> int:
        return sum(1 for t in self.mode_trials(mode) if t["status"] == status)

    def failed(self, mode: str | None = None) -> int:
        """Failed trials and any status we do not know."""
        known = {"ok", "timeout", "aborted"}
        return sum(1 for t in self.mode_trials(mode) if t["status"] not in known)

    def warm_reference(self) -> list[dict[str, Any]]:
        """Warm trials for the not-cold check: counted warm ones, else the warm-ups that ran
        warm (bench runs round 0 without dropping caches)."""
        ok = [t for t in self.mode_trials("warm") if t["status"] == "ok"]
        return ok or [t for t in self.trials if t["warmup"] and not t["cold"]
                      and t["status"] == "ok"]

    def blocks(self, trials: list[dict[str, Any]]) -> list[float]:
        return [float(t["in_blocks"]) for t in trials if t.get("in_blocks") is not None]

    def throughput(self, field_name: str) -> list[float]:
        """Background device throughput (bytes/s) of counted ok/timeout trials that have it."""
        return [float(t[field_name]) for t in self.mode_trials()
                if t["status"] in ("ok", "timeout") and t[field_name] is not None]


@dataclass
class ReportData:
    """Everything `load` read: runs, cells in display order, and the file's schema version."""

    path: str
    schema_version: int
    runs: list[Run]
    cells: list[CellData]
    read_at: float
    _rows: dict[tuple[float, float], list[Row]] = field(
        default_factory=dict, repr=False, compare=False)

    @property
    def finished(self) -> bool:
        return all(r.finished_at is not None for r in self.runs)

    @property
    def probes(self) -> list[str]:
        return list(dict.fromkeys(c.probe for c in self.cells))

    @property
    def devices(self) -> list[str]:
        return list(dict.fromkeys(c.device for c in self.cells))

    @property
    def policies(self) -> list[str]:
        return list(dict.fromkeys(c.policy for c in self.cells))

    @property
    def trial_count(self) -> int:
        return sum(len(c.trials) for c in self.cells)

    def cell(self, key: str) -> CellData:
        for c in self.cells:
            if c.key == key:
                return c
        raise KeyError(key)

    def baseline_of(self, cell: CellData) -> CellData | None:
        if cell.unloaded:
            return None
        for c in self.cells:
            if (c.unloaded and c.probe == cell.probe and c.device == cell.device
                    and c.scheduler == cell.scheduler):
                return c
        return None


def load(path: str) -> ReportData:
    """Read a result database (read-only, one snapshot). DataError if nothing is counted yet."""
    store = Store.open(path, readonly=True)
    try:
        conn = store.conn
        conn.execute("BEGIN")  # one read transaction: a consistent snapshot under WAL
        try:
            meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
            runs = store.runs()
            cells = store.cells()
            trials = store.trials(include_warmup=True)
        finally:
            conn.rollback()
    finally:
        store.close()
    counted = sum(1 for t in trials if not t["warmup"])
    if not counted:
        what = (f"only {len(trials)} warm-up trial{'s' if len(trials) != 1 else ''}"
                if trials else "no trials")
        raise DataError(f"{path} has no counted trials yet ({what})",
                        "let `backburner bench` run at least one round past the warm-up")
    by_key: dict[str, CellData] = {}
    cell_key = {}
    for c in cells:
        cell_key[c.id] = c.key
        if c.key not in by_key:
            by_key[c.key] = CellData(c.key, c.probe, c.device, c.scheduler, c.load, c.policy,
                                     (), (), [])
        d = by_key[c.key]
        d.cell_ids += (c.id,)
        if c.run_id not in d.run_ids:
            d.run_ids += (c.run_id,)
    for t in trials:
        key = cell_key.get(t["cell_id"])
        if key is not None:
            by_key[key].trials.append(t)
    return ReportData(path, int(meta.get("schema_version", "0")), runs,
                      _display_order(list(by_key.values())), time.time())


def _display_order(cells: list[CellData]) -> list[CellData]:
    """Probe, device, scheduler as first seen; unloaded first; then loads and policies as seen."""
    def index(values: Iterable[str]) -> dict[str, int]:
        return {v: i for i, v in enumerate(dict.fromkeys(values))}

    probe = index(c.probe for c in cells)
    device = index(c.device for c in cells)
    sched = index(c.scheduler for c in cells)
    load_ = index(c.load for c in cells)
    policy = index(c.policy for c in cells)
    return sorted(cells, key=lambda c: (probe[c.probe], device[c.device], sched[c.scheduler],
                                        not c.unloaded, load_[c.load], policy[c.policy]))


# --------------------------------------------------------------------------- summary rows


@dataclass(frozen=True)
class Row:
    """The summary of one cell. Times in seconds, throughput in MB/s (10^6 bytes); None = n/a."""

    key: str
    probe: str
    device: str
    scheduler: str
    load: str
    policy: str
    label: str
    unloaded: bool
    mode: str                      # cold | warm
    n: int                         # samples: counted ok trials
    median: float | None
    median_ci: tuple[float, float] | None        # bootstrap
    median_ci_exact: tuple[float, float] | None  # order statistics (None if n too small)
    confidence: float
    q1: float | None
    q3: float | None
    min: float | None
    max: float | None
    mean: float | None
    stdev: float | None
    mad: float | None
    outliers: int
    timeouts: int
    timeout_limit: float | None    # the largest limit a timeout hit
    failed: int
    aborted: int
    warmups: int
    baseline_key: str | None
    ratio: stats.RatioCI | None    # median / baseline median
    verdict_kind: str              # stats kinds, or baseline | timed-out | no-baseline | no-data
    verdict: str
    warnings: tuple[stats.Warning_, ...]
    read_mbps: float | None
    write_mbps: float | None
    summary: stats.Summary | None


def summary_rows(data: ReportData, *, tolerance: float = 0.10,
                 confidence: float = 0.95) -> list[Row]:
    """One row per cell, in display order (cached per tolerance and confidence)."""
    cache_key = (tolerance, confidence)
    if cache_key not in data._rows:
        data._rows[cache_key] = [_row(data, c, tolerance, confidence) for c in data.cells]
    return data._rows[cache_key]


def _median(values: list[float]) -> float | None:
    return float(np.median(values)) if values else None


def _not_cold_by_blocks(cell: CellData) -> list[stats.Warning_]:
    """Direct evidence: cold trials that read no more blocks from disk than warm ones."""
    cold = cell.blocks([t for t in cell.mode_trials("cold") if t["status"] == "ok"])
    if not cold:
        return []
    warm = cell.blocks(cell.warm_reference())
    cold_blocks = float(np.median(cold))
    warm_blocks = float(np.median(warm)) if warm else 0.0
    if cold_blocks > warm_blocks:
        return []
    return [stats.Warning_(
        "not-cold", f"the probe's cold trials read {cold_blocks:.0f} blocks from disk "
        f"(median), no more than warm ones ({warm_blocks:.0f}): caches were probably not "
        "dropped, or the probe's files are on a RAM-backed filesystem")]


def _row(data: ReportData, cell: CellData, tolerance: float, confidence: float) -> Row:
    mode = cell.mode
    samples = cell.samples(mode)
    limits = cell.timeout_limits(mode)
    summary = (stats.summarize(samples, confidence=confidence, resamples=RESAMPLES, seed=SEED)
               if samples else None)
    warm_samples = cell.samples("warm") if mode == "cold" else []
    warm_median = _median(warm_samples) if len(warm_samples) >= 3 else None
    warnings = list(stats.warnings_for(samples, timeouts=len(limits), warm_median=warm_median,
                                       confidence=confidence))
    if mode == "cold" and not any(w.code == "not-cold" for w in warnings):
        warnings += _not_cold_by_blocks(cell)
    failed, aborted = cell.failed(mode), cell.count("aborted", mode)
    if failed:
        warnings.append(stats.Warning_(
            "failed", f"{failed} trial{_s(failed)} failed (the probe exited with an error or "
            f"was killed) and {_are(failed)} not in the samples; the exit codes are in the "
            "CSV export"))
    if aborted:
        warnings.append(stats.Warning_(
            "aborted", f"{aborted} trial{_s(aborted)} {_were(aborted)} skipped after repeated "
            "timeouts and {} not in the samples; raise --timeout or --abort-factor to measure "
            "them".format(
                _are(aborted))))
    if mode == "warm":
        warnings.append(stats.Warning_(
            "warm", "caches were not dropped before these trials (cold=0): they measure warm "
            "start-up, not the cold start the background load affects most"))

    base = data.baseline_of(cell)
    base_samples = base.samples(mode) if base else []
    ratio: stats.RatioCI | None = None
    if cell.unloaded:
        kind, text = "baseline", "unloaded baseline"
    elif base is None:
        kind, text = "no-baseline", "no unloaded baseline for this scheduler"
        warnings.append(stats.Warning_(
            "no-baseline", f"there is no unloaded cell for scheduler {cell.scheduler}: add "
            "load none to the matrix to get a ratio to idle"))
    elif not base_samples:
        kind, text = "no-baseline", "the unloaded baseline has no completed trials"
    elif not samples and limits and not math.isnan(min(limits)):
        lower = min(limits) / float(np.median(base_samples))
        kind = "timed-out"
        text = (f"all {len(limits)} counted trial{_s(len(limits))} timed out: "
                f"\u2265{stats._fmt_factor(lower)}\u00d7 slower than idle")
    elif not samples:
        kind, text = "no-data", "no completed trials"
    else:
        try:
            v = stats.verdict(samples, base_samples, tolerance=tolerance, confidence=confidence,
                              seed=SEED, resamples=RESAMPLES)
            kind, text, ratio = v.kind, v.text, v.ratio
        except ValueError as err:  # e.g. a baseline median of zero
            kind, text = "no-data", f"no verdict: {err}"
    reads, writes = cell.throughput("load_read_bps"), cell.throughput("load_write_bps")
    s = summary
    return Row(
        key=cell.key, probe=cell.probe, device=cell.device, scheduler=cell.scheduler,
        load=cell.load, policy=cell.policy, label=cell.label, unloaded=cell.unloaded, mode=mode,
        n=len(samples),
        median=s.median if s else None,
        median_ci=s.median_ci if s else None,
        median_ci_exact=s.median_ci_exact if s else None,
        confidence=confidence,
        q1=s.q1 if s else None, q3=s.q3 if s else None,
        min=s.min if s else None, max=s.max if s else None,
        mean=s.mean if s else None,
        stdev=(s.stdev if s and not math.isnan(s.stdev) else None),
        mad=s.mad if s else None,
        outliers=len(s.outliers) if s else 0,
        timeouts=len(limits),
        timeout_limit=max(limits) if limits else None,
        failed=failed, aborted=aborted,
        warmups=sum(1 for t in cell.trials if t["warmup"]),
        baseline_key=base.key if base else None,
        ratio=ratio, verdict_kind=kind, verdict=text, warnings=tuple(warnings),
        read_mbps=(_median(reads) or 0.0) / MB if reads else None,
        write_mbps=(_median(writes) or 0.0) / MB if writes else None,
        summary=summary,
    )


def _s(n: int) -> str:
    return "" if n == 1 else "s"


def _are(n: int) -> str:
    return "is" if n == 1 else "are"


def _were(n: int) -> str:
    return "was" if n == 1 else "were"


def notes(data: ReportData) -> list[str]:
    """Report-level remarks: unfinished runs, several runs pooled, uneven trial counts."""
    out = []
    for r in data.runs:
        if r.finished_at is None:
            out.append(f"run {r.id} has no finish time: bench was interrupted or is still "
                       "running, so cells may have fewer trials than planned "
                       "(`bench --resume` continues it)")
    if len(data.runs) > 1:
        out.append(f"{len(data.runs)} runs in this database; trials of the same cell are pooled")
    ns = {len(c.counted) for c in data.cells}
    if len(ns) > 1:
        out.append(f"cells have unequal numbers of counted trials ({min(ns)}\u2013{max(ns)})")
    return out


# --------------------------------------------------------------------------- formatting


def fmt_s(x: float | None) -> str:
    """Seconds with about three significant digits."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "\u2013"
    ax = abs(x)
    if ax >= 100:
        return f"{x:.0f}"
    if ax >= 10:
        return f"{x:.1f}"
    if ax >= 1:
        return f"{x:.2f}"
    return f"{x:.3f}"


def fmt_range(lo: float | None, hi: float | None) -> str:
    if lo is None or hi is None:
        return "\u2013"
    return f"{fmt_s(lo)}\u2013{fmt_s(hi)}"


def fmt_mbps(x: float | None) -> str:
    if x is None:
        return "\u2013"
    return f"{x:.0f}" if x >= 10 else f"{x:.1f}"


def fmt_ratio(r: stats.RatioCI | None) -> str:
    if r is None:
        return "\u2013"
    f = stats._fmt_factor
    return f"{f(r.ratio)}\u00d7 [{f(r.lo)}\u2013{f(r.hi)}]"


def _median_cell(r: Row) -> str:
    if r.median is None:
        return "\u2013"
    return f"{fmt_s(r.median)} [{fmt_range(*r.median_ci)}]" if r.median_ci else fmt_s(r.median)


def _bg(r: Row) -> str:
    if r.read_mbps is None and r.write_mbps is None:
        return "\u2013"
    return f"{fmt_mbps(r.read_mbps)} / {fmt_mbps(r.write_mbps)}"


def _timeouts_cell(r: Row) -> str:
    if not r.timeouts:
        return "0"
    return f"{r.timeouts} (\u2265{fmt_s(r.timeout_limit)} s)"


def _lost_cell(r: Row) -> str:
    return f"{r.failed}/{r.aborted}"


def headline(data: ReportData) -> str:
    probes = ", ".join(data.probes)
    devices = ", ".join(data.devices)
    state = "finished" if data.finished else "unfinished"
    return f"{probes} on {devices} \u2014 {data.path} ({state})"


# --------------------------------------------------------------------------- terminal / text

_KIND_STYLE = {
    "slower": "bold red", "timed-out": "bold red", "faster": "green",
    "indistinguishable": "green", "inconclusive": "yellow", "baseline": "dim",
    "no-baseline": "yellow", "no-data": "yellow",
}


@dataclass
class _Col:
    header: str
    cells: list[str | Text]
    justify: str = "left"
    wrap: bool = False  # only the verdict wraps; everything else keeps its line


def _estimate(cols: list[_Col]) -> int:
    """Width the table needs with every column unwrapped (a wrapping column: up to 26)."""
    total = 0
    for c in cols:
        lines = [ln for x in (c.header, *c.cells) for ln in str(x).splitlines()] or [""]
        widest = max(len(ln) for ln in lines)
        total += (min(widest, 26) if c.wrap else widest) + 2
    return total - 2 + max(len(cols) - 1, 0)  # no edge padding or edges; 1-space dividers


def _table(cols: list[_Col]) -> Table:
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    for c in cols:
        table.add_column(c.header, justify=c.justify, no_wrap=not c.wrap,  # type: ignore[arg-type]
                         min_width=16 if c.wrap else None)
    for i in range(len(cols[0].cells) if cols else 0):
        table.add_row(*(c.cells[i] for c in cols))
    return table


class AdaptiveTable:
    """A table that drops or stacks columns to fit the console instead of cropping them.

    ``layouts`` go from the widest to the narrowest; the first that fits is drawn.
    """

    def __init__(self, layouts: list[list[_Col]]) -> None:
        self.layouts = layouts

    @property
    def row_count(self) -> int:
        return len(self.layouts[0][0].cells) if self.layouts and self.layouts[0] else 0

    def choose(self, width: int) -> list[_Col]:
        for cols in self.layouts:
            if _estimate(cols) <= width:
                return cols
        return self.layouts[-1]

    def __rich_console__(self, console: Console, options: Any) -> Any:
        yield _table(self.choose(options.max_width))


def _summary_layouts(data: ReportData, rows: list[Row], conf: str) -> list[list[_Col]]:
    multi = len(data.probes) > 1 or len(data.devices) > 1
    lost = any(r.failed or r.aborted for r in rows)
    pol = [r.policy + (" (warm)" if r.mode == "warm" else "") for r in rows]
    where = ([_Col("Probe", [r.probe for r in rows]), _Col("Device", [r.device for r in rows])]
             if multi else [])
    cell = [_Col("Scheduler", [r.scheduler for r in rows]), _Col("Load", [r.load for r in rows]),
            _Col("Policy", pol)]
    n = _Col("n", [str(r.n) for r in rows], "right")
    median = _Col(f"Median s [{conf} CI]", [_median_cell(r) for r in rows], "right")
    median2 = _Col(f"Median s\n[{conf} CI]", [
        fmt_s(r.median) + (f"\n[{fmt_range(*r.median_ci)}]" if r.median_ci else "")
        for r in rows], "right")
    quart = _Col("Q1\u2013Q3", [fmt_range(r.q1, r.q3) for r in rows], "right")
    out = _Col("Out", [str(r.outliers) for r in rows], "right")
    to = _Col("T/O", [_timeouts_cell(r) for r in rows], "right")
    to2 = _Col("T/O", [str(r.timeouts) + (f"\n\u2265{fmt_s(r.timeout_limit)} s"
                                          if r.timeouts else "") for r in rows], "right")
    fa = [_Col("Fail/Abort", [_lost_cell(r) for r in rows], "right")] if lost else []
    fa2 = [_Col("F/A", [_lost_cell(r) for r in rows], "right")] if lost else []
    verdict = _Col("Verdict", [Text(r.verdict, style=_KIND_STYLE.get(r.verdict_kind, ""))
                               for r in rows], wrap=True)
    bg = _Col("BG MB/s r/w", [_bg(r) for r in rows], "right")
    stacked = _Col("Cell", ["\n".join(([r.probe, r.device] if multi else [])
                                       + [r.scheduler, r.load, p]) for r, p in zip(rows, pol,
                                                                                   strict=True)])
    return [
        [*where, *cell, n, median, quart, out, to, *fa, verdict, bg],
        [*where, *cell, n, median2, to2, *fa2, verdict, bg],
        [*where, *cell, n, median2, to2, *fa2, verdict],
        [stacked, n, median2, to2, *fa2, verdict],
    ]


def render_terminal(data: ReportData, *, tolerance: float = 0.10,
                    confidence: float = 0.95) -> Group:
    """Headline, the summary table (fitted to the console), legend, warnings and notes."""
    rows = summary_rows(data, tolerance=tolerance, confidence=confidence)
    conf = f"{confidence * 100:g}%"
    table = AdaptiveTable(_summary_layouts(data, rows, conf))
    legend = Text(f"median [{conf} bootstrap CI] in seconds; Out = Tukey outliers (kept); "
                  "T/O = timeouts; F/A = failed/aborted; verdicts against the unloaded cell "
                  f"of the same scheduler, \u00b1{tolerance * 100:g}% tolerance; BG = "
                  "background device throughput during the probe (median MB/s read / write)",
                  style="dim")
    lines: list[Text] = []
    for r in rows:
        for w in r.warnings:
            lines.append(Text.assemble(("warning ", "yellow"), (f"{r.label}: ", "bold"),
                                       w.message))
    for n in notes(data):
        lines.append(Text.assemble(("note ", "cyan"), n))
    return Group(Text(headline(data), style="bold"), Text(""), table, Text(""), legend,
                 *lines)


def render_text(data: ReportData, *, tolerance: float = 0.10, confidence: float = 0.95,
                width: int = 160) -> str:
    """`render_terminal` as plain text (no colour codes), for logs and tests."""
    buf = io.StringIO()
    console = Console(file=buf, width=width, color_system=None, force_terminal=False,
                      highlight=False, emoji=False, legacy_windows=False)
    console.print(render_terminal(data, tolerance=tolerance, confidence=confidence))
    return buf.getvalue()


# --------------------------------------------------------------------------- exports

CSV_CELL_FIELDS = ("run_id", "cell_id", "cell_key", "probe", "device", "scheduler", "load",
                   "policy")
CSV_FIELDS = (*CSV_CELL_FIELDS, "trial_id", "counted", *TRIAL_FIELDS)


def export(data: ReportData, fmt: str, out: TextIO, *, tolerance: float = 0.10,
           confidence: float = 0.95) -> None:
    """Write `data` as csv (one row per trial), json (everything) or markdown (the summary)."""
    if fmt not in EXPORT_FORMATS:
        raise UsageError(f"unknown export format {fmt!r}",
                         f"use one of {', '.join(EXPORT_FORMATS)}")
    if fmt == "csv":
        _export_csv(data, out)
    elif fmt == "json":
        json.dump(to_json(data, tolerance=tolerance, confidence=confidence), out, indent=2,
                  ensure_ascii=False, allow_nan=False)
        out.write("\n")
    else:
        out.write(render_markdown(data, tolerance=tolerance, confidence=confidence))


def _export_csv(data: ReportData, out: TextIO) -> None:
    w = csv.writer(out, lineterminator="\n")
    w.writerow(CSV_FIELDS)
    rows = []
    for c in data.cells:
        for t in c.trials:
            rows.append((t["id"], [t["run_id"], t["cell_id"], c.key, c.probe, c.device,
                                   c.scheduler, c.load, c.policy, t["id"],
                                   0 if t["warmup"] else 1]
                         + [_csv_value(f, t[f]) for f in TRIAL_FIELDS]))
    for _, row in sorted(rows, key=lambda x: x[0]):
        w.writerow(row)


def _csv_value(name: str, value: Any) -> Any:
    if name == "extra":
        return json.dumps(value, sort_keys=True)
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)  # shortest round-tripping form
    return value


def _clean(value: Any) -> Any:
    """JSON-safe: NaN/inf become null, tuples become lists."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def to_json(data: ReportData, *, tolerance: float = 0.10, confidence: float = 0.95
            ) -> dict[str, Any]:
    """The JSON export as a dict; see docs/json-schema.md."""
    rows = summary_rows(data, tolerance=tolerance, confidence=confidence)
    cells = []
    for c, r in zip(data.cells, rows, strict=True):
        cells.append({
            "key": c.key, "probe": c.probe, "device": c.device, "scheduler": c.scheduler,
            "load": c.load, "policy": c.policy, "unloaded": c.unloaded, "ids": list(c.cell_ids),
            "run_ids": list(c.run_ids), "mode": r.mode, "n": r.n,
            "sample_trial_ids": [t["id"] for t in c.mode_trials(r.mode)
                                 if t["status"] == "ok" and t["wall_s"] is not None],
            "timeouts": r.timeouts,
            "timeout_limit_s": r.timeout_limit, "failed": r.failed, "aborted": r.aborted,
            "warmups": r.warmups,
            "summary": asdict(r.summary) if r.summary else None,
            "baseline": r.baseline_key,
            "ratio_to_baseline": asdict(r.ratio) if r.ratio else None,
            "verdict": {"kind": r.verdict_kind, "text": r.verdict},
            "warnings": [asdict(w) for w in r.warnings],
            "background_mbps": {"read": r.read_mbps, "write": r.write_mbps},
        })
    trials = []
    for c in data.cells:
        for t in c.trials:
            trials.append({"id": t["id"], "run_id": t["run_id"], "cell_id": t["cell_id"],
                           "cell_key": c.key, **{f: t[f] for f in TRIAL_FIELDS}})
    trials.sort(key=lambda t: t["id"])
    return _clean({
        "format": JSON_FORMAT,
        "version": JSON_VERSION,
        "generated_by": f"backburner {__version__}",
        "generated_at": data.read_at,
        "source": {"path": data.path, "schema_version": data.schema_version},
        "statistics": {"tolerance": tolerance, "confidence": confidence,
                       "bootstrap_resamples": RESAMPLES, "bootstrap_seed": SEED,
                       "outlier_rule": stats.OUTLIER_RULE},
        "notes": notes(data),
        "runs": [asdict(r) for r in data.runs],
        "cells": cells,
        "trials": trials,
    })


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(data: ReportData, *, tolerance: float = 0.10,
                    confidence: float = 0.95) -> str:
    """A GitHub-flavoured Markdown table of the summary, with warnings as a list below."""
    rows = summary_rows(data, tolerance=tolerance, confidence=confidence)
    conf = f"{confidence * 100:g}%"
    header = ["Scheduler", "Load", "Policy", "n", f"Median s [{conf} CI]", "Q1\u2013Q3 s",
              "Timeouts", "Fail/Abort", "Verdict", "BG MB/s r/w"]
    align = [":--", ":--", ":--", "--:", "--:", "--:", "--:", "--:", ":--", "--:"]
    multi = len(data.probes) > 1 or len(data.devices) > 1
    if multi:
        header = ["Probe", "Device", *header]
        align = [":--", ":--", *align]
    lines = [f"**{_md(', '.join(data.probes))}** on **{_md(', '.join(data.devices))}**"
             f" \u2014 tolerance \u00b1{tolerance * 100:g}%", "",
             "| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |"]
    for r in rows:
        cells = [r.probe, r.device] if multi else []
        cells += [f"`{r.scheduler}`", f"`{r.load}`",
                  f"`{r.policy}`" + (" (warm)" if r.mode == "warm" else ""), str(r.n),
                  _median_cell(r), fmt_range(r.q1, r.q3), _timeouts_cell(r), _lost_cell(r),
                  ("**" + r.verdict + "**") if r.verdict_kind in ("slower", "timed-out")
                  else r.verdict, _bg(r)]
        lines.append("| " + " | ".join(_md(x) for x in cells) + " |")
    extra = [f"- {r.label}: {w.message}" for r in rows for w in r.warnings]
    extra += [f"- {n}" for n in notes(data)]
    if extra:
        lines += ["", *[_md(x) for x in extra]]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- compare


@dataclass(frozen=True)
class CompareRow:
    probe: str
    scheduler: str
    load: str
    policy: str
    device_a: str
    device_b: str
    n_a: int
    n_b: int
    timeouts_a: int
    timeouts_b: int
    median_a: float | None
    median_b: float | None
    ratio: stats.RatioCI | None          # median B / median A
    mann_whitney: stats.MannWhitney | None
    cliffs_delta: stats.CliffsDelta | None  # positive: B tends to be slower
    kind: str                            # same | slower | faster | inconclusive | no-data
    verdict: str

    @property
    def label(self) -> str:
        return f"{self.scheduler} · {self.load} · {self.policy}"


@dataclass(frozen=True)
class CompareResult:
    a: str
    b: str
    tolerance: float
    rows: list[CompareRow]
    only_a: list[str]
    only_b: list[str]
    notes: list[str]


def compare(a: ReportData, b: ReportData, *, tolerance: float = 0.10,
            confidence: float = 0.95) -> CompareResult:
    """Match cells of A and B by (probe, scheduler, load, policy) and compare B against A."""
    def ident(c: CellData) -> tuple[str, str, str, str]:
        return (c.probe, c.scheduler, c.load, c.policy)

    pairs: list[tuple[CellData, CellData]] = []
    left_a, left_b = list(a.cells), list(b.cells)
    # exact matches first (same device label), then by identity without the device
    for with_device in (True, False):
        index: dict[tuple[str, ...], list[CellData]] = {}
        for c in left_b:
            index.setdefault((*ident(c), c.device) if with_device else ident(c), []).append(c)
        still_a = []
        for c in left_a:
            k = (*ident(c), c.device) if with_device else ident(c)
            cands = index.get(k, [])
            if len(cands) == 1 or (with_device and cands):
                m = cands.pop(0)
                pairs.append((c, m))
                left_b.remove(m)
            else:
                still_a.append(c)
        left_a = still_a
    order = {c.key: i for i, c in enumerate(a.cells)}
    pairs.sort(key=lambda p: order[p[0].key])

    rows = [_compare_cells(ca, cb, tolerance, confidence) for ca, cb in pairs]
    out_notes = []
    dev_pairs = sorted({(ca.device, cb.device) for ca, cb in pairs if ca.device != cb.device})
    if dev_pairs:
        out_notes.append("device labels differ between A and B ("
                         + ", ".join(f"{x} vs {y}" for x, y in dev_pairs)
                         + "): cells were matched by probe, scheduler, load and policy")
    modes = {(ca.mode, cb.mode) for ca, cb in pairs if ca.mode != cb.mode}
    if modes:
        out_notes.append("some matched cells are cold in one database and warm in the other")
    for name, d in (("A", a), ("B", b)):
        if not d.finished:
            out_notes.append(f"{name} ({d.path}) is from an unfinished run")
    return CompareResult(a.path, b.path, tolerance, rows,
                         [f"{c.probe} · {c.label}" for c in left_a],
                         [f"{c.probe} · {c.label}" for c in left_b], out_notes)


def _compare_cells(ca: CellData, cb: CellData, tolerance: float,
                   confidence: float) -> CompareRow:
    sa, sb = ca.samples(), cb.samples()
    ma, mb = _median(sa), _median(sb)
    ratio = mw = cd = None
    tol = f"\u00b1{tolerance * 100:g}%"
    if not sa or not sb:
        kind = "no-data"
        missing = " and ".join(n for n, s in (("A", sa), ("B", sb)) if not s)
        verdict = f"no completed trials in {missing}"
    elif ma == 0:
        kind, verdict = "no-data", "median of A is zero: no ratio"
    else:
        v = stats.verdict(sb, sa, tolerance=tolerance, confidence=confidence, seed=SEED,
                          resamples=RESAMPLES)
        ratio = v.ratio
        mw = stats.mann_whitney(sb, sa)
        cd = stats.cliffs_delta(sb, sa)
        f = stats._fmt_factor
        if v.kind == "slower":
            kind, verdict = "slower", f"B {f(ratio.ratio)}\u00d7 slower"
        elif v.kind == "faster":
            kind, verdict = "faster", f"B {f(1 / ratio.ratio)}\u00d7 faster"
        elif v.kind == "indistinguishable":
            kind, verdict = "same", f"same within {tol}"
        else:
            kind, verdict = "inconclusive", "inconclusive"
    return CompareRow(ca.probe, ca.scheduler, ca.load, ca.policy, ca.device, cb.device,
                      len(sa), len(sb), len(ca.timeout_limits()), len(cb.timeout_limits()),
                      ma, mb, ratio, mw, cd, kind, verdict)


def render_compare(result: CompareResult, *, width: int | None = None) -> str:
    """The comparison as plain text: one row per matched cell, then unmatched cells and notes.

    ``width`` defaults to the terminal's (160 when not a terminal); narrow widths stack columns.
    """
    if width is None:
        width = shutil.get_terminal_size((160, 24)).columns
    rows = result.rows
    timeouts = any(r.timeouts_a or r.timeouts_b for r in rows)
    mw = [f"{r.mann_whitney.p:.2g}" if r.mann_whitney else "\u2013" for r in rows]
    cd = [f"{r.cliffs_delta.delta:+.2f} {r.cliffs_delta.magnitude}" if r.cliffs_delta
          else "\u2013" for r in rows]
    style = {"slower": "bold red", "faster": "green", "same": "green", "inconclusive": "yellow"}
    verdict = _Col("Verdict", [Text(r.verdict, style=style.get(r.kind, "")) for r in rows],
                   wrap=True)
    to = ([_Col("T/O A/B", [f"{r.timeouts_a}/{r.timeouts_b}" for r in rows], "right")]
          if timeouts else [])
    wide = [_Col("Scheduler", [r.scheduler for r in rows]), _Col("Load", [r.load for r in rows]),
            _Col("Policy", [r.policy for r in rows]),
            _Col("n A/B", [f"{r.n_a}/{r.n_b}" for r in rows], "right"), *to,
            _Col("Median A s", [fmt_s(r.median_a) for r in rows], "right"),
            _Col("Median B s", [fmt_s(r.median_b) for r in rows], "right"),
            _Col("B/A [CI]", [fmt_ratio(r.ratio) for r in rows], "right"),
            _Col("p", mw, "right"), _Col("\u03b4", cd, "right"), verdict]
    narrow = [_Col("Cell", [f"{r.scheduler}\n{r.load}\n{r.policy}\nn {r.n_a}/{r.n_b}"
                            + (f"\nT/O {r.timeouts_a}/{r.timeouts_b}" if timeouts else "")
                            for r in rows]),
              _Col("Median s\nA / B", [f"{fmt_s(r.median_a)}\n{fmt_s(r.median_b)}"
                                       for r in rows], "right"),
              _Col("B/A\n[CI]", [fmt_ratio(r.ratio).replace(" ", "\n", 1) for r in rows],
                   "right"),
              _Col("p\n\u03b4", [f"{p}\n{d}".replace(" ", "\n") for p, d in
                                  zip(mw, cd, strict=True)], "right"),
              verdict]
    middle = [_Col("Scheduler", [r.scheduler for r in rows]),
              _Col("Load", [r.load for r in rows]), _Col("Policy", [r.policy for r in rows]),
              _Col("n A/B", [f"{r.n_a}/{r.n_b}" + (f"\nT/O {r.timeouts_a}/{r.timeouts_b}"
                                                  if timeouts else "") for r in rows], "right"),
              *narrow[1:]]
    buf = io.StringIO()
    console = Console(file=buf, width=width, color_system=None, force_terminal=False,
                      highlight=False, emoji=False)
    console.print(f"A = {result.a}\nB = {result.b}\n", markup=False)
    if rows:
        console.print(AdaptiveTable([wide, middle, narrow]))
        console.print()
        console.print("ratio = median B / median A [95% bootstrap CI]; p = Mann\u2013Whitney U "
                      "(two-sided); \u03b4 = Cliff's delta of B vs A (+ = B slower)",
                      markup=False)
    else:
        console.print("no cells in common")
    for name, items in (("only in A", result.only_a), ("only in B", result.only_b)):
        for item in items:
            console.print(f"{name}: {item}", markup=False)
    for n in result.notes:
        console.print(f"note: {n}", markup=False)
    return buf.getvalue()


# --------------------------------------------------------------------------- HTML


def write_html(data: ReportData, path: str, *, tolerance: float = 0.10,
               confidence: float = 0.95) -> None:
    """One self-contained HTML file: no scripts, no external references, plots inline."""
    from . import plot  # matplotlib only when plots are wanted

    rows = summary_rows(data, tolerance=tolerance, confidence=confidence)
    images = plot.inline_pngs(data, tolerance=tolerance)
    page = _html_page(data, rows, images, tolerance, confidence)
    with open(path, "w", encoding="utf-8") as f:
        f.write(page)


_CSS = """
:root { --fg:#1d232b; --muted:#5b6673; --line:#d8dde3; --bg:#ffffff; --soft:#f5f7f9;
  --red:#b42318; --green:#1a7f37; --amber:#9a6700; }
* { box-sizing: border-box; }
body { margin:0; background:var(--bg); color:var(--fg);
  font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Noto Sans","DejaVu Sans",sans-serif; }
main { max-width:1360px; margin:0 auto; padding:28px 28px 64px; }
.scroll { overflow-x:auto; }
.legend { color:var(--muted); font-size:13px; margin:8px 0 0; }
h1 { font-size:26px; margin:0 0 4px; }
h2 { font-size:19px; margin:36px 0 10px; padding-bottom:4px; border-bottom:1px solid var(--line); }
h3 { font-size:15px; margin:18px 0 6px; }
.sub { color:var(--muted); margin:0 0 16px; }
code, pre, .num { font-family:ui-monospace,"SFMono-Regular","DejaVu Sans Mono",Menlo,monospace; }
pre { background:var(--soft); border:1px solid var(--line); border-radius:6px; padding:10px 12px;
  overflow-x:auto; font-size:13px; white-space:pre-wrap; word-break:break-all; margin:6px 0; }
table { border-collapse:collapse; width:100%; font-size:13.5px; }
th, td { padding:6px 9px; border-bottom:1px solid var(--line); text-align:left;
  vertical-align:top; }
th { background:var(--soft); font-weight:600; white-space:nowrap; }
td.num, th.num { text-align:right; white-space:nowrap; font-size:12.5px; }
table.summary td:nth-child(-n+3) { white-space:nowrap; }
table.summary td code { font-size:12.5px; }
table.summary th, table.summary td { padding:6px 7px; }
tr.base td { background:#fafbfc; color:var(--muted); }
tr.group td { border-top:2px solid var(--line); }
.v { font-weight:600; }
.v-slower, .v-timed-out { color:var(--red); }
.v-faster, .v-indistinguishable { color:var(--green); }
.v-inconclusive, .v-no-baseline, .v-no-data { color:var(--amber); }
.v-baseline { color:var(--muted); font-weight:400; }
table.summary small { color:var(--muted); font-size:11.5px; }
table.summary th small { font-weight:400; }
table.summary td.v { min-width:230px; font-size:13px; }
td.bad { color:var(--red); font-weight:600; }
.warn { background:#fff8e6; border:1px solid #f0d58c; border-radius:6px;
  padding:10px 14px 10px 30px; margin:8px 0; }
.warn li { margin:3px 0; }
.ok { color:var(--green); }
figure { margin:16px 0 28px; }
figure img { display:block; max-width:100%; height:auto; border:1px solid var(--line);
  border-radius:6px; }
figcaption { color:var(--muted); font-size:13px; margin-top:6px; }
.kv { width:auto; min-width:50%; }
.kv th { width:220px; background:none; font-weight:600; color:var(--muted); }
details summary { cursor:pointer; color:var(--muted); margin:6px 0; }
.notes li { margin:4px 0; }
footer { margin-top:40px; color:var(--muted); font-size:12px; }
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _html_page(data: ReportData, rows: list[Row], images: list[tuple[str, str, str, int]],
               tolerance: float, confidence: float) -> str:
    conf = f"{confidence * 100:g}%"
    title = f"backburner: {', '.join(data.probes)} on {', '.join(data.devices)}"
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
             "img-src data:; style-src 'unsafe-inline'\">",
             f"<title>{_e(title)}</title><style>{_CSS}</style></head><body><main>",
             "<h1>Start-up latency under background IO</h1>",
             f'<p class="sub">{_e(title)} \u00b7 <code>{_e(data.path)}</code> \u00b7 '
             f"{len(data.cells)} cells, {data.trial_count} trials \u00b7 "
             f"{'finished' if data.finished else '<strong>unfinished run</strong>'}</p>"]

    parts.append("<h2>Command</h2>")
    for r in data.runs:
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.started_at))
        parts.append(f"<pre><code>{_e(r.command)}</code></pre>")
        parts.append(f'<p class="sub">run {r.id}, started {started}, '
                     + ("finished " + time.strftime("%H:%M:%S", time.localtime(r.finished_at))
                        if r.finished_at else "not finished") + f", seed {r.seed}</p>")

    parts.append("<h2>Summary</h2>")
    parts.append(_html_table(data, rows, conf))
    parts.append(f'<p class="legend">Times in seconds. Median with its {conf} bootstrap CI. '
                 "Out. = outliers by Tukey's rule (kept in the data); T/O = timeouts (not in "
                 "the samples; \u2265 the limit they hit); Fail / abort = failed / aborted trials. "
                 "The verdict compares the cell's median with the unloaded median of the same "
                 f"scheduler (ratio and its {conf} CI), with a tolerance of "
                 f"\u00b1{tolerance * 100:g}%. BG = median background device throughput while "
                 "the probe ran, read / write, in MB/s (10<sup>6</sup> bytes).</p>")

    parts.append("<h2>Warnings</h2>")
    warn_items = [f"<li><strong>{_e(r.label)}</strong>: {_e(w.message)}</li>"
                  for r in rows for w in r.warnings]
    warn_items += [f"<li>{_e(n)}</li>" for n in notes(data)]
    if warn_items:
        parts.append('<ul class="warn">' + "".join(warn_items) + "</ul>")
    else:
        parts.append('<p class="ok">No warnings: enough trials, no timeouts, no bimodal '
                     "cells, no outlier excess.</p>")

    parts.append("<h2>Plots</h2>")
    for name, caption, b64, width in images:
        parts.append(f'<figure id="{_e(name)}"><img alt="{_e(caption)}" width="{width}" '
                     f'src="data:image/png;base64,{b64}"></figure>')

    parts.append("<h2>Environment</h2>")
    parts.append(_html_environment(data))
    parts.append("<h2>Statistics used</h2>")
    parts.append(_html_notes(tolerance, confidence))
    parts.append(f"<footer>Generated by backburner {_e(__version__)} on "
                 f"{_e(time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(data.read_at)))} "
                 f"from <code>{_e(data.path)}</code> (schema version "
                 f"{data.schema_version}).</footer>")
    parts.append("</main></body></html>")
    return "\n".join(parts) + "\n"


def _html_table(data: ReportData, rows: list[Row], conf: str) -> str:
    multi = len(data.probes) > 1 or len(data.devices) > 1
    head = (["Probe", "Device"] if multi else []) + ["Scheduler", "Load", "Policy"]
    num = ["n", f"Median<br><small>{conf} CI</small>", "Q1\u2013Q3<br><small>min\u2013max</small>",
           "Mean \u00b1 sd<br><small>MAD</small>", "Out.", "T/O", "Fail /<br>abort"]
    out = ['<div class="scroll"><table class="summary"><thead><tr>',
           *[f"<th>{_e(h)}</th>" for h in head],
           *[f'<th class="num">{h}</th>' for h in num],
           "<th>Verdict: ratio to idle [CI]</th>",
           '<th class="num">BG MB/s<br><small>read / write</small></th>',
           "</tr></thead><tbody>"]
    prev = None

    def two(top: str, below: str) -> str:
        return f'<td class="num">{_e(top)}<br><small>{_e(below)}</small></td>'

    for r in rows:
        cls = []
        if r.unloaded:
            cls.append("base")
        group = (r.probe, r.device, r.scheduler)
        if prev is not None and group != prev:
            cls.append("group")
        prev = group
        mean = ("\u2013" if r.mean is None else
                fmt_s(r.mean) + (f" \u00b1 {fmt_s(r.stdev)}" if r.stdev is not None else ""))
        tds = ([f"<td>{_e(r.probe)}</td>", f"<td>{_e(r.device)}</td>"] if multi else [])
        tds += [f"<td><code>{_e(r.scheduler)}</code></td>", f"<td><code>{_e(r.load)}</code></td>",
                f"<td><code>{_e(r.policy)}</code>"
                + (" (warm)" if r.mode == "warm" else "") + "</td>"]
        tds += [f'<td class="num">{r.n}</td>',
                f'<td class="num"><b>{_e(fmt_s(r.median))}</b><br><small>'
                f'{_e(fmt_range(*r.median_ci) if r.median_ci else "")}</small></td>',
                two(fmt_range(r.q1, r.q3), fmt_range(r.min, r.max) if r.n else ""),
                two(mean, fmt_s(r.mad) if r.n else ""),
                f'<td class="num">{r.outliers}</td>',
                f'<td class="num{" bad" if r.timeouts else ""}">{_e(_timeouts_cell(r))}</td>',
                f'<td class="num{" bad" if r.failed or r.aborted else ""}">'
                f"{_e(_lost_cell(r))}</td>"]
        tds.append(f'<td class="v v-{_e(r.verdict_kind)}">{_e(r.verdict)}</td>')
        tds.append(f'<td class="num">{_e(_bg(r))}</td>')
        out.append(f'<tr class="{" ".join(cls)}">' + "".join(tds) + "</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


def _fmt_bytes(n: Any) -> str:
    try:
        x = float(n)
    except (TypeError, ValueError):
        return str(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if x < 1024 or unit == "TiB":
            return f"{x:.1f} {unit}" if unit != "B" else f"{x:.0f} B"
        x /= 1024
    return str(n)


def _kv_table(items: Iterable[tuple[str, Any]]) -> str:
    out = ['<table class="kv"><tbody>']
    for k, v in items:
        if isinstance(v, dict):
            cell = _kv_table(v.items())
        elif isinstance(v, list):
            cell = _e(", ".join(str(x) for x in v)) if all(
                not isinstance(x, dict | list) for x in v) else f"<code>{_e(json.dumps(v))}</code>"
        elif isinstance(k, str) and k.endswith("bytes"):
            cell = f"{_e(_fmt_bytes(v))} <span class=\"sub\">({_e(v)})</span>"
        else:
            cell = _e(v)
        out.append(f"<tr><th>{_e(k)}</th><td>{cell}</td></tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


_ENV_LABELS = {"kernel": "Kernel", "kernel_version": "Kernel build", "machine": "Machine",
               "cpu_model": "CPU", "cpus": "CPUs", "cpu_governor": "CPU governor",
               "memory_bytes": "Memory", "hostname": "Host", "python": "Python",
               "backburner": "backburner"}
_ENV_ORDER = tuple(_ENV_LABELS)


def _html_environment(data: ReportData) -> str:
    out = []
    for r in data.runs:
        env = dict(r.environment)
        device = env.pop("device", None)
        if len(data.runs) > 1:
            out.append(f"<h3>Run {r.id}</h3>")
        items: list[tuple[str, Any]] = [(_ENV_LABELS[k], env.pop(k)) for k in _ENV_ORDER
                                        if k in env]
        if "Memory" in dict(items):
            items = [(k, f"{_fmt_bytes(v)} ({v} bytes)" if k == "Memory" else v)
                     for k, v in items]
        items += sorted(env.items())
        items += [("Tool version", r.tool_version), ("Seed", r.seed)]
        out.append(_kv_table(items))
        out.append("<h3>Device under test</h3>")
        out.append(_kv_table(device.items()) if isinstance(device, dict) and device
                   else '<p class="sub">no device facts recorded (the run stopped before the '
                   "device was set up)</p>")
        out.append("<h3>Configuration</h3>")
        out.append(f"<pre><code>{_e(json.dumps(r.config, indent=2, sort_keys=True))}"
                   "</code></pre>")
    return "".join(out)


def _html_notes(tolerance: float, confidence: float) -> str:
    conf = f"{confidence * 100:g}%"
    items = [
        "<b>Samples.</b> A cell's samples are the start-up times of its counted trials with "
        "status ok. Round 0 is a warm-up and is never counted; it runs without dropping "
        "caches (cold=0), so its time is the cell's warm reference for the not-cold check. "
        "Timeouts are counted and shown at the limit they hit (red \u00d7 in the plots), never "
        "averaged in; failed and aborted trials are counted and reported.",
        f"<b>Median and its interval.</b> Each cell is summarised by its median with a {conf} "
        f"percentile-bootstrap interval ({RESAMPLES:,} resamples, seed {SEED}, so the report "
        "is reproducible); quartiles use numpy's linear method; MAD is the median absolute "
        "deviation.",
        f"<b>Ratio to idle.</b> Median of the loaded cell / median of the unloaded cell on the "
        f"same scheduler, with a {conf} bootstrap CI from resampling both independently.",
        f"<b>Verdict.</b> \u201cslower\u201d/\u201cfaster\u201d only when the whole CI lies "
        f"beyond 1 \u00b1 {tolerance * 100:g}%; \u201cindistinguishable\u201d only when it lies "
        "entirely within; otherwise \u201cinconclusive\u201d: a wide interval is not "
        "evidence of no effect.",
        "<b>Mann\u2013Whitney U</b> (two-sided; exact for small samples without ties, else the "
        "normal approximation with tie and continuity corrections) and <b>Cliff's delta</b> "
        "(P(B &gt; A) \u2212 P(B &lt; A), magnitudes after Romano et al. 2006) are used by "
        "<code>compare</code>; neither assumes a distribution.",
        f"<b>Outliers.</b> {_e(stats.OUTLIER_RULE)}.",
        "<b>Warnings.</b> too few trials for a distribution-free interval of the median; "
        "timeouts; bimodal samples (Sarle's bimodality coefficient &gt; 5/9); not cold: the "
        "probe's cold trials read no more blocks from disk (wait4's in_blocks) than its warm "
        "trials (its warm-up round runs without dropping caches (cold=0) for this), or, "
        f"with 3 or more warm trials in the database, a cold median within "
        f"{stats.NOT_COLD_FRACTION:.0%} of the warm median; more than 10% outliers.",
    ]
    return '<ul class="notes">' + "".join(f"<li>{i}</li>" for i in items) + "</ul>"
