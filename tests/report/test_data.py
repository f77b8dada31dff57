"""report.data: trials are pooled within one machine, and a machine is its machine id."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
from helpers import LOAD, MEDIANS, bb, make_db, one_line_error

from backburner import report
from backburner.base import errors
from backburner.store import Filter

ID_A, ID_B = "a1" * 16, "b2" * 16


def _cloned_lab(path: Path) -> str:
    """Two machines from one cloned image: the same host name, their own machine ids; on
    the second, the unprotected load is twice as slow."""
    store = make_db(path, close=False, hostname="lab-pc", machine=ID_A, trials=6)
    slower = {k: v * (2.0 if k == ("mq-deadline", LOAD, "default") else 1.0)
              for k, v in MEDIANS.items()}
    make_db(None, store=store, medians=slower, seed=2, hostname="lab-pc", machine=ID_B,
            trials=6)
    return str(path)


def test_machines_sharing_a_host_name_stay_apart(tmp_path: Path) -> None:
    data = report.load(_cloned_lab(tmp_path / "lab.db"))
    groups = report.split(data, "machine")
    assert [label for label, _ in groups] == [f"lab-pc ({ID_A[:12]})", f"lab-pc ({ID_B[:12]})"]
    (result,) = report.compare_groups(data, "machine")
    rows = {(r.cell.scheduler, r.cell.load, r.cell.policy): r for r in result.rows}
    assert rows[("mq-deadline", LOAD, "default")].kind == "slower"


def test_a_report_over_several_machines_is_refused(tmp_path: Path) -> None:
    """Pooled, a loaded cell of one machine would be judged against the idle cell of both."""
    path = _cloned_lab(tmp_path / "lab.db")
    data = report.load(path)
    with pytest.raises(errors.UsageError, match="2 machines"):
        report.summary_rows(data)
    with pytest.raises(errors.UsageError, match="2 machines"):
        report.compare_reports(data, data)
    for args in (["report", path], ["report", path, "--recommend"],
                 ["report", path, "--format", "json"], ["compare", path, path]):
        r = bb(*args)
        assert r.returncode == errors.UsageError.exit_status, (args, r.err)
        line = one_line_error(r)
        assert "--machine" in line and "compare --by machine" in line
    # one machine (by a prefix of its id), or the raw trials of all, are fine
    assert bb("report", path, "--machine", ID_B[:8]).returncode == 0
    assert report.summary_rows(report.load(path, Filter(machine=ID_A[:6])))
    r = bb("report", path, "--format", "csv")
    assert r.returncode == 0, r.err
    assert len(list(csv.DictReader(io.StringIO(r.out)))) == 2 * len(MEDIANS) * 7
    assert bb("compare", path, "--by", "machine").returncode == 0
