"""report.plot and report.plot_groups: what is drawn matches the data (boxes, dots,
timeouts, scales), and files are written."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers import LOAD, LOAD2, MEDIANS, PREPARED, SPECIAL, make_db
from matplotlib.colors import to_hex

from backburner import report
from backburner.base import errors
from backburner.report import plot, plot_groups, plot_style


def gid_artists(fig, prefix: str) -> list:
    return [a for a in fig.findobj(lambda a: (a.get_gid() or "").startswith(prefix))]


def points(artists: list) -> int:
    return sum(len(a.get_offsets()) for a in artists)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> report.ReportData:
    path = tmp_path_factory.mktemp("plot") / "r.db"
    medians = {**MEDIANS, ("mq-deadline", LOAD2, "default"): 0.8,
               ("bfq", LOAD2, "background"): 0.31}
    make_db(path, medians=medians, special=SPECIAL)
    return report.load(str(path))


@pytest.mark.parametrize("violin", [False, True])
def test_every_cell_and_sample_is_drawn(data: report.ReportData, violin: bool) -> None:
    figs = plot.figures(data, violin=violin)
    dists = [f for f in figs if f.kind in ("box", "violin")]
    kind = "violin" if violin else "box"
    assert [f.kind for f in figs] == ["overview", kind, kind, "ecdf", "ecdf", "order",
                                      "scatter"]
    figs = figs[1:]  # the overview has its own tests
    assert len(dists) == 2  # one per load
    for pf, load in zip(dists, (LOAD, LOAD2), strict=True):
        cells = [c for c in data.cells if c.cell.load in ("none", load)]
        keys = {c.key for c in cells}
        shapes = gid_artists(pf.figure, "box:") + gid_artists(pf.figure, "violin:")
        assert sorted(a.get_gid().split(":", 1)[1] for a in shapes) == sorted(keys)
        if violin:
            assert len(gid_artists(pf.figure, "violin:")) == len(cells)
        dots = gid_artists(pf.figure, "samples:")
        assert points(dots) == sum(len(c.samples()) for c in cells)
        for a in dots:  # each strip holds exactly its own cell's samples
            cell = data.cell(a.get_gid().split(":", 1)[1])
            assert sorted(a.get_offsets()[:, 1]) == pytest.approx(sorted(cell.samples()))
        timeouts = gid_artists(pf.figure, "timeouts:")
        assert points(timeouts) == sum(len(c.timeout_limits()) for c in cells)
        for a in timeouts:
            assert list(a.get_offsets()[:, 1]) == [12.0] * len(a.get_offsets())
        idle = gid_artists(pf.figure, "idle:")
        assert {a.get_gid() for a in idle} == {"idle:mq-deadline", "idle:bfq"}
        medians = {r.cell.scheduler: r.median for r in report.summary_rows(data) if r.cell.unloaded}
        for a in idle:
            assert a.get_segments()[0][0][1] == pytest.approx(medians[a.get_gid()[5:]])
        assert "gimp --version" in pf.figure._suptitle.get_text()
        assert "testbed:4G" in pf.figure._suptitle.get_text()
    for pf, load in zip(figs[2:4], (LOAD, LOAD2), strict=True):  # the ECDFs: every sample
        cells = [c for c in data.cells if c.cell.load in ("none", load)]
        lines = gid_artists(pf.figure, "ecdf:")
        assert {a.get_gid()[5:] for a in lines} == {c.key for c in cells if c.samples()}
        for a in lines:
            cell = data.cell(a.get_gid()[5:])
            assert sorted(a.get_xdata()) == pytest.approx(sorted(cell.samples()))
            # the starts done by the slowest completed one: a timed-out start never was
            done = len(cell.samples())
            assert a.get_ydata()[-1] == pytest.approx(done / (done + len(cell.timeout_limits())))
    order = gid_artists(figs[4].figure, "order:")  # every counted ok trial, in run order
    assert points(order) == sum(len(c.samples()) for c in data.cells)
    scatter = figs[-1].figure
    assert len(gid_artists(scatter, "point:")) == len(data.cells)
    labels = [t.get_text() for t in scatter.axes[0].texts]
    assert len(labels) == len(data.cells)
    assert any("(+2 timed out)" in t for t in labels)
    for pf in figs:
        pf.figure.clear()


def test_policy_colours_are_consistent(data: report.ReportData) -> None:
    figs = [f for f in plot.figures(data) if f.kind != "overview"]
    colours: dict[str, set[str]] = {}
    for pf in figs[:2]:
        for a in gid_artists(pf.figure, "samples:"):
            policy = a.get_gid().rsplit("|", 1)[1]
            colours.setdefault(policy, set()).add(to_hex(a.get_facecolor()[0]))
    assert all(len(c) == 1 for c in colours.values()), colours
    assert len({next(iter(c)) for c in colours.values()}) == len(colours)


def test_log_scale_only_for_a_wide_range(tmp_path: Path, data: report.ReportData) -> None:
    figs = [f for f in plot.figures(data) if f.kind == "box"]
    wide = figs[0].figure.axes[0]  # mq-deadline: 0.27 s idle vs 12 s timeouts
    assert wide.get_yscale() == "log"
    narrow = figs[1].figure.axes[0]  # 0.27..0.8 s
    assert narrow.get_yscale() == "linear"
    path = tmp_path / "n.db"
    make_db(path, medians={k: v for k, v in MEDIANS.items() if v < 1})
    for pf in plot.figures(report.load(str(path))):
        assert pf.figure.axes[0].get_yscale() == "linear"


def test_write_plots_writes_every_format(tmp_path: Path, data: report.ReportData) -> None:
    out = tmp_path / "plots"
    paths = plot.write_plots(data, str(out), ("png", "svg"))
    assert len(paths) == len(plot.figures(data)) * 2 == 7 * 2
    for p in paths:
        assert Path(p).parent == out and Path(p).stat().st_size > 1000
    pngs = [p for p in paths if p.endswith(".png")]
    assert all(Path(p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)
    assert all("<svg" in Path(p).read_text() for p in paths if p.endswith(".svg"))
    assert len(set(paths)) == len(paths)
    with pytest.raises(errors.UsageError, match="unknown plot format"):
        plot.write_plots(data, str(out), ("bmp9",))


def test_all_timed_out_cell_is_plotted_at_its_limit(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    medians = {("mq-deadline", "none", "-"): 0.27, ("mq-deadline", LOAD, "default"): 3.4}
    make_db(path, medians=medians, trials=5,
            special={("mq-deadline", LOAD, "default", r): "timeout" for r in range(1, 6)})
    data = report.load(str(path))
    box, _ecdf, _order, scatter = plot.figures(data)
    assert len(gid_artists(box.figure, "box:")) == 1  # nothing to box, only the idle cell
    assert points(gid_artists(box.figure, "timeouts:")) == 5
    (pt,) = [a for a in gid_artists(scatter.figure, "point:") if LOAD in a.get_gid()]
    assert np.allclose(pt.get_offsets()[:, 1], 12.0)
    assert any("all timed out" in t.get_text() for t in scatter.figure.axes[0].texts)


def test_cells_prepared_differently_are_grouped_apart(tmp_path: Path) -> None:
    """Each preparation is its own group with its own idle line and labels: a prepared cell
    is never drawn against the idle median of the unprepared one."""
    make_db(tmp_path / "p.db", medians=PREPARED, trials=6)
    data = report.load(str(tmp_path / "p.db"))
    box, ecdf, order, scatter = plot.figures(data)
    idle = {a.get_gid(): a.get_segments()[0][0][1] for a in gid_artists(box.figure, "idle:")}
    medians = {plot_style.group_label(r.cell): r.median for r in report.summary_rows(data)
               if r.cell.unloaded}
    assert set(idle) == {"idle:bfq", "idle:bfq \u00b7 prepare replay"}
    for gid, y in idle.items():
        assert y == pytest.approx(medians[gid[5:]])
    groups = [t.get_text() for t in box.figure.axes[0].child_axes[0].get_xticklabels()]
    assert groups == ["bfq", "bfq \u00b7 prepare replay"]
    for pf in (ecdf, order):
        labels = pf.figure.axes[0].get_legend_handles_labels()[1]
        assert len(set(labels)) == len(data.cells), labels
    texts = [t.get_text() for t in scatter.figure.axes[0].texts]
    assert len(set(texts)) == len(data.cells), texts


def test_group_plot_files_are_unique_for_a_long_probe(tmp_path: Path) -> None:
    """The default probe label is a whole command line: cut at 60 characters in a file
    name, each load of it must still get a file of its own."""
    probe = "python3 -c 'import json, sqlite3, email, http.client, xml.dom.minidom, asyncio'"
    medians = {("bfq", "none", "-"): 0.3, ("bfq", LOAD, "default"): 0.9,
               ("bfq", LOAD2, "default"): 0.5}
    store = make_db(tmp_path / "r.db", medians=medians, probe=probe, trials=6, close=False)
    make_db(None, store=store, medians=medians, probe=probe, trials=6, seed=2)
    data = report.load(str(tmp_path / "r.db"))
    paths = plot_groups.write_group_plots(data, "run", str(tmp_path / "plots"))
    assert len(paths) == len(set(paths)) == 3  # one per load, "none" too
    assert sorted(p.name for p in (tmp_path / "plots").iterdir()) == sorted(
        Path(p).name for p in paths)


def _drawn_texts(fig) -> list[str]:
    """Every text of a figure as drawn: titles, axis labels, legends, and the labels of
    every major and minor tick in view."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.text import Text

    FigureCanvasAgg(fig)
    fig.draw_without_rendering()
    ticks = [t for ax in fig.axes for axis in (ax.xaxis, ax.yaxis) for minor in (False, True)
             for t in axis.get_ticklabels(minor=minor)]
    return [t.get_text() for t in [*fig.findobj(Text), *ticks]
            if t.get_visible() and t.get_text()]


def test_no_axis_label_or_tick_is_raw_mathtext(tmp_path: Path) -> None:
    """With mathtext off (a `$` in a probe's name stays a `$`), matplotlib's own log tick
    labels printed as `$\\mathdefault{2\\times10^{-1}}$` (the ECDF's x axis, and every
    `report --plot` PNG of it): every tick is a plain number."""
    path = tmp_path / "r.db"  # 0.18 s to 1.95 s: a log axis of barely more than a decade
    make_db(path, medians={("bfq", "none", "-"): 0.18, ("bfq", LOAD, "default"): 1.95,
                           ("bfq", LOAD, "background"): 0.2}, trials=12, spread=0.01)
    data = report.load(str(path))
    figs = plot.figures(data)
    assert any(pf.kind == "ecdf" and pf.figure.axes[0].get_xscale() == "log" for pf in figs)
    for pf in figs:
        texts = _drawn_texts(pf.figure)
        assert texts, pf.name
        bad = [t for t in texts if "\\mathdefault" in t or "\\times" in t or t.startswith("$")]
        assert bad == [], (pf.name, bad)
        pf.figure.clear()


def test_a_policy_has_one_colour_in_every_plot_of_every_report(tmp_path: Path) -> None:
    """`default` was orange where a run also had `background`, and blue where it had not:
    a colour is the policy's own, whatever else the report holds."""
    one, two = tmp_path / "one.db", tmp_path / "two.db"
    make_db(one, medians={("bfq", "none", "-"): 0.3, ("bfq", LOAD, "default"): 0.9})
    make_db(two, medians={("bfq", "none", "-"): 0.3, ("bfq", LOAD, "default"): 0.9,
                          ("bfq", LOAD, "background"): 0.35, ("bfq", LOAD, "my-own"): 0.4})
    a, b = (plot_style.policy_colours(report.load(str(p))) for p in (one, two))
    assert a["default"] == b["default"] == plot_style.POLICY_COLOURS["default"]
    assert len(set(b.values())) == len(b)  # and no two policies share one
    for pf in plot.figures(report.load(str(two))):
        for art in gid_artists(pf.figure, "samples:") + gid_artists(pf.figure, "ecdf:"):
            policy = art.get_gid().rsplit("|", 1)[1]
            got = art.get_color() if hasattr(art, "get_xdata") else art.get_facecolor()[0]
            assert to_hex(got) == to_hex(b[policy]), (pf.name, policy)
        pf.figure.clear()


def test_scatter_labels_clear_their_bars_and_each_other(data: report.ReportData) -> None:
    """A label sat on its point's horizontal bar (struck through) and two collided: each
    label's box, as drawn, now meets neither its own bars nor another label."""
    from matplotlib.path import Path as MPath

    (pf,) = [f for f in plot.figures(data) if f.kind == "scatter"]
    fig = pf.figure
    _drawn_texts(fig)
    renderer = fig.canvas.get_renderer()
    from matplotlib.text import Text

    def text_box(a):  # noqa: ANN001, ANN202 - the text as drawn, not its leader line
        a.update_positions(renderer)
        return Text.get_window_extent(a, renderer)

    boxes = {a.get_gid()[6:]: text_box(a) for a in gid_artists(fig, "label:")}
    assert len(boxes) == len(data.cells)
    items = list(boxes.items())
    for i, (k1, b1) in enumerate(items):
        for k2, b2 in items[i + 1:]:
            assert not b1.overlaps(b2), (k1, k2)
    for bars in gid_artists(fig, "bars:"):
        box = boxes[bars.get_gid()[5:]]
        for seg in bars.get_segments():
            shown = MPath(bars.get_transform().transform(seg))
            assert not shown.intersects_bbox(box, filled=True), bars.get_gid()
    fig.clear()
