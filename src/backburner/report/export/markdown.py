"""Markdown: the summary as a GitHub-flavoured table, warnings as a list below.

Every stored text is escaped: a probe or load may hold ``|``, backticks, ``*`` or newlines,
and none of them may break the table or turn into markup.
"""

from __future__ import annotations

import re
from typing import TextIO

from ...base.quantities import DASH, fmt_range, one_line
from ...store.cell import NO_PREPARE
from ..caveats import caveat_text, notes_text
from ..data import ReportData
from ..summary import summary_rows
from ..words import (
    axis_name,
    background_text,
    bands_text,
    bulk_ratio_text,
    bulk_speed_text,
    is_network,
    lost_text,
    median_text,
    policy_text,
    row_verdict_text,
    timeouts_text,
)
from .registry import exporter

_SPECIAL = re.compile(r"([\\`*_{}\[\]<>()#+!|~])")


def text(value: str) -> str:
    """Plain text for a table cell: markup characters escaped, one line, nothing that could
    drive a terminal it is printed on (`units.one_line`)."""
    return _SPECIAL.sub(r"\\\1", one_line(" ".join(value.splitlines())))


def code(value: str) -> str:
    """An inline code span that no backtick or pipe in `value` can end or split."""
    one_line = " ".join(value.splitlines()).replace("|", "\\|")
    ticks = "`" * (max((len(m) for m in re.findall(r"`+", one_line)), default=0) + 1)
    pad = " " if one_line.startswith("`") or one_line.endswith("`") else ""
    return f"{ticks}{pad}{one_line}{pad}{ticks}"


@exporter("markdown")
def write(data: ReportData, out: TextIO, tolerance: float | None, confidence: float) -> None:
    out.write(render_markdown(data, tolerance=tolerance, confidence=confidence))


def render_markdown(data: ReportData, *, tolerance: float | None = None,
                    confidence: float = 0.95) -> str:
    rows = summary_rows(data, tolerance=tolerance, confidence=confidence)
    conf = f"{confidence * 100:g}%"
    network = is_network(r.cell for r in rows)  # the link's words (`words.is_network`)
    header = [axis_name(r.cell for r in rows), "Load", "Policy", "n", f"Median s [{conf} CI]",
              "Q1\u2013Q3 s", "Timeouts", "Fail/Abort", "Verdict",
              "BG kbit/s rx/tx" if network else "BG MB/s r/w", "bulk_speed",
              "bulk_speed_ratio"]
    align = [":--", ":--", ":--", "--:", "--:", "--:", "--:", "--:", ":--", "--:", "--:", "--:"]
    prepared = any(r.cell.prepare != NO_PREPARE for r in rows)  # else no column for it
    if prepared:
        header.insert(1, "Prepare")
        align.insert(1, ":--")
    if data.multi:
        header = ["Probe", "Device", *header]
        align = [":--", ":--", *align]
    lines = [f"**{text(', '.join(data.probes))}** on **{text(', '.join(data.devices))}**"
             f" \u2014 verdicts against unloaded within {text(bands_text(rows, tolerance))}",
             "",
             "| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |"]
    for r in rows:
        cells = [text(r.cell.probe), text(r.cell.device)] if data.multi else []
        verdict = text(row_verdict_text(r))
        cells += [code(r.cell.scheduler), *([code(r.cell.prepare)] if prepared else []),
                  code(r.cell.load), code(policy_text(r)), str(r.n),
                  text(median_text(r)), text(fmt_range(r.q1, r.q3)), text(timeouts_text(r)),
                  text(lost_text(r)),
                  f"**{verdict}**" if r.verdict_kind in ("slower", "timed-out") else verdict,
                  text(background_text(r)), text(bulk_speed_text(r)),
                  text(bulk_ratio_text(r) or DASH)]
        lines.append("| " + " | ".join(cells) + " |")
    extra = [f"- {text(r.cell.label)}: {text(caveat_text(w))}" for r in rows
             for w in r.warnings]
    extra += [f"- {text(n)}" for n in notes_text(data)]
    if extra:
        lines += ["", *extra]
    return "\n".join(lines) + "\n"
