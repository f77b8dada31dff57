"""report.export.markdown: a Prepare column only where a cell has a prepare step."""

from __future__ import annotations

import io
from pathlib import Path

from helpers import PREPARED, make_db

from backburner import report


def _markdown(path: Path) -> list[str]:
    out = io.StringIO()
    report.export_to(report.load(str(path)), "markdown", out)
    return [ln for ln in out.getvalue().splitlines() if ln.startswith("|")]


def test_prepare_column(tmp_path: Path) -> None:
    make_db(tmp_path / "p.db", medians=PREPARED, trials=6)
    make_db(tmp_path / "o.db", trials=6)
    table = _markdown(tmp_path / "p.db")
    assert table[0].startswith("| Scheduler | Prepare | Load |")
    assert sum("`replay`" in row for row in table[2:]) == 2
    assert all(row.count(" | ") == table[0].count(" | ") for row in table)
    assert "Prepare" not in _markdown(tmp_path / "o.db")[0]
