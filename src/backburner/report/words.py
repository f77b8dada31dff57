"""The sentences of a report's verdicts and the short texts of a row.

`stats` and the report's rows hold kinds, codes and numbers; this module turns the
verdicts into words (and the advice in them, "raise --timeout"), so the terminal,
Markdown, HTML and the JSON export's ``text`` fields say the same thing, while a script
reads the codes and numbers beside them; `caveats` does the same for the warnings and
notes beside a verdict. Each kind has one entry in a table below; a test checks that none
is missing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping

from .. import stats
from ..base.quantities import (
    DASH,
    TIMES,
    fmt_factor,
    fmt_mbps,
    fmt_pct,
    fmt_range,
    fmt_ratio_ci,
    fmt_s,
)
from ..stats import VerdictKind
from ..store.cell import NO_PREPARE, Cell
from .data import ReportData
from .summary import MB, Row, RowKind

GE = "\u2265"
PLUS_MINUS = "\u00b1"

OUTLIER_RULE = (
    f"Tukey fences: x < Q1 - {stats.TUKEY_K}*IQR or x > Q3 + {stats.TUKEY_K}*IQR "
    "(numpy linear quantiles; flagged, never dropped)"
)

Params = Mapping[str, stats.Param]


def plural_s(n: int) -> str:
    return "" if n == 1 else "s"


def are(n: int) -> str:
    return "is" if n == 1 else "are"


def were(n: int) -> str:
    return "was" if n == 1 else "were"


def _inverse(x: float) -> float:
    """1 / x, infinite at 0 (a cell that took no time is infinitely faster, not an error)."""
    return math.inf if x == 0 else 1 / x


def _ci(lo: float, hi: float) -> str:
    return f"{fmt_factor(lo)}{DASH}{fmt_factor(hi)}{TIMES}"


def _kind_of_ci(r: stats.RatioCI) -> str:
    """'95% CI' (bootstrap, a fixed number of trials), '95% sequential CI' (a confidence
    sequence: valid however early the run stopped), '95% paired sequential CI' (one of the
    rounds' paired ratios)."""
    kind = {stats.SEQUENTIAL_METHOD: "sequential CI",
            stats.PAIRED_METHOD: "paired sequential CI"}.get(r.method, "CI")
    return f"{fmt_pct(r.confidence)} {kind}"


# --------------------------------------------------------------------------- verdicts


def _pct3(fraction: float) -> str:
    """A band's width in three significant digits: '25%', '11.6%'."""
    return f"{fraction * 100:.3g}%"


def band_text(tolerance: float) -> str:
    """'\u00b125%', '\u00b111.6%' (three significant digits: a band sized by the rule is
    rarely a round number)."""
    return f"{PLUS_MINUS}{_pct3(tolerance)}"


def band_rule_text(tolerance: float | None = None) -> str:
    """How the verdicts' band is set: by hand, or the rule a person notices (its constants
    are `stats.band`'s; docs/design/statistics.md has their sources)."""
    if tolerance is not None:
        return f"{band_text(tolerance)}, given with --tolerance"
    return (f"the difference a person notices (more than {fmt_pct(stats.NOTICEABLE_FRACTION)} "
            f"and more than {stats.NOTICEABLE_S * 1000:g} ms of the unloaded start, at most "
            f"{band_text(stats.WIDEST)})")


def _band_why(p: Params) -> str:
    """Why a band is as wide as it is, without the band: '100 ms of a 0.620 s start'."""
    basis = str(p.get("band", stats.Basis.GIVEN))
    ref = p.get("band_reference_s")
    start = f"a {fmt_s(float(ref))} s start" if ref is not None else "the start"
    ms = f"{stats.NOTICEABLE_S * 1000:g} ms"
    if basis == stats.Basis.GIVEN:
        return "given with --tolerance"
    if basis == stats.Basis.ABSOLUTE:
        return f"{ms} of {start}"
    if basis == stats.Basis.WIDEST and ref is not None:
        return (f"the widest band: {ms} would be {stats.NOTICEABLE_S / float(ref):.0%} of "
                f"{start}")
    return (f"{fmt_pct(stats.NOTICEABLE_FRACTION)} of {start}"
            + (f" is more than {ms}" if ref is not None else ""))


def band_reason_text(p: Params) -> str:
    """A verdict's band (a row's ``tolerance``, ``band`` and ``band_reference_s``) and why
    it is that wide: '\u00b125%, the widest band: 100 ms would be 56% of a 0.180 s start'."""
    why = _band_why(p)
    sep = ", " if str(p.get("band")) in (stats.Basis.GIVEN, stats.Basis.WIDEST) else ": "
    return f"{band_text(float(p['tolerance']))}{sep}{why}"


def bands_text(rows: Iterable[Row], tolerance: float | None = None) -> str:
    """The band of every unloaded cell's verdicts, after the rule that sized them: 'the
    difference a person notices (...): mq-deadline \u00b125%, ...; bfq ...'."""
    rows = list(rows)
    multi = len({(r.cell.probe, r.cell.device) for r in rows}) > 1
    bands = []
    for r in rows:
        if r.verdict_kind == RowKind.BASELINE and "tolerance" in r.verdict_params:
            where = [r.cell.probe, r.cell.device] if multi else []
            where.append(r.cell.scheduler)
            if r.cell.prepare != NO_PREPARE:
                where.append(f"prepare {r.cell.prepare}")
            p = r.verdict_params
            bands.append(f"{' '.join(where)} {band_text(float(p['tolerance']))} "
                         f"({_band_why(p)})")
    if tolerance is not None or not bands:
        return band_rule_text(tolerance)
    return f"{band_rule_text(tolerance)}: {', '.join(bands)}"


def _ci_words(r: stats.RatioCI) -> str:
    return f"{_kind_of_ci(r)} {_ci(r.lo, r.hi)}"


def _slower(r: stats.RatioCI, tolerance: float, at_least: str) -> str:
    return (f"{at_least}{fmt_factor(r.ratio)}{TIMES} slower than unloaded "
            f"({_ci_words(r)}; band {band_text(tolerance)})")


def _faster(r: stats.RatioCI, tolerance: float, at_least: str) -> str:
    return (f"{fmt_factor(_inverse(r.ratio))}{TIMES} faster than unloaded "
            f"({_kind_of_ci(r)} {_ci(_inverse(r.hi), _inverse(r.lo))}; band "
            f"{band_text(tolerance)})")


def _indistinguishable(r: stats.RatioCI, tolerance: float, at_least: str) -> str:
    return (f"indistinguishable from unloaded: within {band_text(tolerance)} both ways "
            f"({at_least}{fmt_factor(r.ratio)}{TIMES}, {_ci_words(r)})")


def _at_most(r: stats.RatioCI, tolerance: float, at_least: str) -> str:
    return (f"at most {fmt_factor(r.hi)}{TIMES} unloaded ({fmt_pct(r.confidence)}): not "
            f"noticeably slower, within {band_text(tolerance)} "
            f"({at_least}{fmt_factor(r.ratio)}{TIMES}, {_ci_words(r)})")


def _open_above_advice(r: stats.RatioCI) -> str:
    if r.method in (stats.SEQUENTIAL_METHOD, stats.PAIRED_METHOD):
        return ("timeouts, or too few trials for a sequential interval, leave it open above: "
                "raise --timeout or --min-runs")
    return "timeouts leave it open above: raise --timeout to measure them"


def _undecided_fixed(r: stats.RatioCI, tolerance: float, at_least: str) -> str:
    advice = _open_above_advice(r) if math.isinf(r.hi) else "run more trials to decide"
    return (f"undecided at {band_text(tolerance)}: {at_least}{fmt_factor(r.ratio)}{TIMES} "
            f"unloaded ({_ci_words(r)}); {advice}")


#: What an undecided cell of a run that stopped once decided ran out of, and what to give.
_BUDGETS = {"max-runs": ("--max-runs", "raise --max-runs"),
            "max-time": ("--max-time", "give more --max-time")}


def _needed(p: Params, tolerance: float) -> str:
    """What would decide it, as far as the spread seen says."""
    if "decidable" not in p:
        return ""
    if not p["decidable"]:
        return (f"at the ratio and spread seen no practical number of trials decides it "
                f"at {band_text(tolerance)}")
    n = int(p["trials_needed"])
    return f"at the spread seen about {n} trial{plural_s(n)} would decide it"


def _undecided(r: stats.RatioCI, at_least: str, p: Params) -> str:
    """A cell a sequential run stopped undecided: which budget (or that no budget it had
    could decide it), after how many trials, and what would decide it (a longer --timeout,
    where timeouts leave it open; about how many trials, where the spread says)."""
    trials = int(p.get("trials", 0))
    tolerance = float(p["tolerance"])
    needed = _needed(p, tolerance)
    ratio = f"{at_least}{fmt_factor(r.ratio)}{TIMES} unloaded ({_ci_words(r)})"
    head = f"undecided at {band_text(tolerance)}"
    if p["stopped"] == "out-of-reach":
        return (f"{head}, stopped after {trials} trial{plural_s(trials)}: {ratio}; not even "
                f"--max-runs could decide it" + (f" ({needed})" if needed else ""))
    option, advice = _BUDGETS[str(p["stopped"])]
    if math.isinf(r.hi) and int(p.get("timeouts", 0)):
        advice = "timeouts leave it open above: raise --timeout to measure them"
    elif needed:
        advice = f"{needed}: {advice}" if p.get("decidable") else needed
    else:
        advice += " to decide"
    return (f"{head} when {option} ran out after {trials} trial{plural_s(trials)}: "
            f"{ratio}; {advice}")


_JUDGED: dict[str, Callable[[stats.RatioCI, float, str], str]] = {
    VerdictKind.SLOWER: _slower,
    VerdictKind.FASTER: _faster,
    VerdictKind.INDISTINGUISHABLE: _indistinguishable,
    VerdictKind.AT_MOST: _at_most,
    VerdictKind.UNDECIDED: _undecided_fixed,
}


def verdict_text(v: stats.Verdict) -> str:
    """A `stats.Verdict` against unloaded, in one sentence with its band ("3.20\u00d7 slower
    than unloaded (95% CI ...; band \u00b125%)", "at most 1.12\u00d7 unloaded (95%) ...");
    "\u2265" where timeouts make the ratio a lower bound."""
    return _JUDGED[v.kind](v.ratio, v.tolerance, GE if v.lower_bound else "")


def _no_baseline(p: Params) -> str:
    if p["reason"] == "no-cell":
        return "no unloaded baseline for this scheduler"
    return "the unloaded baseline has no completed trials"


def _timed_out(p: Params) -> str:
    n = int(p["timeouts"])
    return (f"all {n} counted trial{plural_s(n)} timed out: "
            f"{GE}{fmt_factor(float(p['ratio_at_least']))}{TIMES} slower than unloaded")


def _no_data(p: Params) -> str:
    if p["reason"] == "zero-baseline":
        return "no verdict: the unloaded median is zero, so there is no ratio to unloaded"
    return "no completed trials"


_UNJUDGED: dict[str, Callable[[Params], str]] = {
    RowKind.BASELINE: lambda p: "unloaded baseline",
    RowKind.NO_BASELINE: _no_baseline,
    RowKind.TIMED_OUT: _timed_out,
    RowKind.NO_DATA: _no_data,
}


def cell_verdict_text(kind: str, params: Params, ratio: stats.RatioCI | None) -> str:
    """A cell's verdict (a `stats.VerdictKind` or a `summary.RowKind`, the numbers behind
    it): against unloaded (`verdict_text`), or why there is none."""
    if kind == VerdictKind.UNDECIDED and ratio is not None \
            and params.get("stopped") in (*_BUDGETS, "out-of-reach"):
        return _undecided(ratio, GE if params.get("lower_bound") else "", params)
    if kind in _JUDGED and ratio is not None:
        return verdict_text(stats.Verdict(VerdictKind(kind), ratio, float(params["tolerance"]),
                                          bool(params["lower_bound"])))
    return _UNJUDGED[kind](params)


def row_verdict_text(r: Row) -> str:
    """A summary row's verdict in words."""
    return cell_verdict_text(r.verdict_kind, r.verdict_params, r.ratio)


# --------------------------------------------------------------------------- compare verdicts


def _changed(kind: str) -> Callable[[Params, stats.RatioCI | None], str]:
    def text(p: Params, r: stats.RatioCI | None) -> str:
        assert r is not None
        factor = r.ratio if kind == "slower" else _inverse(r.ratio)
        return f"changed: B {fmt_factor(factor)}{TIMES} {kind}"
    return text


def _equivalent(p: Params, r: stats.RatioCI | None) -> str:
    if p.get("identical"):
        return "no change (identical samples)"
    return f"equivalent within {PLUS_MINUS}{fmt_pct(float(p['tolerance']))}"


def _compare_inconclusive(p: Params, r: stats.RatioCI | None) -> str:
    assert r is not None
    return (f"inconclusive: B/A {fmt_factor(r.lo)}{DASH}{fmt_factor(r.hi)} straddles "
            f"{PLUS_MINUS}{fmt_pct(float(p['tolerance']))}")


def _compare_no_data(p: Params, r: stats.RatioCI | None) -> str:
    if p["reason"] == "zero-median":
        return "median of A is zero: no ratio"
    missing = " and ".join(side for side in ("A", "B") if p[f"missing_{side.lower()}"])
    return f"no completed trials in {missing}"


#: `report.compare.CompareKind` -> its words (kept here by value: compare imports words)
COMPARED: dict[str, Callable[[Params, stats.RatioCI | None], str]] = {
    "slower": _changed("slower"),
    "faster": _changed("faster"),
    "equivalent": _equivalent,
    "inconclusive": _compare_inconclusive,
    "no-data": _compare_no_data,
}


def compare_verdict_text(kind: str, params: Params, ratio: stats.RatioCI | None) -> str:
    """B judged against A (`report.compare`): changed, equivalent, inconclusive or why not."""
    return COMPARED[kind](params, ratio)


# --------------------------------------------------------------------------- a row's short texts


def median_value_text(r: Row) -> str:
    """The median, marked \u2265 where timeouts make it a lower bound."""
    if r.median is None:
        return DASH
    return (GE if r.median_lower_bound else "") + fmt_s(r.median)


def median_text(r: Row) -> str:
    """The median and its interval: '0.300 [0.289\u20130.307]'."""
    if r.median is None:
        return DASH
    value = median_value_text(r)
    return f"{value} [{fmt_range(*r.median_ci)}]" if r.median_ci else value


def is_network(cells: Iterable[Cell]) -> bool:
    """Whether every cell is a network study's (`bench --net-link`): its device is a slow
    link, its scheduler the link's queue, its traffic counted in bits."""
    cells = list(cells)
    return bool(cells) and all(c.network for c in cells)


def axis_name(cells: Iterable[Cell]) -> str:
    """The dimension a disk study calls the scheduler: the link's queue in a network study."""
    return "Queue" if is_network(cells) else "Scheduler"


def same_axis(cells: Iterable[Cell]) -> str:
    """What a loaded cell shares with the unloaded cell it is judged against."""
    return "link" if is_network(cells) else "scheduler"


def _kbit(mb_s: float | None) -> str:
    return DASH if mb_s is None or not math.isfinite(mb_s) else f"{mb_s * 8000:.0f}"


def background_text(r: Row) -> str:
    """Background throughput, read / write MB/s (a link's: kbit/s received / sent)."""
    if r.read_mbps is None and r.write_mbps is None:
        return DASH
    if r.cell.network:
        return f"{_kbit(r.read_mbps)} / {_kbit(r.write_mbps)}"
    return f"{fmt_mbps(r.read_mbps)} / {fmt_mbps(r.write_mbps)}"


def bulk_speed_text(r: Row) -> str:
    """The load's own speed: MB/s for bytes (kbit/s over a link), else its unit per
    second."""
    b = r.bulk
    if b is None:
        return DASH
    if r.cell.network and b.unit == "bytes":
        return f"{_kbit(b.speed / MB)} kbit/s"
    if b.unit.endswith("bytes"):
        return f"{fmt_mbps(b.speed / MB)} MB/s"
    return f"{b.speed:.3g} {b.unit}/s"


def bulk_ratio_text(r: Row) -> str:
    """The load's speed relative to the same load unprotected."""
    b = r.bulk
    if b is None:
        return ""
    if r.cell.policy == "default":
        return "unprotected"
    if b.ratio is None:
        return "no unprotected cell"
    runs = f"n={b.runs}" + (f" vs {b.reference_runs}" if b.reference_runs != b.runs else "")
    if math.isnan(b.ratio.lo):  # too few load runs for an interval: the ratio and its n
        return f"{fmt_factor(b.ratio.ratio)}{TIMES} ({runs})"
    return f"{fmt_ratio_ci(b.ratio)} ({runs})"


def timeouts_text(r: Row) -> str:
    """'2 (\u226512.0 s)': how many timed out, and the largest limit they hit."""
    if not r.timeouts:
        return "0"
    return f"{r.timeouts} ({GE}{fmt_s(r.timeout_limit)} s)"


def lost_text(r: Row) -> str:
    """Failed / aborted trials."""
    return f"{r.failed}/{r.aborted}"


def policy_text(r: Row) -> str:
    """The policy, marked where the cell only has warm trials (a disk's: a network study
    has no cache to drop)."""
    return r.cell.policy + (" (warm)" if r.mode == "warm" and not r.cell.network else "")


def headline(data: ReportData) -> str:
    """What was measured where, and whether the run finished."""
    probes = ", ".join(data.probes)
    devices = ", ".join(data.devices)
    state = "finished" if data.finished else "unfinished"
    return f"{probes} on {devices} \u2014 {data.path} ({state})"
