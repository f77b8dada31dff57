"""Plots for `compare --by`: per probe and load, one box per machine (kernel, run) for each
scheduler and policy, drawn in the report's style (`plot`)."""

from __future__ import annotations

import os

import matplotlib
from matplotlib.figure import Figure

from ..base.quantities import slug
from ..files import outfile
from ..store.cell import NO_PREPARE
from .data import CellData, ReportData, split
from .plot_style import (
    DPI,
    PALETTE,
    PlotFigure,
    draw_distribution,
    set_y_scale,
    titles,
    unique_names,
)


def group_figures(data: ReportData, by: str) -> list[PlotFigure]:
    """For `compare --by`: per probe and load, one box per machine (kernel, run) for each
    scheduler and policy, the same colour per group in every figure."""
    with matplotlib.rc_context({"text.parse_math": False}):
        return _group_figures(data, by)


def _group_figures(data: ReportData, by: str) -> list[PlotFigure]:
    groups = split(data, by)
    colours = {label: PALETTE[i % len(PALETTE)] for i, (label, _) in enumerate(groups)}
    by_cell: dict[str, list[tuple[str, CellData]]] = {}
    for label, part in groups:
        for c in part.cells:
            by_cell.setdefault(c.key, []).append((label, c))
    out = []
    unique = unique_names()
    for (probe, load), keys in _by_probe_and_load(data).items():
        fig = Figure(figsize=(min(15.0, 3.0 + 0.6 * len(keys) * len(groups)), 5.2), dpi=DPI,
                     layout="constrained")
        ax = fig.add_subplot()
        ax.grid(axis="y", color="#E3E6EA", linewidth=0.8)
        x, ticks, names, values = 0.0, [], [], []
        for key in keys:
            first = x
            for label, cell in by_cell.get(key, []):
                samples = cell.samples()
                values += samples
                draw_distribution(ax, x, f"{label}:{key}", samples, colours[label], False)
                x += 0.8
            ticks.append((first + x - 0.8) / 2)
            cell = data.cell(key).cell
            prep = "" if cell.prepare == NO_PREPARE else f"\nprepare {cell.prepare}"
            names.append(("unloaded" if cell.unloaded else f"{cell.scheduler}\n{cell.policy}")
                         + prep)
            x += 0.8
        ax.set_xticks(ticks, names, fontsize=8.5)
        for label, colour in colours.items():
            ax.scatter([], [], marker="s", s=60, color=colour, alpha=0.5, label=label)
        ax.legend(title=by, fontsize=8, title_fontsize=8.5, loc="upper left", frameon=False)
        set_y_scale(ax, values)
        ax.set_ylabel("start-up time (s)")
        titles(fig, ax, f"Start-up time of {probe}, load {load}, by {by}",
                "boxes span the quartiles of each group's counted trials")
        out.append(PlotFigure(unique(slug(f"by-{by}-{probe}-{load}")), "box",
                              f"Start-up time of {probe} under load {load}, one box per "
                              f"{by}.", fig))
    return out


def _by_probe_and_load(data: ReportData) -> dict[tuple[str, str], list[str]]:
    out: dict[tuple[str, str], list[str]] = {}
    for c in data.cells:
        out.setdefault((c.cell.probe, c.cell.load), []).append(c.key)
    for (probe, load), keys in out.items():
        if load != "none":
            keys[:0] = [c.key for c in data.cells if c.unloaded and c.cell.probe == probe
                        and c.key not in keys]
    return out


def write_group_plots(data: ReportData, by: str, outdir: str) -> list[str]:
    outfile.make_dirs(outdir)
    paths = []
    for pf in group_figures(data, by):
        path = os.path.join(outdir, f"{pf.name}.png")
        with outfile.replaced(path, "wb") as f:
            pf.figure.savefig(f, format="png", dpi=DPI * 1.5, metadata={"Software": None})
        paths.append(path)
    return paths
