"""The summary as a terminal table: every column when it fits, stacked or fewer when not.

Every cell is a `rich.text.Text`, never markup: a stored probe or load (`grep "[/x]" f`,
`[red]`) is shown as typed, and control characters (an escape sequence in a database) are
shown escaped (`units.one_line`), so nothing stored can drive the terminal.

When standard output is not a terminal (a pipe, a file) nothing is dropped: the widest
layout is printed unwrapped, or fitted to ``COLUMNS`` when that is set.
"""

from __future__ import annotations

import io
import os
import sys
from dataclasses import dataclass
from typing import IO, Any

from rich import box
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from ..base.quantities import fmt_range, fmt_s, one_line
from ..store.cell import NO_PREPARE
from .caveats import caveat_text, notes_text
from .data import ReportData
from .summary import Row, summary_rows
from .words import (
    axis_name,
    background_text,
    bands_text,
    bulk_ratio_text,
    bulk_speed_text,
    headline,
    is_network,
    lost_text,
    median_text,
    median_value_text,
    policy_text,
    row_verdict_text,
    same_axis,
    timeouts_text,
)

#: Width of "unlimited" output (a pipe or file): wide enough for every column.
UNWRAPPED = 100_000


def console_for(stream: IO[str] | None = None) -> Console:
    """A console for stream (stdout): its terminal width, else COLUMNS, else unwrapped."""
    stream = stream or sys.stdout
    if stream.isatty():
        return Console(file=stream)
    columns = os.environ.get("COLUMNS", "")
    width = int(columns) if columns.isdigit() and int(columns) > 0 else UNWRAPPED
    return Console(file=stream, width=width, soft_wrap=width == UNWRAPPED)


KIND_STYLE = {
    "slower": "bold red", "timed-out": "bold red", "faster": "green",
    "indistinguishable": "green", "inconclusive": "yellow", "baseline": "dim",
    "no-baseline": "yellow", "no-data": "yellow",
}


@dataclass
class Column:
    header: str
    cells: list[str | Text]
    justify: str = "left"
    wrap: bool = False  # only the verdict wraps; everything else keeps its line


def estimate(cols: list[Column]) -> int:
    """Width the table needs with every column unwrapped (a wrapping column: up to 26)."""
    total = 0
    for c in cols:
        lines = [ln for x in (c.header, *c.cells) for ln in str(x).splitlines()] or [""]
        widest = max(len(ln) for ln in lines)
        total += (min(widest, 26) if c.wrap else widest) + 2
    return total - 2 + max(len(cols) - 1, 0)  # no edge padding or edges; 1-space dividers


def table_of(cols: list[Column]) -> Table:
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    for c in cols:
        table.add_column(c.header, justify=c.justify, no_wrap=not c.wrap,  # type: ignore[arg-type]
                         min_width=16 if c.wrap else None)
    for i in range(len(cols[0].cells) if cols else 0):
        table.add_row(*(Text(x) if isinstance(x, str) else x for x in (c.cells[i] for c in cols)))
    return table


class AdaptiveTable:
    """A table that drops or stacks columns to fit the console instead of cropping them.

    ``layouts`` go from the widest to the narrowest; the first that fits is drawn.
    """

    def __init__(self, layouts: list[list[Column]]) -> None:
        self.layouts = layouts

    @property
    def row_count(self) -> int:
        return len(self.layouts[0][0].cells) if self.layouts and self.layouts[0] else 0

    def choose(self, width: int) -> list[Column]:
        for cols in self.layouts:
            if estimate(cols) <= width:
                return cols
        return self.layouts[-1]

    def __rich_console__(self, console: Console, options: Any) -> Any:
        yield table_of(self.choose(options.max_width))


def _summary_layouts(data: ReportData, rows: list[Row], conf: str) -> list[list[Column]]:
    multi = data.multi
    cells = [r.cell for r in rows]
    lost = any(r.failed or r.aborted for r in rows)
    pol = [one_line(policy_text(r)) for r in rows]
    where = ([Column("Probe", [one_line(r.cell.probe) for r in rows]),
              Column("Device", [one_line(r.cell.device) for r in rows])] if multi else [])
    prepared = any(r.cell.prepare != NO_PREPARE for r in rows)  # else no column for it
    prep = [one_line(r.cell.prepare) for r in rows]
    cell = [Column(axis_name(cells), [one_line(r.cell.scheduler) for r in rows]),
            *([Column("Prepare", prep)] if prepared else []),
            Column("Load", [one_line(r.cell.load) for r in rows]), Column("Policy", pol)]
    n = Column("n", [str(r.n) for r in rows], "right")
    median = Column(f"Median s [{conf} CI]", [median_text(r) for r in rows], "right")
    median2 = Column(f"Median s\n[{conf} CI]", [
        median_value_text(r) + (f"\n[{fmt_range(*r.median_ci)}]" if r.median_ci else "")
        for r in rows], "right")
    quart = Column("Q1\u2013Q3", [fmt_range(r.q1, r.q3) for r in rows], "right")
    out = Column("Out", [str(r.outliers) for r in rows], "right")
    to = Column("T/O", [timeouts_text(r) for r in rows], "right")
    to2 = Column("T/O", [str(r.timeouts) + (f"\n\u2265{fmt_s(r.timeout_limit)} s"
                                            if r.timeouts else "") for r in rows], "right")
    fa = [Column("Fail/Abort", [lost_text(r) for r in rows], "right")] if lost else []
    fa2 = [Column("F/A", [lost_text(r) for r in rows], "right")] if lost else []
    verdict = Column("Verdict", [Text(one_line(row_verdict_text(r)),
                                      style=KIND_STYLE.get(r.verdict_kind, ""))
                                 for r in rows], wrap=True)
    bg = Column("BG kbit/s rx/tx" if is_network(cells) else "BG MB/s r/w",
                [background_text(r) for r in rows], "right")
    has_bulk = any(r.bulk is not None for r in rows)
    # one line per row: a table written to a file is read (and grepped) by its lines
    bulk = [Column("Bulk speed, vs unprotected", [
        bulk_speed_text(r) + (f", {bulk_ratio_text(r)}" if r.bulk else "") for r in rows],
        "right")] if has_bulk else []
    stacked = Column("Cell", ["\n".join([one_line(x) for x in ([r.cell.probe, r.cell.device]
                                                                 if multi else [])
                                         + [r.cell.scheduler]]
                                        + ([f"prepare {pr}"] if prepared else [])
                                        + [one_line(r.cell.load), p])
                              for r, p, pr in zip(rows, pol, prep, strict=True)])
    return [
        [*where, *cell, n, median, quart, out, to, *fa, verdict, bg, *bulk],
        [*where, *cell, n, median, quart, out, to, *fa, verdict, bg],
        [*where, *cell, n, median2, to2, *fa2, verdict, bg],
        [*where, *cell, n, median2, to2, *fa2, verdict],
        [stacked, n, median2, to2, *fa2, verdict],
    ]


def render_terminal(data: ReportData, *, tolerance: float | None = None,
                    confidence: float = 0.95) -> Group:
    """Headline, the summary table (fitted to the console), legend, warnings and notes."""
    rows = summary_rows(data, tolerance=tolerance, confidence=confidence)
    conf = f"{confidence * 100:g}%"
    table = AdaptiveTable(_summary_layouts(data, rows, conf))
    cells = [r.cell for r in rows]
    bg = ("the client link's traffic during the probe (median kbit/s received / sent, "
          "the probe's page not counted)" if is_network(cells) else
          "background device throughput during the probe (median MB/s read / write, "
          "the probe's own IO not counted)")
    legend = Text(f"median [{conf} CI, exact order statistics] in seconds; Out = Tukey "
                  "outliers (kept); "
                  "T/O = timeouts; F/A = failed/aborted; verdicts against the unloaded cell "
                  f"of the same {same_axis(cells)}, band = {bands_text(rows, tolerance)}; "
                  f"BG = {bg}; Bulk = the load's own speed over its "
                  "whole run, and relative to the same load unprotected"
                  + ("; timeouts count at their limit (\u2265: the median is a lower bound, "
                     "\u221e: an interval open above)" if any(r.timeouts for r in rows) else ""),
                  style="dim")
    lines: list[Text] = []
    for r in rows:
        for w in r.warnings:
            lines.append(Text.assemble(("warning ", "yellow"),
                                       (f"{one_line(r.cell.label)}: ", "bold"),
                                       one_line(caveat_text(w))))
    for n in notes_text(data):
        lines.append(Text.assemble(("note ", "cyan"), one_line(n)))
    return Group(Text(one_line(headline(data)), style="bold"), Text(""), table, Text(""),
                 legend, *lines)


def render_text(data: ReportData, *, tolerance: float | None = None, confidence: float = 0.95,
                width: int = 160) -> str:
    """`render_terminal` as plain text (no colour codes), for logs and tests."""
    buf = io.StringIO()
    console = Console(file=buf, width=width, color_system=None, force_terminal=False,
                      highlight=False, emoji=False, legacy_windows=False)
    console.print(render_terminal(data, tolerance=tolerance, confidence=confidence))
    return buf.getvalue()
