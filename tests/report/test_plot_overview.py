"""report.plot_overview: one group per scheduler × load, every cell once, whiskers at
min and max, only when there are two loads or more."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import LOAD, LOAD2, MEDIANS, make_db

from backburner import report
from backburner.report import plot, plot_overview


def gids(fig, prefix: str) -> list:
    return fig.findobj(lambda a: (a.get_gid() or "").startswith(prefix))


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> report.ReportData:
    path = tmp_path_factory.mktemp("overview") / "r.db"
    medians = {**MEDIANS, ("mq-deadline", LOAD2, "default"): 0.8,
               ("bfq", LOAD2, "background"): 0.31}
    make_db(path, medians=medians)
    return report.load(str(path))


def test_every_cell_once_grouped_by_scheduler_and_load(data: report.ReportData) -> None:
    (pf,) = [f for f in plot.figures(data) if f.kind == "overview"]
    boxes = [a.get_gid().split(":", 1)[1] for a in gids(pf.figure, "box:")]
    assert sorted(boxes) == sorted(c.key for c in data.cells)
    groups = plot_overview.layout(data.cells)
    assert [(s, ld) for s, ld, _ in groups] == [
        (s, ld) for s in dict.fromkeys(c.cell.scheduler for c in data.cells)
        for ld in ("none", LOAD, LOAD2)]
    names = [t.get_text() for t in pf.figure.axes[0].child_axes[0].get_xticklabels()]
    assert names[0].endswith("unloaded") and names[1] == f"{groups[1][0]}\n{LOAD}"
    assert {a.get_gid() for a in gids(pf.figure, "idle:")} == {"idle:mq-deadline", "idle:bfq"}


def test_whiskers_reach_the_fastest_and_slowest_trial(data: report.ReportData) -> None:
    (pf,) = [f for f in plot.figures(data) if f.kind == "overview"]
    for cell in data.cells:
        ends = [y for line in gids(pf.figure, f"whisker:{cell.key}") for y in line.get_ydata()]
        values = cell.samples() + list(cell.timeout_limits())
        assert min(ends) == pytest.approx(min(values))
        assert max(ends) == pytest.approx(max(values))


def test_no_overview_for_a_single_load(tmp_path: Path) -> None:
    make_db(tmp_path / "one.db", medians={k: v for k, v in MEDIANS.items() if k[1] != LOAD2})
    data = report.load(str(tmp_path / "one.db"))
    assert not plot_overview.wanted(data.cells)
    assert "overview" not in [f.kind for f in plot.figures(data)]
