"""Summary rows: one per cell, with its statistics, verdict against unloaded and warnings.

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
  coverage is at least the confidence asked for); ratios to unloaded with a percentile
  bootstrap (seed 0, 10,000 resamples, so a report is reproducible) -- or, where a run
  stopped its cells once they were decided (`--min-runs`, `--max-runs`, `--max-time`),
  with the confidence sequence that run stopped on (`stats.paired`: of the loaded cell's
  rounds paired with its baseline's), the only one still valid after such stopping. The
  ratio names its method; an undecided cell of such a run says what stopped it
  (``stopped``: max-runs, max-time, out-of-reach) and about how many trials would decide
  it at the spread seen (``trials_needed``; ``decidable`` false when none practical).
* The verdict's band is the one a person notices for the baseline's start
  (`stats.band.noticeable`: more than 10% and more than 100 ms, at most ±25%), sized from
  the baseline's median, unless a tolerance is given by hand; each verdict carries its band
  (``tolerance``), what set it (``band``) and the unloaded median it was sized for
  (``band_reference_s``).
* A timed-out trial took at least its limit: it is counted at that limit (right-censored, see
  `stats`), never dropped, so a cell that often times out cannot pass for fast. Where the
  timeouts reach the median it is a lower bound (shown "≥"); where they reach the upper
  end of an interval, that end is unknown (shown "∞") and no verdict better than
  "undecided" or "slower" is given. Trials that failed or were aborted (never ran) are
  counted and warned about, not sampled: they say nothing about how long a start takes.

Rows hold numbers, kinds and codes only: `report.words` says them, so the terminal,
Markdown, HTML and JSON say the same thing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from .. import stats
from ..store.cell import Cell
from .data import CellData, ReportData

SEED = 0
RESAMPLES = 10_000
MB = 1e6


class RowKind(StrEnum):
    """A row's verdict where there is no ratio to judge (else a `stats.VerdictKind`)."""

    BASELINE = "baseline"          # an unloaded cell
    TIMED_OUT = "timed-out"        # every counted trial timed out: timeouts, ratio_at_least
    NO_BASELINE = "no-baseline"    # reason: no-cell (scheduler) | no-samples
    NO_DATA = "no-data"            # reason: no-trials | zero-baseline


class RowCaveat(StrEnum):
    """Caveats that only the report sees (the trials' statuses, the matrix); the samples'
    own are `stats.CaveatCode`s."""

    FAILED = "failed"              # count
    ABORTED = "aborted"            # count
    WARM = "warm"                  # (caches were not dropped)
    NO_BASELINE = "no-baseline"    # scheduler


class NoteCode(StrEnum):
    """Remarks about a whole report."""

    UNFINISHED_RUN = "unfinished-run"  # run
    POOLED_RUNS = "pooled-runs"        # runs
    UNEQUAL_TRIALS = "unequal-trials"  # fewest, most


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
    verdict_kind: str              # a stats.VerdictKind or a RowKind
    #: the numbers behind the verdict (see RowKind; a stats kind: tolerance, lower_bound)
    verdict_params: dict[str, stats.Param]
    warnings: tuple[stats.Caveat, ...]
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
    #: speed / the unprotected cell's speed; its interval (lo, hi) is NaN where either side
    #: has fewer runs than a distribution-free interval needs (`stats.min_trials`): with
    #: --load-lifetime cell a load runs once per block, so a short run has one number
    ratio: stats.RatioCI | None
    reference_runs: int = 0        # the unprotected cell's load runs

    @property
    def per_second(self) -> str:
        return f"{self.unit}/s"


def summary_rows(data: ReportData, *, tolerance: float | None = None,
                 confidence: float = 0.95) -> list[Row]:
    """One row per cell, in display order (cached per tolerance and confidence); a
    ``tolerance`` given by hand replaces the band a person notices (`stats.band`).
    UsageError for runs of several machines (see `ReportData.require_one_machine`)."""
    cache_key = ("rows", tolerance, confidence)
    if cache_key not in data.cache:
        data.require_one_machine()
        data.cache[cache_key] = [_row(data, c, tolerance, confidence) for c in data.cells]
    return data.cache[cache_key]


def median_of(values: list[float]) -> float | None:
    return float(np.median(values)) if values else None


#: A start that read at most this many 512-byte blocks (1 MiB) from disk was warm
#: (`_reads_like_a_warm_start`).
NOT_COLD_WARM_BLOCKS = 2048


def _not_cold_by_blocks(data: ReportData, cell: CellData) -> list[stats.Caveat]:
    """Direct evidence: cold trials that read no more blocks from disk than warm ones.

    A loaded cell is held against its scheduler's unloaded warm start: whether the cache
    was dropped does not depend on the load, but a warm start under load does (a package
    manager's writes evict the probe's pages, and the warm start under flatpak read twice
    what a cold one did unloaded)."""
    cold = cell.blocks([t for t in cell.mode_trials("cold") if t["status"] == "ok"])
    if not cold:
        return []
    ref = cell if cell.unloaded else (data.baseline_of(cell) or cell)
    warm = ref.blocks(ref.warm_reference())
    cold_blocks = float(np.median(cold))
    warm_blocks = float(np.median(warm)) if warm else 0.0
    if not _reads_like_a_warm_start(cold_blocks, warm_blocks):
        return []
    return [stats.Caveat(stats.CaveatCode.NOT_COLD, {
        "evidence": "blocks", "cold_blocks": cold_blocks, "warm_blocks": warm_blocks})]


def _reads_like_a_warm_start(cold_blocks: float, warm_blocks: float) -> bool:
    """Cold trials whose reads say the cache was not dropped: they read no more than the
    warm reference, and that reference was a warm start (it read under NOT_COLD_WARM_BLOCKS)
    or they read almost nothing against it (a tenth). A warm reference that read as much
    as a cold start was no warm start — the warm-up round of a probe whose files were not
    in the cache yet (LibreOffice's first start on a fresh testbed: 372,792 blocks, and
    every cold start after it 372,632) — and cold trials that read that much came from the
    disk."""
    if cold_blocks > warm_blocks:
        return False
    return warm_blocks <= NOT_COLD_WARM_BLOCKS or cold_blocks <= 0.1 * warm_blocks


def _caveats(data: ReportData, cell: CellData, samples: list[float], timeouts: int,
             confidence: float, summary: stats.Summary | None) -> list[stats.Caveat]:
    """The samples' own caveats (`stats.warnings_for`), then what only the trials show."""
    mode = cell.mode
    warm_samples = cell.samples("warm") if mode == "cold" else []
    warm_median = median_of(warm_samples) if len(warm_samples) >= 3 else None
    found = list(stats.warnings_for(samples, timeouts=timeouts, warm_median=warm_median,
                                    confidence=confidence, summary=summary))
    if sequential(data):  # its trial count is set by --min-runs, not --trials
        found = [stats.Caveat(w.code, {**w.params, "option": "--min-runs"})
                 if w.code == stats.CaveatCode.TOO_FEW_TRIALS else w for w in found]
    if mode == "cold" and not any(w.code == stats.CaveatCode.NOT_COLD for w in found):
        found += _not_cold_by_blocks(data, cell)
    failed, aborted = cell.failed(mode), cell.count("aborted", mode)
    if failed:
        found.append(stats.Caveat(RowCaveat.FAILED, {"count": failed}))
    if aborted:
        found.append(stats.Caveat(RowCaveat.ABORTED, {"count": aborted}))
    if mode == "warm" and not cell.cell.network:  # a link has no cache to drop
        found.append(stats.Caveat(RowCaveat.WARM))
    return found


def sequential(data: ReportData) -> bool:
    """Whether any run pooled here stopped its cells once decided: then only the confidence
    sequences are valid intervals of its ratios."""
    return any(r.config.get(k) is not None for r in data.runs
               for k in ("min_runs", "max_runs", "max_time_s"))


#: Why a sequential run stopped a cell undecided, as its record says.
STOPPED_UNDECIDED = ("max-runs", "max-time", "out-of-reach")


def stop_reason(data: ReportData, cell: CellData) -> str | None:
    """Why a sequential run stopped the cell (decided, max-runs, max-time), as the run
    recorded it; None when no run did."""
    reason = None
    for run in data.runs:
        stopping = run.environment.get("stopping")
        if isinstance(stopping, dict) and isinstance(stopping.get(cell.key), str):
            reason = stopping[cell.key]
    return reason


def band_params(band: stats.Band) -> dict[str, stats.Param]:
    """A band as a verdict's numbers: ``tolerance``, ``band`` (what set it) and, where known,
    ``band_reference_s``."""
    out: dict[str, stats.Param] = {"tolerance": band.tolerance, "band": str(band.basis)}
    if band.reference_s is not None:
        out["band_reference_s"] = band.reference_s
    return out


def _judge(data: ReportData, cell: CellData, base: CellData, samples: list[float],
           base_samples: list[float], limits: list[float], base_censored: list[float],
           band: stats.Band, confidence: float
           ) -> tuple[str, dict[str, stats.Param], stats.RatioCI]:
    """The verdict by the method the data allow: the bootstrap at a fixed count; after
    stopping once decided, the confidence sequence of the rounds' paired ratios."""
    tolerance = band.tolerance
    if sequential(data):
        pairs = stats.pair_rounds(cell.timed_by_round(cell.mode),
                                  base.timed_by_round(cell.mode))
        v = stats.paired_verdict(pairs, tolerance=tolerance, confidence=confidence)
    else:
        v = stats.verdict(samples, base_samples, tolerance=tolerance, confidence=confidence,
                          seed=SEED, resamples=RESAMPLES, loaded_censored=known_limits(limits),
                          baseline_censored=base_censored)
    params: dict[str, stats.Param] = {**band_params(band), "lower_bound": v.lower_bound,
                                      "method": v.ratio.method}
    reason = stop_reason(data, cell)
    if v.kind == stats.VerdictKind.UNDECIDED and reason in STOPPED_UNDECIDED:
        params["stopped"] = reason
        params["trials"] = len(samples) + len(limits)
        params["timeouts"] = len(limits)
        if sequential(data):
            needed = stats.trials_needed(pairs, tolerance, confidence)
            params["decidable"] = needed is not None  # within stats.NEEDED_LIMIT trials
            if needed is not None:
                params["trials_needed"] = needed
    return v.kind, params, v.ratio


def _verdict(data: ReportData, cell: CellData, base: CellData | None, samples: list[float],
             limits: list[float], tolerance: float | None, confidence: float
             ) -> tuple[str, dict[str, stats.Param], stats.RatioCI | None, list[stats.Caveat]]:
    """(kind, its numbers, the ratio to unloaded, caveats) of a cell against its
    baseline."""
    mode = cell.mode
    base_samples = base.samples(mode) if base else []
    if cell.unloaded:  # the band its loaded cells are judged against
        own = (stats.censored_median(samples, known_limits(limits))[0] if samples else None)
        return RowKind.BASELINE, band_params(stats.band_for(own, tolerance)), None, []
    if base is None:
        scheduler = cell.cell.scheduler
        return (RowKind.NO_BASELINE, {"reason": "no-cell", "scheduler": scheduler}, None,
                [stats.Caveat(RowCaveat.NO_BASELINE, {"scheduler": scheduler})])
    if not base_samples:
        return RowKind.NO_BASELINE, {"reason": "no-samples"}, None, []
    base_censored = known_limits(base.timeout_limits(mode))
    if not samples and limits and not math.isnan(min(limits)):
        base_median = float(np.median(base_samples))
        if base_median == 0:
            return RowKind.NO_DATA, {"reason": "zero-baseline"}, None, []
        return RowKind.TIMED_OUT, {"timeouts": len(limits),
                                   "ratio_at_least": min(limits) / base_median}, None, []
    if not samples:
        return RowKind.NO_DATA, {"reason": "no-trials"}, None, []
    base_median = stats.censored_median(base_samples, base_censored)[0]
    if base_median == 0:
        return RowKind.NO_DATA, {"reason": "zero-baseline"}, None, []
    kind, params, ratio = _judge(data, cell, base, samples, base_samples, limits,
                                 base_censored, stats.band_for(base_median, tolerance),
                                 confidence)
    return kind, params, ratio, []


def _row(data: ReportData, cell: CellData, tolerance: float | None, confidence: float
         ) -> Row:
    mode = cell.mode
    samples = cell.samples(mode)
    limits = cell.timeout_limits(mode)
    censored = known_limits(limits)
    summary = (stats.summarize(samples, confidence=confidence, resamples=RESAMPLES, seed=SEED,
                               censored=censored) if samples else None)
    base = data.baseline_of(cell)
    warnings = _caveats(data, cell, samples, len(limits), confidence, summary)
    kind, params, ratio, more = _verdict(data, cell, base, samples, limits, tolerance, confidence)
    warnings += more
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
        failed=cell.failed(mode), aborted=cell.count("aborted", mode),
        warmups=sum(1 for t in cell.trials if t["warmup"]),
        baseline_key=base.key if base else None,
        ratio=ratio, verdict_kind=kind, verdict_params=params, warnings=tuple(warnings),
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
    ratio, ref_runs = None, 0
    if ref is not None and ref is not cell:
        ref_unit, ref_rates = bulk_rates(ref)
        if ref_rates and ref_unit == unit and float(np.median(ref_rates)) > 0:
            ratio = _bulk_ratio(rates, ref_rates, confidence)
            ref_runs = len(ref_rates)
    return Bulk(unit, len(rates), float(np.median(rates)), ref.key if ref else None, ratio,
                ref_runs)


def _bulk_ratio(rates: list[float], ref_rates: list[float], confidence: float
                ) -> stats.RatioCI:
    """The ratio of the two median speeds, with an interval only where both sides have a
    sample to make one: a bootstrap of one number per side would be [r, r]."""
    if min(len(rates), len(ref_rates)) < stats.min_trials(confidence):
        point = float(np.median(rates)) / float(np.median(ref_rates))
        return stats.RatioCI(point, math.nan, math.nan, confidence, "none")
    return stats.ratio_of_medians(rates, ref_rates, confidence=confidence,
                                  resamples=RESAMPLES, seed=SEED)


def notes(data: ReportData) -> list[stats.Caveat]:
    """Report-level remarks (`NoteCode`): unfinished runs, several runs pooled, uneven trial
    counts."""
    out = [stats.Caveat(NoteCode.UNFINISHED_RUN, {"run": r.id})
           for r in data.runs if r.finished_at is None]
    if len(data.runs) > 1:
        out.append(stats.Caveat(NoteCode.POOLED_RUNS, {"runs": len(data.runs)}))
    ns = {len(c.counted) for c in data.cells}
    if len(ns) > 1 and not sequential(data):  # (a run until decided means them to differ)
        out.append(stats.Caveat(NoteCode.UNEQUAL_TRIALS, {"fewest": min(ns), "most": max(ns)}))
    return out
