"""report.export.csv: every trial with every dimension of its cell."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from helpers import PREPARED, make_db

from backburner import report


def test_the_prepare_dimension_is_a_column(tmp_path: Path) -> None:
    make_db(tmp_path / "p.db", medians=PREPARED, trials=6)
    out = io.StringIO()
    report.export_to(report.load(str(tmp_path / "p.db")), "csv", out)
    rows = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert {(r["load"], r["prepare"]) for r in rows} == {
        (k[1], k[3] if len(k) == 4 else "none") for k in PREPARED}
    for r in rows:
        assert r["cell_key"].endswith("prepare=replay") == (r["prepare"] == "replay")
