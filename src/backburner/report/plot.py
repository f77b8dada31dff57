"""Plots of a result database (matplotlib, no pyplot, so no GUI backend and no global state).

Per (probe, device, load): a box plot (or violin) per cell with every sample drawn on top as a
jittered strip, grouped by scheduler and preparation (with the group's unloaded cell first and
its median as a dashed reference line), coloured by policy with the same colours in every
plot; timeouts are red crosses at the limit they hit. Per (probe, device): median latency
against median background throughput, one point per cell, error bars spanning the quartiles.

Per (probe, device) with two loads or more, first, an overview: one group per scheduler ×
load, whiskers at min and max (`plot_overview`).

`figures` returns the figures without saving them, so tests can inspect what is drawn; every
drawn element carries a gid ("box:KEY", "violin:KEY", "samples:KEY", "timeouts:KEY",
"idle:GROUP" (the scheduler, and its preparation if any), "point:KEY"). The figures of
`compare --by` are `plot_groups`'s, drawn in the same style.
"""

from __future__ import annotations

import base64
import io
import os
from dataclasses import dataclass

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from ..base.quantities import slug
from ..files import outfile
from . import plot_overview
from .data import CellData, ReportData
from .plot_formats import check_formats
from .plot_style import (
    DPI,
    HTML_CSS_DPI,
    IDLE_COLOUR,
    MARKERS,
    TIMEOUT_COLOUR,
    PlotFigure,
    annotate,
    cell_values,
    draw_distribution,
    group_label,
    plain_log_ticks,
    policy_colours,
    set_y_scale,
    titles,
    unique_names,
    use_log_scale,
)
from .summary import MB, Row, summary_rows


def figures(data: ReportData, *, violin: bool = False,
            tolerance: float = 0.10) -> list[PlotFigure]:
    """All plots of `data`, unsaved: per load box (or violin) plots and an ECDF, per probe
    and device the trials in run order and a scatter. Every text is plain: a `$` in a probe
    or load (a shell command) is no mathtext."""
    with matplotlib.rc_context({"text.parse_math": False}):
        return _figures(data, violin=violin, tolerance=tolerance)


def _figures(data: ReportData, *, violin: bool = False,
             tolerance: float = 0.10) -> list[PlotFigure]:
    rows = {r.cell.key: r for r in summary_rows(data, tolerance=tolerance)}
    colours = policy_colours(data)
    out: list[PlotFigure] = []
    unique = unique_names()
    groups: dict[tuple[str, str], list[CellData]] = {}
    for c in data.cells:
        groups.setdefault((c.cell.probe, c.cell.device), []).append(c)
    for (probe, device), cells in groups.items():
        loads = [ld for ld in dict.fromkeys(c.cell.load for c in cells) if ld != "none"] or ["none"]
        if plot_overview.wanted(cells):
            caption = (f"Start-up time of {probe} on {device}, one group per scheduler and "
                       "load: boxes span the quartiles, whiskers the fastest and slowest "
                       "trial, dashed line = unloaded median of the scheduler.")
            out.append(PlotFigure(unique(slug(f"overview-{probe}-{device}")), "overview",
                                  caption, plot_overview.overview_figure(
                                      probe, device, cells, rows, colours, violin)))
        for load in loads:
            fig = _distribution_figure(probe, device, load, cells, rows, colours, violin)
            kind = "violin" if violin else "box"
            caption = (f"Start-up time of {probe} on {device} under load {load}: every trial "
                       "as a dot, boxes span the quartiles, dashed line = unloaded median of "
                       "the scheduler, red \u00d7 = timeout at its limit.")
            out.append(PlotFigure(unique(slug(f"{kind}-{probe}-{device}-{load}")), kind,
                                  caption, fig))
        for load in loads:
            members = [c for c in cells if c.unloaded or c.cell.load == load]
            caption = (f"Empirical CDF of the start-up times of {probe} on {device} under "
                       f"load {load}: how long the slowest starts took, cell by cell.")
            out.append(PlotFigure(unique(slug(f"ecdf-{probe}-{device}-{load}")), "ecdf",
                                  caption, _ecdf_figure(probe, device, load, members,
                                                        colours)))
        caption = (f"Every counted trial of {probe} on {device} in the order it ran: a drift "
                   "or step shows the machine changing during the run.")
        out.append(PlotFigure(unique(slug(f"order-{probe}-{device}")), "order", caption,
                              _order_figure(probe, device, cells, colours)))
        fig = _scatter_figure(probe, device, cells, rows, colours)
        caption = (f"Median start-up time of {probe} on {device} against the bulk work's own "
                   "speed relative to unprotected (or, for results without it, the background "
                   "throughput during the probe).")
        out.append(PlotFigure(unique(slug(f"scatter-{probe}-{device}")), "scatter", caption,
                              fig))
    return out


def _distribution_figure(probe: str, device: str, load: str, cells: list[CellData],
                         rows: dict[str, Row], colours: dict[str, str],
                         violin: bool) -> Figure:
    groups = list(dict.fromkeys(group_label(c.cell) for c in cells))
    layout: list[tuple[str, list[CellData]]] = []
    for group in groups:
        mine = [c for c in cells if group_label(c.cell) == group]
        members = [c for c in mine if c.unloaded]
        if load != "none":
            members += [c for c in mine if c.cell.load == load]
        if members:
            layout.append((group, members))
    n_members = sum(len(m) for _, m in layout)
    fig = Figure(figsize=(min(15.0, max(6.5, 2.0 + 1.0 * n_members)), 5.2), dpi=DPI,
                 layout="constrained")
    ax = fig.add_subplot()
    ax.set_axisbelow(True)
    ax.grid(axis="y", color="#E3E6EA", linewidth=0.8)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)

    x = 0.0
    ticks: list[float] = []
    tick_labels: list[str] = []
    centres: list[float] = []
    all_values: list[float] = []
    has_timeouts = False
    for g, (sched, members) in enumerate(layout):
        if g:
            x += 0.7
            ax.axvline(x - 0.85, color="#D0D4DA", linewidth=0.8, zorder=0)
        first = x
        for i, cell in enumerate(members):
            row = rows[cell.key]
            samples, limits = cell_values(cell, row)
            colour = colours.get(cell.cell.policy, IDLE_COLOUR)
            all_values += samples + limits
            has_timeouts = has_timeouts or bool(limits)
            # the box spans the quartiles the table shows: timeouts count at their limit
            draw_distribution(ax, x, cell.key, samples + limits if samples else [], colour,
                               violin)
            rng = np.random.default_rng(1000 * g + i)
            if samples:
                jitter = rng.uniform(-0.16, 0.16, len(samples))
                ax.scatter(x + jitter, samples, s=16, color=colour, edgecolors="#1d232b",
                           linewidths=0.4, alpha=0.85, zorder=3, gid=f"samples:{cell.key}")
            if limits:
                jitter = rng.uniform(-0.12, 0.12, len(limits))
                ax.scatter(x + jitter, limits, s=46, marker="X", color=TIMEOUT_COLOUR,
                           edgecolors="white", linewidths=0.6, zorder=4,
                           gid=f"timeouts:{cell.key}")
            annotate(ax, x, row, samples, limits)
            ticks.append(x)
            tick_labels.append("unloaded" if cell.unloaded else cell.cell.policy)
            if i < len(members) - 1:
                x += 1.0
        last = x
        centres.append((first + last) / 2)
        base = next((rows[c.key] for c in members if c.unloaded), None)
        if base is not None and base.median is not None:
            ax.hlines(base.median, first - 0.45, last + 0.45, colors="#4a5360",
                      linestyles=(0, (5, 3)), linewidth=1.1, zorder=2, gid=f"idle:{sched}")
            if last > first:
                ax.annotate("unloaded", (last + 0.45, base.median), xytext=(3, 0),
                            textcoords="offset points", ha="left", va="center",
                            fontsize=8, color="#4a5360")
        x += 1.0

    ax.set_xticks(ticks, tick_labels, fontsize=9)
    long_labels = any(len(t) > 12 for t in tick_labels)
    if long_labels:
        ax.tick_params(axis="x", labelrotation=20)
        for label in ax.get_xticklabels():
            label.set_horizontalalignment("right")
    sec = ax.secondary_xaxis("bottom")
    sec.set_xticks(centres, [f"{s}" for s, _ in layout], fontsize=10.5, fontweight="bold")
    sec.tick_params(axis="x", length=0, pad=34 if long_labels else 20)
    sec.spines["bottom"].set_visible(False)
    ax.set_xlim(-0.8, x)
    set_y_scale(ax, all_values)
    ax.set_ylabel("start-up time (s)")
    what = f"load {load}" if load != "none" else "unloaded"
    titles(fig, ax, f"Start-up time of {probe} on {device}, {what}",
            f"every trial is a dot; {'bars' if violin else 'boxes'} span the quartiles; "
            "dashed line = unloaded median of the scheduler (and preparation); "
            "colour = policy of the background load; labels = median and ratio to unloaded"
            + ("; red \u2716 = timeout at its limit" if has_timeouts else ""))
    return fig


def _scatter_figure(probe: str, device: str, cells: list[CellData],
                    rows: dict[str, Row], colours: dict[str, str]) -> Figure:
    fig = Figure(figsize=(8.5, 5.6), dpi=DPI, layout="constrained")
    ax = fig.add_subplot()
    ax.set_axisbelow(True)
    ax.grid(color="#E3E6EA", linewidth=0.8)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    markers = {s: MARKERS[i % len(MARKERS)]
               for i, s in enumerate(dict.fromkeys(c.cell.scheduler for c in cells))}
    ys: list[float] = []
    labels: list[Label] = []
    by_bulk = any(rows[c.key].bulk is not None for c in cells)
    if by_bulk:  # the price of protection: the load's own speed against unprotected
        cells = [c for c in cells if _bulk_x(rows[c.key]) is not None]
    for cell in cells:
        row = rows[cell.key]
        if by_bulk:
            tx, tlo, thi = _bulk_x(row)  # type: ignore[misc]
        else:
            tput = _throughput_mbps(cell)
            tx, (tlo, thi) = ((float(np.median(tput)), np.quantile(tput, [0.25, 0.75]))
                              if tput else (0.0, (0.0, 0.0)))
        timed_out = row.median is None
        if timed_out:
            if row.timeout_limit is None:
                continue
            y, ylo, yhi = row.timeout_limit, row.timeout_limit, row.timeout_limit
        else:
            y, ylo, yhi = row.median, row.q1, row.q3
        ys += [ylo, yhi]
        colour = colours.get(cell.cell.policy, IDLE_COLOUR)
        bars = ax.errorbar([tx], [y], yerr=[[y - ylo], [yhi - y]],
                           xerr=[[tx - tlo], [thi - tx]], fmt="none", ecolor=colour,
                           elinewidth=1.2, capsize=3, alpha=0.8, zorder=2)
        for part in bars.lines[2]:
            part.set_gid(f"bars:{cell.key}")
        ax.scatter([tx], [y], s=70 if not timed_out else 90,
                   marker="X" if timed_out else markers[cell.cell.scheduler],
                   color=TIMEOUT_COLOUR if timed_out else colour,
                   edgecolors="#1d232b", linewidths=0.6, zorder=3, gid=f"point:{cell.key}")
        label = "unloaded" if cell.unloaded else f"{cell.cell.load} \u00b7 {cell.cell.policy}"
        label = f"{group_label(cell.cell)} \u00b7 {label}"
        if timed_out:
            label += " (all timed out)"
        elif row.timeouts:
            label += f" (+{row.timeouts} timed out)"
        labels.append(Label(cell.key, tx, y, tlo, thi, label,
                            TIMEOUT_COLOUR if row.timeouts else "#1d232b"))
    set_y_scale(ax, ys)
    ax.margins(x=0.08)
    ax.set_xlim(left=-0.03 * max(ax.get_xlim()[1], 1e-9))
    if by_bulk:
        ax.set_xlabel("bulk work's own speed, relative to the same load unprotected "
                      "(1 = full speed)")
        titles(fig, ax, f"Start-up time of {probe} on {device} vs the bulk work's speed",
                "one point per loaded cell: median start-up time against the load's own "
                "speed over the whole time it ran; bars: quartiles (y) and the ratio's CI "
                "(x); colour = policy, shape = scheduler")
    else:
        ax.set_xlabel("background device throughput during the probe (MB/s, read + write)")
        titles(fig, ax, f"Start-up time of {probe} on {device} vs background throughput",
                "one point per cell: median start-up time against median background "
                "throughput; bars span the quartiles; colour = policy, shape = scheduler")
    ax.set_ylabel("median start-up time (s)")
    _place_labels(ax, labels)  # last: it lays the figure out as it will be drawn
    return fig


def _bulk_x(row: Row) -> tuple[float, float, float] | None:
    if row.bulk is None:
        return None
    if row.cell.policy == "default":
        return 1.0, 1.0, 1.0
    r = row.bulk.ratio
    return (r.ratio, r.lo, r.hi) if r is not None else None


def _ecdf_figure(probe: str, device: str, load: str, cells: list[CellData],
                 colours: dict[str, str]) -> Figure:
    """The whole distribution, tail included: fraction of starts done by each time."""
    fig = Figure(figsize=(8.5, 5.0), dpi=DPI, layout="constrained")
    ax = fig.add_subplot()
    ax.grid(color="#E3E6EA", linewidth=0.8)
    styles = {s: ("-", "--", ":", "-.")[i % 4]
              for i, s in enumerate(dict.fromkeys(c.cell.scheduler for c in cells))}
    values: list[float] = []
    for cell in cells:
        samples = sorted(cell.samples())
        if not samples:
            continue
        values += samples
        # a timed-out start was not done by its limit: the curve stops short of 1
        frac = np.arange(1, len(samples) + 1) / (len(samples) + len(cell.timeout_limits()))
        label = f"{group_label(cell.cell)} · {'unloaded' if cell.unloaded else cell.cell.policy}"
        ax.step(samples, frac, where="post", color=colours.get(cell.cell.policy, IDLE_COLOUR),
                linestyle=styles[cell.cell.scheduler], linewidth=1.6, label=label,
                gid=f"ecdf:{cell.key}")
    if values and use_log_scale(values):
        ax.set_xscale("log")
        plain_log_ticks(ax.xaxis, values)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("start-up time (s)")
    ax.set_ylabel("fraction of starts done")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, frameon=False, loc="lower right")
    what = f"load {load}" if load != "none" else "unloaded"
    titles(fig, ax, f"Start-up times of {probe} on {device}, {what}: the whole distribution",
            "empirical CDF of every counted trial; the right end is the tail a user meets")
    return fig


def _order_figure(probe: str, device: str, cells: list[CellData],
                  colours: dict[str, str]) -> Figure:
    """Every trial in the order it ran: drift, warming, a machine that got busier."""
    fig = Figure(figsize=(10.0, 4.6), dpi=DPI, layout="constrained")
    ax = fig.add_subplot()
    ax.grid(color="#E3E6EA", linewidth=0.8)
    trials = sorted(((t["started_at"], t, c) for c in cells for t in c.counted
                     if t["status"] == "ok" and t["wall_s"] is not None),
                    key=lambda x: x[0])
    markers = {s: MARKERS[i % len(MARKERS)]
               for i, s in enumerate(dict.fromkeys(c.cell.scheduler for c in cells))}
    values = []
    for cell in cells:
        xs = [i for i, (_, _, c) in enumerate(trials) if c is cell]
        ys = [trials[i][1]["wall_s"] for i in xs]
        if not xs:
            continue
        values += ys
        ax.scatter(xs, ys, s=16, color=colours.get(cell.cell.policy, IDLE_COLOUR),
                   marker=markers[cell.cell.scheduler], edgecolors="#1d232b", linewidths=0.3,
                   label=cell.label if not cell.unloaded else f"{group_label(cell.cell)} · "
                   "unloaded", gid=f"order:{cell.key}")
    set_y_scale(ax, values)
    ax.set_xlabel("trial, in the order they ran")
    ax.set_ylabel("start-up time (s)")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7.5, frameon=False, ncol=2, loc="upper left")
    titles(fig, ax, f"Every trial of {probe} on {device}, in run order",
            "a drift or a step here means the machine changed during the run "
            "(the order is shuffled per round, so it cannot favour one cell)")
    return fig


@dataclass(frozen=True)
class Label:
    """A point's direct label: the point, the ends of its horizontal bar, text, colour."""

    key: str
    x: float
    y: float
    x_lo: float
    x_hi: float
    text: str
    colour: str


def _place_labels(ax, labels: list[Label]) -> None:
    """Direct labels beside their points, clear of their own bars (right of the bar's right
    end, or left of its left end for points on the right half) and of each other: laid out
    bottom up, each moved up until its box, as drawn, overlaps none placed before it; a
    label moved away from its point gets a leader line. Each has a white backing so that
    another point's bar passes behind the text, not through it."""
    fig = ax.figure
    if not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)
    ax.autoscale_view()
    fig.draw_without_rendering()  # the constrained layout: the axes' final place
    renderer = fig.canvas.get_renderer()
    to_axes = ax.transData + ax.transAxes.inverted()
    placed: list = []
    for lab in sorted(labels, key=lambda v: to_axes.transform((v.x, v.y))[1]):
        xf, yf = to_axes.transform((lab.x, lab.y))
        left = xf > 0.55  # labels of points on the right go to their left, inside the axes
        end = to_axes.transform((lab.x_lo if left else lab.x_hi, lab.y))[0]
        tx = (min(xf, end) - 0.02) if left else (max(xf, end) + 0.02)
        style = {"textcoords": "axes fraction", "fontsize": 8.5, "color": lab.colour,
                 "va": "center", "ha": "right" if left else "left", "zorder": 4,
                 "gid": f"label:{lab.key}",
                 "bbox": {"boxstyle": "square,pad=0.1", "facecolor": "white",
                          "edgecolor": "none", "alpha": 0.85}}
        text = ax.annotate(lab.text, (lab.x, lab.y), xytext=(tx, yf), **style)
        ty = yf
        box = text.get_window_extent(renderer)  # its text and backing (no leader yet)
        for _ in range(len(labels) + 1):
            hit = [b for b in placed if b.overlaps(box)]
            if not hit:
                break
            lift = max(b.y1 for b in hit) - box.y0 + 2  # pixels
            ty += lift / ax.get_window_extent(renderer).height
            text.set_position((tx, ty))
            box = text.get_window_extent(renderer)
        placed.append(box)
        if ty - yf > 0.02:  # moved away from its point: the same label, with a leader
            text.remove()
            ax.annotate(lab.text, (lab.x, lab.y), xytext=(tx, ty), **style,
                        arrowprops={"arrowstyle": "-", "color": "#9aa1a9", "linewidth": 0.6,
                                    "shrinkA": 0, "shrinkB": 4})
    # the labels were placed in the axes as laid out now: a layout run again at drawing
    # (it would leave room for them) would move the axes under them
    fig.set_layout_engine("none")


def _throughput_mbps(cell: CellData) -> list[float]:
    """Read + write background throughput per counted ok/timeout trial, in MB/s."""
    out = []
    for t in cell.mode_trials():
        r, w = t["load_read_bps"], t["load_write_bps"]
        if t["status"] in ("ok", "timeout") and (r is not None or w is not None):
            out.append(((r or 0.0) + (w or 0.0)) / MB)
    return out


def write_plots(data: ReportData, outdir: str, formats: tuple[str, ...] = ("png",),
                violin: bool = False, *, tolerance: float = 0.10) -> list[str]:
    """Save every plot in every format into `outdir` (created); returns the paths written."""
    check_formats(formats)
    outfile.make_dirs(outdir)
    paths = []
    for pf in figures(data, violin=violin, tolerance=tolerance):
        for fmt in formats:
            path = os.path.join(outdir, f"{pf.name}.{fmt}")
            with outfile.replaced(path, "wb") as f:
                pf.figure.savefig(f, format=fmt, dpi=DPI * 1.5,
                                  metadata={"Software": None} if fmt == "png" else None)
            paths.append(path)
    return paths


def inline_pngs(data: ReportData, *, violin: bool = False,
                tolerance: float = 0.10) -> list[tuple[str, str, str, int]]:
    """(name, caption, base64 PNG, CSS width in px) of every plot, for the HTML report.

    The PNG has 1.5x the pixels of its CSS width, so it stays sharp on HiDPI screens.
    """
    out = []
    for pf in figures(data, violin=violin, tolerance=tolerance):
        buf = io.BytesIO()
        pf.figure.savefig(buf, format="png", dpi=HTML_CSS_DPI * 1.5,
                          metadata={"Software": None})
        width = round(pf.figure.get_figwidth() * HTML_CSS_DPI)
        out.append((pf.name, pf.caption, base64.b64encode(buf.getvalue()).decode("ascii"),
                    width))
        pf.figure.clear()
    return out
