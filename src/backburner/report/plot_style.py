"""The style every plot of a report shares: colours per policy, the y scale, titles, the
distribution of one cell (box or violin) and its label. One place, so the per-load plots,
the overview and `compare --by`'s look alike and a policy keeps its colour across them."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from ..base.quantities import fmt_factor, fmt_s
from ..store.cell import NO_PREPARE, Cell
from .data import CellData, ReportData
from .summary import Row
from .words import median_value_text

#: Colour-blind-safe qualitative palette (Okabe-Ito, without red, which marks timeouts).
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#8C6D31", "#F0E442",
           "#332288", "#44AA99", "#AA4499")
#: More colours for policies without one of their own (Tol's muted scheme, minus red).
SPARE = ("#882255", "#117733", "#DDCC77", "#999933", "#661100", "#6699CC")
IDLE_COLOUR = "#8A8F98"
TIMEOUT_COLOUR = "#D62728"
MARKERS = ("o", "s", "^", "D", "v", "P", "h", "<", ">", "p")
LOG_RANGE = 10.0
#: Fraction of the plot height kept free above the highest value, for the labels.
HEADROOM = 0.16
DPI = 110
#: CSS pixels per figure inch in the HTML report.
HTML_CSS_DPI = 110


@dataclass
class PlotFigure:
    name: str       # file stem, e.g. "box-firefox-testbed-writers_4_seq"
    kind: str       # box | violin | scatter
    caption: str
    figure: Figure


#: Each built-in policy's own colour, the same in every plot of every report (a colour
#: given by rank among the policies a run has would make `default` orange in one report
#: and blue in the next): unprotected orange, the usual background policy blue.
POLICY_COLOURS = {"default": "#E69F00", "background": "#0072B2", "gentle": "#009E73",
                  "govern": "#CC79A7", "group-idle": "#56B4E9", "low-weight": "#8C6D31",
                  "latency-target": "#332288", "iocost": "#44AA99"}


def policy_colour(policy: str, custom: list[str] | None = None) -> str:
    """A policy's colour: its own if built in, else one of the rest of the palette by its
    rank among `custom` (the report's policies without a colour of their own)."""
    if policy == "-":
        return IDLE_COLOUR
    if policy in POLICY_COLOURS:
        return POLICY_COLOURS[policy]
    spare = [c for c in (*PALETTE, *SPARE) if c not in POLICY_COLOURS.values()]
    rank = sorted(custom).index(policy) if custom and policy in custom else 0
    return spare[rank % len(spare)]


def policy_colours(data: ReportData) -> dict[str, str]:
    """The same policy gets the same colour in every plot, of this report and the next."""
    custom = sorted(p for p in data.policies if p != "-" and p not in POLICY_COLOURS)
    return {"-": IDLE_COLOUR, **{p: policy_colour(p, custom) for p in data.policies}}


def plain_log_ticks(axis, values: list[float]) -> None:
    """Ticks of a log axis as plain numbers (0.2, 0.5, 1, 2): matplotlib's own log labels
    are mathtext (`$\\mathdefault{2\\times10^{-1}}$`), which the plots print raw, because
    they turn mathtext off (`text.parse_math`) so that a `$` in a probe's name stays a `$`.
    The minor ticks get no labels; the major ones are spread to suit the range."""
    v = [x for x in values if x is not None and np.isfinite(x) and x > 0]
    decades = np.log10(max(v) / min(v)) if v else 2.0
    subs = (1.0, 2.0, 3.0, 5.0) if decades < 1.5 else (1.0, 2.0, 5.0) if decades < 3 else (1.0,)
    axis.set_major_locator(LogLocator(base=10, subs=subs))
    axis.set_major_formatter(FuncFormatter(lambda x, _pos: f"{x:g}"))
    axis.set_minor_formatter(NullFormatter())


def use_log_scale(values: list[float]) -> bool:
    """Log y when the plotted values span more than LOG_RANGE (10x)."""
    v = [x for x in values if x is not None and np.isfinite(x) and x > 0]
    return bool(v) and max(v) / min(v) > LOG_RANGE


def set_y_scale(ax, values: list[float]) -> None:
    """Log scale (with plain-number ticks) when the range exceeds LOG_RANGE, else from 0."""
    v = [x for x in values if x is not None and np.isfinite(x) and x > 0]
    if not v:
        return
    lo, hi = min(v), max(v)
    if use_log_scale(v):
        ax.set_yscale("log")
        plain_log_ticks(ax.yaxis, v)
        bottom = lo / 1.25
        span = np.log(hi) - np.log(bottom)
        ax.set_ylim(bottom, float(np.exp(np.log(hi) + span * HEADROOM / (1 - HEADROOM))))
    else:
        ax.set_ylim(0, hi / (1 - HEADROOM))


def titles(fig: Figure, ax, title: str, subtitle: str) -> None:
    fig.suptitle(textwrap.fill(title, int(fig.get_figwidth() * 9.5)), x=0.01, ha="left",
                 fontsize=12.5, fontweight="bold")
    width = int(fig.get_figwidth() * 12)
    ax.set_title(textwrap.fill(subtitle, width), loc="left", fontsize=9, color="#5b6673")


def group_label(cell: Cell) -> str:
    """What a cell is judged against idle within: its scheduler, and its preparation if any
    (cells prepared differently have different idle baselines)."""
    if cell.prepare == NO_PREPARE:
        return cell.scheduler
    return f"{cell.scheduler} \u00b7 prepare {cell.prepare}"


def unique_names() -> Callable[[str], str]:
    """A namer whose names stay unique (a repeat gets -2, -3, ...): slugs are cut at 60
    characters, so two loads of a long probe would otherwise write the same file."""
    names: set[str] = set()

    def unique(name: str) -> str:
        base, i = name, 2
        while name in names:
            name, i = f"{base}-{i}", i + 1
        names.add(name)
        return name

    return unique


def cell_values(cell: CellData, row: Row) -> tuple[list[float], list[float]]:
    """The times a cell's plot shows, in the mode its table row uses: the completed
    starts, and the limits its timeouts hit (a box counts them at their limit, as the
    table's quartiles do)."""
    samples = cell.samples(row.mode)
    return samples, [v for v in cell.timeout_limits(row.mode) if np.isfinite(v)]


def draw_distribution(ax, x: float, key: str, samples: list[float], colour: str,
                       violin: bool, whis: float | tuple[float, float] = 1.5) -> None:
    """A box (quartiles, whiskers at `whis`: Tukey's 1.5 IQR, or (0, 100) for min and max)
    or a violin (with its quartiles and median) of one cell at `x`."""
    if not samples:
        return
    if violin and len(samples) >= 2 and np.ptp(samples) > 0:
        parts = ax.violinplot([samples], positions=[x], widths=0.75, showextrema=False)
        body = parts["bodies"][0]
        body.set_facecolor(colour)
        body.set_edgecolor(colour)
        body.set_alpha(0.28)
        body.set_gid(f"violin:{key}")
        q1, med, q3 = np.quantile(samples, [0.25, 0.5, 0.75])
        ax.vlines(x, q1, q3, colors="#1d232b", linewidth=2.5, zorder=2)
        ax.hlines(med, x - 0.14, x + 0.14, colors="#1d232b", linewidth=1.8, zorder=2)
        return
    parts = ax.boxplot([samples], positions=[x], widths=0.6, patch_artist=True,
                       showfliers=False, whis=whis, manage_ticks=False, zorder=1,
                       medianprops={"color": "#1d232b", "linewidth": 1.8},
                       whiskerprops={"color": "#4a5360"}, capprops={"color": "#4a5360"})
    for whisker in parts["whiskers"]:
        whisker.set_gid(f"whisker:{key}")
    box = parts["boxes"][0]
    box.set_facecolor(colour)
    box.set_alpha(0.30)
    box.set_edgecolor("#4a5360")
    box.set_gid(f"box:{key}")


def annotate(ax, x: float, row: Row, samples: list[float], limits: list[float]) -> None:
    top = max(samples + limits) if (samples or limits) else None
    if top is None:
        ax.annotate("no data", (x, 0.5), xycoords=("data", "axes fraction"), ha="center",
                    fontsize=8, color="#5b6673")
        return
    lines = []
    if row.median is not None:
        lines.append(f"{median_value_text(row)} s")
    if row.ratio is not None:
        lines.append(f"\u00d7{fmt_factor(row.ratio.ratio)}")
    elif row.verdict_kind == "timed-out":
        lines.append("timed out")
    if lines:
        ax.annotate("\n".join(lines), (x, top), xytext=(0, 5), textcoords="offset points",
                    ha="center", va="bottom", fontsize=8.5, color="#1d232b",
                    fontweight="bold" if row.verdict_kind in ("slower", "timed-out") else None)
    if limits:
        ax.annotate(f"{len(limits)} timed out\n(\u2265{fmt_s(max(limits))} s)",
                    (x + 0.16, max(limits)), xytext=(4, 0), textcoords="offset points",
                    ha="left", va="center", fontsize=8, color=TIMEOUT_COLOUR)
