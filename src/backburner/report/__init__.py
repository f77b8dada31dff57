"""Reports from a result database: loading, summary rows, terminal table, exports, compare,
HTML. `report.html` (the one part that draws plots) is imported on its own.

The names below load their modules on first use: the CLI builds its parser from this
package's constants without importing numpy, rich or matplotlib (`run` needs none of them).
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "CompareResult": "compare", "CompareRow": "compare", "compare_reports": "compare",
    "compare_groups": "compare", "render_compare": "compare", "gate": "compare",
    "GROUPINGS": "names", "CellData": "data", "ReportData": "data", "load": "data",
    "split": "data",
    "export_to": "export", "formats": "export",
    "Row": "summary", "headline": "words", "notes": "summary", "summary_rows": "summary",
    "console_for": "terminal", "render_terminal": "terminal", "render_text": "terminal",
}

__all__ = sorted(_WHERE)
# (no name here may be a module's name: importing report.compare would replace it)


def __getattr__(name: str) -> Any:
    try:
        module = importlib.import_module(f".{_WHERE[name]}", __name__)
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(module, name)
    globals()[name] = value
    return value
