"""report.plot_style: the scale rule and the whiskers every plot shares."""

from __future__ import annotations

import pytest
from matplotlib.figure import Figure

from backburner.report import plot_style


def test_log_scale_only_beyond_ten_times() -> None:
    assert plot_style.use_log_scale([0.27, 3.4, 2.8])
    assert not plot_style.use_log_scale([0.3, 2.9])
    assert not plot_style.use_log_scale([1.0, 10.0])  # exactly 10x: not more than 10x


@pytest.mark.parametrize(("whis", "low", "high"), [((0.0, 100.0), 1.0, 30.0),
                                                    (1.5, 1.0, 5.0)])
def test_whiskers_at_min_max_or_tukey(whis, low: float, high: float) -> None:
    """(0, 100) reaches the slowest trial, an outlier included; Tukey's fences stop short."""
    ax = Figure().add_subplot()
    samples = [1.0, 2.0, 3.0, 4.0, 5.0, 30.0]
    plot_style.draw_distribution(ax, 0.0, "k", samples, "#0072B2", False, whis=whis)
    ends = [y for line in ax.findobj(lambda a: a.get_gid() == "whisker:k")
            for y in line.get_ydata()]
    assert min(ends) == low and max(ends) == high
