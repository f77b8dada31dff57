"""report.export.json: the interval under summary.median_ci is the one every table shows."""

from __future__ import annotations

import io
import json
from pathlib import Path

from helpers import make_db, raw_samples

from backburner import report, stats
from backburner.report.export import json as json_export
from backburner.report.summary import median_text
from backburner.units import fmt_range


def test_median_ci_is_the_exact_interval_the_tables_show(tmp_path: Path) -> None:
    make_db(tmp_path / "r.db")
    data = report.load(str(tmp_path / "r.db"))
    out = io.StringIO()
    report.export_to(data, "json", out)
    doc = json.loads(out.getvalue())
    assert doc["version"] == json_export.VERSION == 2
    rows = {r.cell.key: r for r in report.summary_rows(data)}
    for cell in doc["cells"]:
        x = raw_samples(str(tmp_path / "r.db"), cell["key"])
        summary = cell["summary"]
        assert summary["median_ci"] == list(stats.order_statistic_ci(x))
        assert summary["median_ci"] == list(rows[cell["key"]].median_ci)
        assert summary["median_ci_bootstrap"] == list(stats.bootstrap_median_ci(x))
        assert "median_ci_exact" not in summary
        assert median_text(rows[cell["key"]]).endswith(f"[{fmt_range(*summary['median_ci'])}]")
