"""Reports from a result database: loading, summary rows, terminal table, exports, compare,
HTML. `report.html` (the one part that draws plots) is imported on its own."""

from .compare import CompareResult, CompareRow, compare, render_compare
from .data import CellData, ReportData, load
from .export import export, formats
from .summary import Row, headline, notes, summary_rows
from .terminal import console_for, render_terminal, render_text

__all__ = [
    "CellData", "CompareResult", "CompareRow", "ReportData", "Row", "compare", "console_for",
    "export", "formats", "headline", "load", "notes", "render_compare", "render_terminal",
    "render_text", "summary_rows",
]
