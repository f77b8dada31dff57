"""Summary rows: one per cell, with its statistics, verdict against idle and warnings.

* The ``not-cold`` check has two kinds of evidence. Direct: the probe's own block reads
  (``in_blocks``, from wait4's rusage) in its cold trials must exceed those of its warm
  trials (counted warm trials, else the warm-up round, which bench runs without dropping
  caches); if they do not, the cold trials did not read from disk. By time: when the
  database also holds at least 3 counted warm trials of the cell, a cold median within 10% of
  their median. (A single warm-up's *time* is too noisy a reference on fast storage, so it
  is used only through its block count.)
* The baseline of a loaded cell is the unloaded cell with the same probe, device, scheduler
  and preparation (and the same cold/warm mode).
* A cell's median is shown with its exact order-statistic interval (distribution-free: its
  coverage is at least the confidence asked for); ratios to idle with a percentile
  bootstrap (seed 0, 10,000 resamples, so a report is reproducible).
* A timed-out trial took at least its limit: it is counted at that limit (right-censored, see
  `stats`), never dropped, so a cell that often times out cannot pass for fast. Where the
  timeouts reach the median it is a lower bound (shown "≥"); where they reach the upper
  end of an interval, that end is unknown (shown "∞") and no verdict better than
  "inconclusive" or "slower" is given. Trials that failed or were aborted (never ran) are
  counted and warned about, not sampled: they say nothing about how long a start takes.

The short texts that every renderer shows for a row (median with CI, timeouts, background)
are here too, so the terminal, Markdown and HTML say the same thing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import stats
from ..cell import Cell
from ..units import DASH, fmt_factor, fmt_mbps, fmt_range, fmt_s
from .data import CellData, ReportData

SEED = 0
RESAMPLES = 10_000
MB = 1e6


@dataclass(frozen=True)
class Row:
    """The summary of one cell. Times in seconds, throughput in MB/s (10^6 bytes); None = n/a."""

    cell: Cell
    mode: str                      # cold | warm
    n: int                         # samples: counted ok trials
    median: float | None           # with each timeout at its limit (see median_lower_bound)
    #: the exact order-statistic interval, the one shown (None when n is too small for one)
    median_ci: tuple[float, float] | None
    median_ci_bootstrap: tuple[float, float] | None  # percentile bootstrap, for the record
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
    bulk: Bulk | None = None
    median_lower_bound: bool = False  # timeouts reach the median: the truth may be higher


@dataclass(frozen=True)
class Bulk:
    """The load's own work rate while it ran (not only while the probe ran), and that rate
    relative to the same load unprotected (policy default) on the same scheduler: the price
    the bulk work pays for the probe's protection."""

    unit: str                      # bytes | files | units | device bytes
    runs: int                      # load runs measured
    speed: float                   # median units per second
    reference_key: str | None      # the unprotected cell
    ratio: stats.RatioCI | None    # speed / the unprotected cell's speed

    @property
    def per_second(self) -> str:
        return f"{self.unit}/s"


def summary_rows(data: ReportData, *, tolerance: float = 0.10,
                 confidence: float = 0.95) -> list[Row]:
    """One row per cell, in display order (cached per tolerance and confidence).
    UsageError for runs of several machines (see `ReportData.require_one_machine`)."""
    cache_key = ("rows", tolerance, confidence)
    if cache_key not in data.cache:
        data.require_one_machine()
        data.cache[cache_key] = [_row(data, c, tolerance, confidence) for c in data.cells]
    return data.cache[cache_key]


def median_of(values: list[float]) -> float | None:
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
    censored = known_limits(limits)
    summary = (stats.summarize(samples, confidence=confidence, resamples=RESAMPLES, seed=SEED,
                               censored=censored) if samples else None)
    warm_samples = cell.samples("warm") if mode == "cold" else []
    warm_median = median_of(warm_samples) if len(warm_samples) >= 3 else None
    warnings = list(stats.warnings_for(samples, timeouts=len(limits), warm_median=warm_median,
                                       confidence=confidence, summary=summary))
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
            "no-baseline", f"there is no unloaded cell for scheduler {cell.cell.scheduler}: add "
            "load none to the matrix to get a ratio to idle"))
    elif not base_samples:
        kind, text = "no-baseline", "the unloaded baseline has no completed trials"
    elif not samples and limits and not math.isnan(min(limits)):
        lower = min(limits) / float(np.median(base_samples))
        kind = "timed-out"
        text = (f"all {len(limits)} counted trial{_s(len(limits))} timed out: "
                f"\u2265{fmt_factor(lower)}\u00d7 slower than idle")
    elif not samples:
        kind, text = "no-data", "no completed trials"
    else:
        try:
            v = stats.verdict(samples, base_samples, tolerance=tolerance, confidence=confidence,
                              seed=SEED, resamples=RESAMPLES, loaded_censored=censored,
                              baseline_censored=known_limits(base.timeout_limits(mode)))
            kind, text, ratio = v.kind, v.text, v.ratio
        except ValueError as err:  # e.g. a baseline median of zero
            kind, text = "no-data", f"no verdict: {err}"
    reads, writes = cell.throughput("load_read_bps"), cell.throughput("load_write_bps")
    s = summary
    return Row(
        cell=cell.cell, mode=mode,
        n=len(samples),
        median=s.median if s else None,
        median_ci=s.median_ci if s else None,
        median_ci_bootstrap=s.median_ci_bootstrap if s else None,
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
        read_mbps=(median_of(reads) or 0.0) / MB if reads else None,
        write_mbps=(median_of(writes) or 0.0) / MB if writes else None,
        summary=summary,
        bulk=_bulk(data, cell, confidence),
        median_lower_bound=bool(s and s.median_lower_bound),
    )


def known_limits(limits: list[float]) -> list[float]:
    """The limits timeouts hit, where stored (a timeout without one is counted, not sampled)."""
    return [v for v in limits if math.isfinite(v)]


def bulk_rates(cell: CellData) -> tuple[str, list[float]]:
    """(unit, per-run rates) of the load's own work, from the trials that stopped a load."""
    rates, units = [], []
    for t in cell.counted:
        b = t["extra"].get("bulk")
        if isinstance(b, dict) and isinstance(b.get("seconds"), int | float) \
                and b["seconds"] > 0 and isinstance(b.get("units"), int | float):
            rates.append(float(b["units"]) / float(b["seconds"]))
            units.append(str(b.get("unit", "units")))
    unit = max(set(units), key=units.count) if units else ""
    return unit, rates


def _bulk(data: ReportData, cell: CellData, confidence: float) -> Bulk | None:
    if cell.unloaded:
        return None
    unit, rates = bulk_rates(cell)
    if not rates:
        return None
    ref = data.unprotected_of(cell)
    ratio = None
    if ref is not None and ref is not cell:
        ref_unit, ref_rates = bulk_rates(ref)
        if ref_rates and ref_unit == unit and float(np.median(ref_rates)) > 0:
            ratio = stats.ratio_of_medians(rates, ref_rates, confidence=confidence,
                                           resamples=RESAMPLES, seed=SEED)
    return Bulk(unit, len(rates), float(np.median(rates)), ref.key if ref else None, ratio)


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


def fmt_ratio(r: stats.RatioCI | None) -> str:
    if r is None:
        return DASH
    return f"{fmt_factor(r.ratio)}\u00d7 [{fmt_factor(r.lo)}\u2013{fmt_factor(r.hi)}]"


def median_value_text(r: Row) -> str:
    """The median, marked \u2265 where timeouts make it a lower bound."""
    if r.median is None:
        return DASH
    return ("\u2265" if r.median_lower_bound else "") + fmt_s(r.median)


def median_text(r: Row) -> str:
    if r.median is None:
        return DASH
    value = median_value_text(r)
    return f"{value} [{fmt_range(*r.median_ci)}]" if r.median_ci else value


def background_text(r: Row) -> str:
    if r.read_mbps is None and r.write_mbps is None:
        return DASH
    return f"{fmt_mbps(r.read_mbps)} / {fmt_mbps(r.write_mbps)}"


def bulk_speed_text(r: Row) -> str:
    """The load's own speed: MB/s for bytes, else its unit per second."""
    b = r.bulk
    if b is None:
        return DASH
    if b.unit.endswith("bytes"):
        return f"{fmt_mbps(b.speed / MB)} MB/s"
    return f"{b.speed:.3g} {b.unit}/s"


def bulk_ratio_text(r: Row) -> str:
    b = r.bulk
    if b is None:
        return ""
    if r.cell.policy == "default":
        return "unprotected"
    if b.ratio is None:
        return "no unprotected cell"
    return f"{fmt_factor(b.ratio.ratio)}\u00d7 [{fmt_factor(b.ratio.lo)}\u2013" \
           f"{fmt_factor(b.ratio.hi)}]"


def timeouts_text(r: Row) -> str:
    if not r.timeouts:
        return "0"
    return f"{r.timeouts} (\u2265{fmt_s(r.timeout_limit)} s)"


def lost_text(r: Row) -> str:
    return f"{r.failed}/{r.aborted}"


def policy_text(r: Row) -> str:
    return r.cell.policy + (" (warm)" if r.mode == "warm" else "")


def headline(data: ReportData) -> str:
    probes = ", ".join(data.probes)
    devices = ", ".join(data.devices)
    state = "finished" if data.finished else "unfinished"
    return f"{probes} on {devices} \u2014 {data.path} ({state})"
