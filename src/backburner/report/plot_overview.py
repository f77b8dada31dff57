"""The overview plot: every cell of a probe on a device in one figure, one group per
scheduler × load, a box per policy, its whiskers at the fastest and the slowest trial.

It is the chart the field's original experiment published (bars per scheduler × load, one
per IO class of the installer), drawn with the whole distribution: on a slow disk the worst
start under load is what a user remembers, so the whiskers show min and max, not Tukey's
fences. The per-load plots of `plot` remain the place for one load's detail.
"""

from __future__ import annotations

from matplotlib.figure import Figure

from .data import CellData
from .plot_style import (
    DPI,
    IDLE_COLOUR,
    TIMEOUT_COLOUR,
    annotate,
    cell_values,
    draw_distribution,
    group_label,
    set_y_scale,
    titles,
)
from .summary import Row

#: Whiskers from the fastest to the slowest trial.
MIN_MAX = (0.0, 100.0)


def wanted(cells: list[CellData]) -> bool:
    """An overview says more than the per-load plots only with two loads or more."""
    return len({c.cell.load for c in cells if not c.unloaded}) >= 2


def layout(cells: list[CellData]) -> list[tuple[str, str, list[CellData]]]:
    """(scheduler group, load, cells) in the order the run had them: per scheduler (and
    preparation) its unloaded cell, then each load's cells, one per policy."""
    out = []
    for group in dict.fromkeys(group_label(c.cell) for c in cells):
        mine = [c for c in cells if group_label(c.cell) == group]
        for load in dict.fromkeys(c.cell.load for c in mine):
            members = [c for c in mine if c.cell.load == load]
            out.append((group, load, members))
    return out


def overview_figure(probe: str, device: str, cells: list[CellData], rows: dict[str, Row],
                    colours: dict[str, str], violin: bool) -> Figure:
    groups = layout(cells)
    n_boxes = sum(len(m) for _, _, m in groups)
    fig = Figure(figsize=(min(16.0, max(7.0, 2.0 + 0.75 * n_boxes + 0.4 * len(groups))), 5.6),
                 dpi=DPI, layout="constrained")
    ax = fig.add_subplot()
    ax.set_axisbelow(True)
    ax.grid(axis="y", color="#E3E6EA", linewidth=0.8)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    x, ticks, tick_labels, centres, names, values = 0.0, [], [], [], [], []
    spans: dict[str, list[float]] = {}
    for g, (sched, load, members) in enumerate(groups):
        if g:
            x += 0.6
            ax.axvline(x - 0.8, color="#D0D4DA", linewidth=0.8, zorder=0)
        first = x
        for i, cell in enumerate(members):
            row = rows[cell.key]
            samples, limits = cell_values(cell, row)
            values += samples + limits
            colour = colours.get(cell.cell.policy, IDLE_COLOUR)
            draw_distribution(ax, x, cell.key, samples + limits, colour, violin, whis=MIN_MAX)
            if limits:
                ax.scatter([x] * len(limits), limits, s=40, marker="X", color=TIMEOUT_COLOUR,
                           edgecolors="white", linewidths=0.6, zorder=4,
                           gid=f"timeouts:{cell.key}")
            annotate(ax, x, row, samples, limits)
            ticks.append(x)
            tick_labels.append("no load" if cell.unloaded else cell.cell.policy)
            if i < len(members) - 1:
                x += 0.9
        centres.append((first + x) / 2)
        names.append(f"{sched}\n{load}" if load != "none" else f"{sched}\nunloaded")
        spans.setdefault(sched, []).extend((first, x))
        x += 0.9
    for sched, span in spans.items():
        base = next((rows[c.key] for s, _, m in groups if s == sched for c in m if c.unloaded),
                    None)
        if base is not None and base.median is not None:
            ax.hlines(base.median, min(span) - 0.4, max(span) + 0.4, colors="#4a5360",
                      linestyles=(0, (5, 3)), linewidth=1.0, zorder=2, gid=f"idle:{sched}")
    ax.set_xticks(ticks, tick_labels, fontsize=8.5)
    if any(len(t) > 10 for t in tick_labels):
        ax.tick_params(axis="x", labelrotation=20)
        for label in ax.get_xticklabels():
            label.set_horizontalalignment("right")
    sec = ax.secondary_xaxis("bottom")
    sec.set_xticks(centres, names, fontsize=9.5, fontweight="bold")
    sec.tick_params(axis="x", length=0, pad=30)
    sec.spines["bottom"].set_visible(False)
    ax.set_xlim(-0.8, x - 0.1)
    set_y_scale(ax, values)
    ax.set_ylabel("start-up time (s)")
    titles(fig, ax, f"Start-up time of {probe} on {device}: every scheduler and load",
           "one group per scheduler \u00d7 load; boxes span the quartiles, whiskers the "
           "fastest and the slowest trial; dashed line = the scheduler's unloaded median; "
           "colour = policy of the background load; labels = median and ratio to unloaded")
    return fig
