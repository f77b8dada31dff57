"""Reports from a result database: loading, summary rows, terminal table, exports, compare,
HTML. `report.html` (the one part that draws plots) is imported on its own."""

from .compare import CompareResult, CompareRow, compare, compare_groups, render_compare
from .data import GROUPINGS, CellData, ReportData, load, split
from .export import export, formats
from .summary import Row, headline, notes, summary_rows
from .terminal import console_for, render_terminal, render_text

__all__ = [
    "GROUPINGS", "CellData", "CompareResult", "CompareRow", "ReportData", "Row", "compare",
    "compare_groups", "console_for", "export", "formats", "groupings", "headline", "load",
    "notes", "render_compare", "render_terminal", "render_text", "split", "summary_rows",
]


def groupings() -> tuple[str, ...]:
    return GROUPINGS
