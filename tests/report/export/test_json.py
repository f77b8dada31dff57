"""report.export.json: the interval under summary.median_ci is the one every table shows,
and every text field has the codes and numbers it says beside it."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

from helpers import SPECIAL, make_db, raw_samples

from backburner import report, stats
from backburner.base.quantities import fmt_range
from backburner.report import caveats, words
from backburner.report.export import json as json_export
from backburner.report.summary import NoteCode, RowCaveat, RowKind
from backburner.report.words import median_text


def test_median_ci_is_the_exact_interval_the_tables_show(tmp_path: Path) -> None:
    make_db(tmp_path / "r.db")
    data = report.load(str(tmp_path / "r.db"))
    out = io.StringIO()
    report.export_to(data, "json", out)
    doc = json.loads(out.getvalue())
    assert doc["version"] == json_export.VERSION == 3
    rows = {r.cell.key: r for r in report.summary_rows(data)}
    for cell in doc["cells"]:
        x = raw_samples(str(tmp_path / "r.db"), cell["key"])
        summary = cell["summary"]
        assert summary["median_ci"] == list(stats.order_statistic_ci(x))
        assert summary["median_ci"] == list(rows[cell["key"]].median_ci)
        assert summary["median_ci_bootstrap"] == list(stats.bootstrap_median_ci(x))
        assert "median_ci_exact" not in summary
        assert median_text(rows[cell["key"]]).endswith(f"[{fmt_range(*summary['median_ci'])}]")


def test_verdicts_warnings_and_notes_carry_codes_and_numbers(tmp_path: Path) -> None:
    """A script reads codes and numbers, never the English beside them: each text field can
    be said again from the codes and numbers next to it."""
    path = str(tmp_path / "r.db")
    make_db(path, special=SPECIAL, finish=False)
    out = io.StringIO()
    report.export_to(report.load(path), "json", out)
    doc = json.loads(out.getvalue())
    kinds, codes = set(), set()
    for cell in doc["cells"]:
        v, r = cell["verdict"], cell["ratio_to_baseline"]
        ratio = None if r is None else stats.RatioCI(
            r["ratio"], r["lo"], math.inf if r["hi"] is None else r["hi"], r["confidence"])
        assert v["text"] == words.cell_verdict_text(v["kind"], v["params"], ratio)
        kinds.add(v["kind"])
        for w in cell["warnings"]:
            assert set(w) == {"code", "message", "params"}
            assert w["message"] == caveats.caveat_text(stats.Caveat(w["code"], w["params"]))
            codes.add(w["code"])
    assert kinds == {"baseline", "slower", "indistinguishable"}
    assert codes == {"timeouts", "aborted", "failed"}
    (timeouts,) = [w for c in doc["cells"] for w in c["warnings"] if w["code"] == "timeouts"]
    assert timeouts["params"] == {"count": 2, "reach": "interval"}
    slower = next(c for c in doc["cells"] if c["verdict"]["kind"] == "slower")
    base = next(c for c in doc["cells"] if c["key"] == slower["baseline"])
    reference = base["summary"]["median"]  # 0.27 s: 100 ms would be more than 25% of it
    assert slower["verdict"]["params"] == {
        "tolerance": 0.25, "band": "widest", "band_reference_s": reference,
        "lower_bound": False, "method": "bootstrap"}
    assert base["verdict"]["params"] == {"tolerance": 0.25, "band": "widest",
                                         "band_reference_s": reference}
    assert doc["statistics"]["tolerance"] is None
    assert doc["statistics"]["band"] == {
        "rule": "noticeable", "text": words.band_rule_text(), "fraction": 0.1,
        "seconds": 0.1, "widest": 0.25}
    assert doc["note_codes"] == [{"code": "unfinished-run", "params": {"run": 1}}]
    assert doc["notes"] == [caveats.caveat_text(stats.Caveat(n["code"], n["params"]))
                            for n in doc["note_codes"]]
    assert doc["statistics"]["outlier_fence"] == stats.TUKEY_K == 1.5
    assert doc["statistics"]["outlier_rule"] == doc["cells"][0]["summary"]["outlier_rule"] \
        == words.OUTLIER_RULE


def test_a_band_given_by_hand_is_the_run_s_band(tmp_path: Path) -> None:
    make_db(tmp_path / "r.db")
    doc = json_export.to_json(report.load(str(tmp_path / "r.db")), tolerance=0.05)
    assert doc["statistics"]["tolerance"] == 0.05
    assert doc["statistics"]["band"] == {"rule": "given",
                                         "text": "\u00b15%, given with --tolerance"}
    for cell in doc["cells"]:
        if cell["verdict"]["kind"] != "baseline":
            assert cell["verdict"]["params"]["tolerance"] == 0.05
            assert cell["verdict"]["params"]["band"] == "given"


def test_the_schema_documents_every_kind_and_code() -> None:
    doc = (Path(__file__).parents[3] / "docs" / "reference" / "json-schema.md").read_text()
    codes = {*stats.VerdictKind, *RowKind, *stats.CaveatCode, *RowCaveat, *NoteCode,
             *stats.TimeoutReach}
    assert {str(c) for c in codes if f"`{c}`" not in doc} == set()
