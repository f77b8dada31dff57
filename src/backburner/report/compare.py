"""Comparing two result databases: the same cells matched, B judged against A.

Cells are matched by every dimension (probe, scheduler, load, policy, preparation), with the
same device label first and then without it (a study moved to another device): a cell
prepared one way is never judged against one prepared another way. Timed-out trials count at
their limit, as in the report (`report.summary`): medians they reach are lower bounds (≥),
and intervals they reach are open. B/A is the ratio of
medians with a bootstrap interval; Mann–Whitney U and Cliff's delta are shown beside it.
"""

from __future__ import annotations

import io
import shutil
from dataclasses import dataclass, replace
from enum import StrEnum

from rich.console import Console
from rich.text import Text

from .. import stats
from ..base.errors import DataError
from ..base.quantities import fmt_factor, fmt_ratio_ci, fmt_s, one_line
from ..store.cell import NO_PREPARE, Cell
from .data import CellData, ReportData, split
from .summary import RESAMPLES, SEED, known_limits, sequential, summary_rows
from .terminal import AdaptiveTable, Column
from .words import axis_name, compare_verdict_text


class CompareKind(StrEnum):
    """B against A; `report.words` says each (and its params) in words."""

    EQUIVALENT = "equivalent"      # tolerance; identical: B's samples are A's
    SLOWER = "slower"              # the whole B/A interval above 1 + tolerance
    FASTER = "faster"
    INCONCLUSIVE = "inconclusive"  # tolerance
    NO_DATA = "no-data"            # reason: no-trials (missing_a, missing_b) | zero-median


class ProtectionChange(StrEnum):
    """How a loaded cell's ratio to its own unloaded run moved from A to B: what the user
    bought a policy for, apart from whether the start itself got faster or slower."""

    WORSE = "worse"          # B's interval of the ratio to unloaded wholly above A's
    BETTER = "better"        # wholly below A's
    UNCLEAR = "unclear"      # the intervals overlap: no change shown
    NONE = "none"            # an unloaded cell, or a side without a ratio


@dataclass(frozen=True)
class CompareRow:
    cell: Cell      # A's cell; B's may differ in its device label only
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
    kind: CompareKind
    params: dict[str, stats.Param]       # the numbers behind the kind (see CompareKind)
    trials_a: int = 0                    # counted trials, any status
    trials_b: int = 0
    lost_a: int = 0                      # of them timed out, failed or aborted
    lost_b: int = 0
    lower_bound_a: bool = False          # timeouts reach the median: the truth may be higher
    lower_bound_b: bool = False
    #: each side's median / its own unloaded run's (the report's ratio), and how it moved
    protection_a: stats.RatioCI | None = None
    protection_b: stats.RatioCI | None = None
    protection: ProtectionChange = ProtectionChange.NONE

    @property
    def label(self) -> str:
        return self.cell.label


@dataclass(frozen=True)
class CompareResult:
    a: str
    b: str
    tolerance: float
    confidence: float
    rows: list[CompareRow]
    only_a: list[str]
    only_b: list[str]
    notes: list[str]


def compare_reports(a: ReportData, b: ReportData, *, tolerance: float = 0.10,
            confidence: float = 0.95) -> CompareResult:
    """Match cells of A and B by every dimension of the cell (the device label first as
    well, then without it) and compare B against A. Each must hold one machine's runs."""
    a.require_one_machine()
    b.require_one_machine()
    def ident(c: CellData, with_device: bool) -> Cell:
        return c.cell if with_device else replace(c.cell, device="")

    pairs: list[tuple[CellData, CellData]] = []
    left_a, left_b = list(a.cells), list(b.cells)
    # exact matches first (same device label), then by identity without the device
    for with_device in (True, False):
        index: dict[Cell, list[CellData]] = {}
        for c in left_b:
            index.setdefault(ident(c, with_device), []).append(c)
        still_a = []
        for c in left_a:
            cands = index.get(ident(c, with_device), [])
            if len(cands) == 1 or (with_device and cands):
                m = cands.pop(0)
                pairs.append((c, m))
                left_b.remove(m)
            else:
                still_a.append(c)
        left_a = still_a
    order = {c.key: i for i, c in enumerate(a.cells)}
    pairs.sort(key=lambda p: order[p[0].key])

    seq = sequential(a) or sequential(b)
    prot_a, prot_b = (_protection(d, tolerance, confidence) for d in (a, b))
    rows = [_with_protection(_compare_cells(ca, cb, tolerance, confidence, seq),
                             prot_a.get(ca.key), prot_b.get(cb.key)) for ca, cb in pairs]
    out_notes = []
    dev_pairs = sorted({(ca.cell.device, cb.cell.device) for ca, cb in pairs
                        if ca.cell.device != cb.cell.device})
    if dev_pairs:
        out_notes.append("device labels differ between A and B ("
                         + ", ".join(f"{x} vs {y}" for x, y in dev_pairs)
                         + "): cells were matched by probe, scheduler, load, policy and "
                         "preparation")
    modes = {(ca.mode, cb.mode) for ca, cb in pairs if ca.mode != cb.mode}
    if modes:
        out_notes.append("some matched cells are cold in one database and warm in the other")
    for name, d in (("A", a), ("B", b)):
        if not d.finished:
            out_notes.append(f"{name} ({d.path}) is from an unfinished run")
    return CompareResult(a.path, b.path, tolerance, confidence, rows,
                         [f"{c.cell.probe} · {c.label}" for c in left_a],
                         [f"{c.cell.probe} · {c.label}" for c in left_b], out_notes)


def _compare_cells(ca: CellData, cb: CellData, tolerance: float,
                   confidence: float, sequential: bool = False) -> CompareRow:
    """B's cell against A's. Where either side's run stopped its cells once decided, their
    trial counts depend on the data, so the ratio's interval is the confidence sequence
    (`stats.sequential`), valid whatever the counts, instead of the bootstrap."""
    sa, sb = ca.samples(), cb.samples()
    la, lb = known_limits(ca.timeout_limits()), known_limits(cb.timeout_limits())
    (ma, low_a), (mb, low_b) = (stats.censored_median(s, lim) if s else (None, False)
                                for s, lim in ((sa, la), (sb, lb)))
    ratio = mw = cd = None
    params: dict[str, stats.Param] = {"tolerance": tolerance}
    if not sa or not sb:
        kind = CompareKind.NO_DATA
        params = {"reason": "no-trials", "missing_a": not sa, "missing_b": not sb}
    elif ma == 0:
        kind, params = CompareKind.NO_DATA, {"reason": "zero-median"}
    else:
        v = (stats.sequential_verdict(sb, sa, tolerance=tolerance, confidence=confidence,
                                      loaded_censored=lb, baseline_censored=la)
             if sequential else
             stats.verdict(sb, sa, tolerance=tolerance, confidence=confidence, seed=SEED,
                           resamples=RESAMPLES, loaded_censored=lb, baseline_censored=la))
        params["method"] = v.ratio.method
        ratio = v.ratio
        mw = stats.mann_whitney(sb + lb, sa + la)  # ranks: a timeout at its limit is slow
        cd = stats.cliffs_delta(sb + lb, sa + la)
        if (sorted(sa), sorted(la)) == (sorted(sb), sorted(lb)):  # a copy of A: no change
            kind, params = CompareKind.EQUIVALENT, {**params, "identical": True}
        else:
            kind = _COMPARED[v.kind]
    return CompareRow(ca.cell, cb.cell.device,
                      len(sa), len(sb), len(ca.timeout_limits()), len(cb.timeout_limits()),
                      ma, mb, ratio, mw, cd, kind, params,
                      len(ca.mode_trials()), len(cb.mode_trials()), _lost(ca), _lost(cb),
                      low_a, low_b)


def _protection(data: ReportData, tolerance: float, confidence: float
                ) -> dict[str, stats.RatioCI]:
    """Each loaded cell's ratio to its unloaded baseline, as the report computes it."""
    return {row.cell.key: row.ratio for row in summary_rows(data, tolerance=tolerance,
                                                           confidence=confidence)
            if row.ratio is not None and not row.cell.unloaded}


def _with_protection(row: CompareRow, a: stats.RatioCI | None,
                     b: stats.RatioCI | None) -> CompareRow:
    change = ProtectionChange.NONE
    if a is not None and b is not None:
        change = (ProtectionChange.WORSE if b.lo > a.hi else
                  ProtectionChange.BETTER if b.hi < a.lo else ProtectionChange.UNCLEAR)
    return replace(row, protection_a=a, protection_b=b, protection=change)


#: compare asks whether B changed either way, a two-sided question: an interval whose upper
#: end alone is inside the band ("at most", a one-sided answer) leaves it inconclusive
_COMPARED = {stats.VerdictKind.SLOWER: CompareKind.SLOWER,
             stats.VerdictKind.FASTER: CompareKind.FASTER,
             stats.VerdictKind.INDISTINGUISHABLE: CompareKind.EQUIVALENT,
             stats.VerdictKind.AT_MOST: CompareKind.INCONCLUSIVE,
             stats.VerdictKind.UNDECIDED: CompareKind.INCONCLUSIVE}


def _verdict(r: CompareRow) -> str:
    return compare_verdict_text(r.kind, r.params, r.ratio)


def _lost(c: CellData) -> int:
    return c.count("timeout") + c.failed() + c.count("aborted")


def gate(result: CompareResult, *, slower_than: float | None = None,
         changed: bool = False) -> list[str]:
    """The cells that fail a CI gate: significantly slower than 1 + `slower_than` (the whole
    B/A interval above it), or (with `changed`) changed either way beyond the tolerance.

    Either gate also fails a cell whose B has no completed trial where A has some, or lost a
    larger share of its trials than A (timed out, failed or aborted): a B that times out or
    fails every trial has no median to be slower with, and must not pass for that."""
    failing = []
    for r in result.rows:
        if slower_than is None and not changed:
            break
        if r.n_a and not r.n_b:
            failing.append(f"{r.label}: B has no completed trial ({r.lost_b} of {r.trials_b} "
                           f"timed out, failed or aborted; A has {r.n_a})")
        elif r.trials_a and r.trials_b and r.lost_b * r.trials_a > r.lost_a * r.trials_b:
            failing.append(f"{r.label}: B lost {r.lost_b} of {r.trials_b} trials (timed out, "
                           f"failed or aborted), A {r.lost_a} of {r.trials_a}")
        elif slower_than is not None and r.ratio is not None and r.ratio.lo > 1 + slower_than:
            failing.append(f"{r.label}: B {fmt_factor(r.ratio.ratio)}\u00d7 A (CI from "
                           f"{fmt_factor(r.ratio.lo)}\u00d7)")
        elif changed and r.kind in ("slower", "faster"):
            failing.append(f"{r.label}: {_verdict(r)}")
    return failing


def render_compare(result: CompareResult, *, width: int | None = None,
                   color: bool = False) -> str:
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
    style = {"slower": "bold red", "faster": "green", "equivalent": "green",
             "inconclusive": "yellow"}
    verdict = Column("Verdict", [Text(one_line(_verdict(r)), style=style.get(r.kind, ""))
                                 for r in rows], wrap=True)
    sched = [one_line(r.cell.scheduler) for r in rows]
    load = [one_line(r.cell.load) for r in rows]
    policy = [one_line(r.cell.policy) for r in rows]
    med_a = [("\u2265" if r.lower_bound_a else "") + fmt_s(r.median_a) for r in rows]
    med_b = [("\u2265" if r.lower_bound_b else "") + fmt_s(r.median_b) for r in rows]
    prepared = any(r.cell.prepare != NO_PREPARE for r in rows)  # else no column for it
    prep = [Column("Prepare", [one_line(r.cell.prepare) for r in rows])] if prepared else []
    to = ([Column("T/O A/B", [f"{r.timeouts_a}/{r.timeouts_b}" for r in rows], "right")]
          if timeouts else [])
    axis = axis_name(r.cell for r in rows)
    prot = [_protection_text(r) for r in rows]
    protected = [Column("Unloaded\u00d7 A\u2192B", prot, "right")] \
        if any(r.protection != ProtectionChange.NONE for r in rows) else []
    wide = [Column(axis, sched), *prep, Column("Load", load), Column("Policy", policy),
            Column("n A/B", [f"{r.n_a}/{r.n_b}" for r in rows], "right"), *to,
            Column("Median A s", med_a, "right"), Column("Median B s", med_b, "right"),
            Column("B/A [CI]", [fmt_ratio_ci(r.ratio) for r in rows], "right"),
            *protected, Column("p", mw, "right"), Column("\u03b4", cd, "right"), verdict]
    narrow = [Column("Cell", [f"{s}\n" + (f"prepare {one_line(r.cell.prepare)}\n"
                                            if prepared else "")
                              + f"{ld}\n{p}\nn {r.n_a}/{r.n_b}"
                              + (f"\nT/O {r.timeouts_a}/{r.timeouts_b}" if timeouts else "")
                              for r, s, ld, p in zip(rows, sched, load, policy, strict=True)]),
              Column("Median s\nA / B", [f"{x}\n{y}" for x, y in zip(med_a, med_b, strict=True)],
                     "right"),
              Column("B/A\n[CI]" + ("\nUnloaded\u00d7\nA\u2192B" if protected else ""),
                     [fmt_ratio_ci(r.ratio).replace(" ", "\n", 1)
                      + (f"\n{t.replace(' ', chr(10), 1)}" if protected else "")
                      for r, t in zip(rows, prot, strict=True)], "right"),
              Column("p\n\u03b4", [f"{p}\n{d}".replace(" ", "\n") for p, d in
                                  zip(mw, cd, strict=True)], "right"),
              verdict]
    middle = [Column(axis, sched), *prep, Column("Load", load),
              Column("Policy", policy),
              Column("n A/B", [f"{r.n_a}/{r.n_b}" + (f"\nT/O {r.timeouts_a}/{r.timeouts_b}"
                                                  if timeouts else "") for r in rows], "right"),
              *narrow[1:]]
    buf = io.StringIO()
    console = Console(file=buf, width=width, color_system="standard" if color else None,
                      force_terminal=color, highlight=False, emoji=False)
    console.print(Text(f"A = {one_line(result.a)}\nB = {one_line(result.b)}\n"))
    if rows:
        console.print(AdaptiveTable([wide, middle, narrow]))
        console.print()
        console.print(f"ratio = median B / median A [{result.confidence * 100:g}% bootstrap "
                      "CI]; p = Mann\u2013Whitney U "
                      "(two-sided); \u03b4 = Cliff's delta of B vs A (+ = B slower)"
                      + ("; Unloaded\u00d7 = each side's median over its own unloaded run's "
                         "(the protection), worse or better when the two intervals do not "
                         "overlap" if protected else ""),
                      markup=False)
    else:
        console.print("no cells in common")
    for name, items in (("only in A", result.only_a), ("only in B", result.only_b)):
        for item in items:
            console.print(Text(f"{name}: {one_line(item)}"))
    for n in result.notes:
        console.print(Text(f"note: {one_line(n)}"))
    return buf.getvalue()


def _protection_text(r: CompareRow) -> str:
    """'1.16\u00d7 \u2192 3.20\u00d7 worse': the ratio to unloaded in A, in B, and the move."""
    if r.protection_a is None and r.protection_b is None:
        return "\u2013"
    a, b = (fmt_factor(p.ratio) + "\u00d7" if p is not None else "\u2013"
            for p in (r.protection_a, r.protection_b))
    word = {ProtectionChange.WORSE: " worse", ProtectionChange.BETTER: " better"}.get(
        r.protection, "")
    return f"{a} \u2192 {b}{word}"


def compare_groups(data: ReportData, by: str, *, tolerance: float = 0.10,
                   confidence: float = 0.95) -> list[CompareResult]:
    """Each machine, kernel or run of one database against the first one seen: the same
    cells matched and judged as `compare` does two databases."""
    groups = split(data, by)
    if len(groups) < 2:
        raise DataError(f"{data.path} holds one {by} only ({groups[0][0] if groups else '-'})",
                        f"--by {by} compares two or more")
    (_, reference), rest = groups[0], groups[1:]
    return [compare_reports(reference, other, tolerance=tolerance, confidence=confidence)
            for _, other in rest]
