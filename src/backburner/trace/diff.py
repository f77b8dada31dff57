"""Two traces side by side: every metric, its change, and whether the change is real. Pure.

The rule (docs/guide/trace.md): a metric has *changed* only when the two sets of runs do not
overlap at all (every run of one lies above every run of the other: outside both runs'
spread) **and** that separation is unlikely by chance: the two-sided exact Mann-Whitney p,
which for fully separated samples is 2 / C(n_a + n_b, n_a), is below `alpha` (0.05). That
needs 4 runs a side (p = 0.029), or 3 and 5; with 5 a side p = 0.008. Separated metrics with
fewer runs are *apart* (shown, never called a change); overlapping ones are *noise*, listed
on their own. Within a list, rows are ordered by the size of the change: |log| of the ratio
of medians, with a floor per unit (1 count, 1 ms, 64 KiB) so 0 -> 3 calls is not infinite.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .. import stats
from .profile import Metric, Profile, Run, median, metrics, zero_when_absent

ALPHA = 0.05
FLOORS = {"count": 1.0, "s": 1e-3, "KiB": 64.0}
RULE = ("changed = the runs do not overlap (every run of one side beyond every run of the "
        "other) and the exact two-sided Mann\u2013Whitney p of that separation is below "
        "{alpha:g} (fully separated: p = 2 / C(n_a+n_b, n_a), so at least 4 runs a side); "
        "apart = separated with too few runs to call; noise = the ranges overlap")


@dataclass(frozen=True)
class Row:
    key: str
    label: str
    unit: str
    group: str
    a: tuple[float, ...]
    b: tuple[float, ...]
    med_a: float
    med_b: float
    delta: float
    ratio: float | None  # med_b / med_a; inf when only b is above 0; None when both are 0
    verdict: str  # changed | apart | noise
    p: float
    score: float

    def to_dict(self) -> dict[str, object]:
        ratio = self.ratio
        return {"key": self.key, "label": self.label, "unit": self.unit, "group": self.group,
                "verdict": self.verdict, "a": list(self.a), "b": list(self.b),
                "median_a": self.med_a, "median_b": self.med_b, "change": self.delta,
                "ratio": None if ratio is None or math.isinf(ratio) else ratio,
                "ratio_infinite": ratio is not None and math.isinf(ratio),
                "p": self.p, "score": self.score}


@dataclass
class Diff:
    label_a: str
    label_b: str
    n_a: int
    n_b: int
    engine_a: str
    engine_b: str
    alpha: float
    changed: list[Row] = field(default_factory=list)
    apart: list[Row] = field(default_factory=list)
    noise: list[Row] = field(default_factory=list)
    same: int = 0
    only_one_side: list[str] = field(default_factory=list)
    status_a: list[int] = field(default_factory=list)
    status_b: list[int] = field(default_factory=list)
    overhead_a: float | None = None
    overhead_b: float | None = None
    lost_a: list[int] = field(default_factory=list)
    lost_b: list[int] = field(default_factory=list)

    @property
    def rule(self) -> str:
        return RULE.format(alpha=self.alpha)

    @property
    def min_p(self) -> float:
        """The smallest p any metric can reach with these run counts (full separation)."""
        return separation_p(self.n_a, self.n_b)

    def notes(self) -> list[str]:
        out = []
        if self.engine_a != self.engine_b:
            out.append(f"different engines ({self.engine_a} / {self.engine_b}): syscall times "
                       "and the job's switches and CPU time are not comparable")
        if self.min_p >= self.alpha:
            out.append(f"{self.n_a} and {self.n_b} runs cannot show a change at p < "
                       f"{self.alpha:g} (at best p = {self.min_p:.3g}); record at least 4 "
                       "runs a side (--runs 4)")
        for side, lost in (("A", self.lost_a), ("B", self.lost_b)):
            if lost:
                out.append(f"{side}: the tracer lost events in run(s) "
                           f"{', '.join(map(str, lost))}: their syscall counts are short")
        for label, statuses in ((self.label_a, self.status_a), (self.label_b, self.status_b)):
            bad = sorted({s for s in statuses if s != 0})
            if bad:
                out.append(f"{label}: {sum(1 for s in statuses if s)} of {len(statuses)} runs "
                           f"ended with status {', '.join(map(str, bad))}")
        return out

    def to_dict(self) -> dict[str, object]:
        return {"a": {"label": self.label_a, "runs": self.n_a, "engine": self.engine_a,
                      "statuses": self.status_a, "overhead": self.overhead_a},
                "b": {"label": self.label_b, "runs": self.n_b, "engine": self.engine_b,
                      "statuses": self.status_b, "overhead": self.overhead_b},
                "rule": self.rule, "alpha": self.alpha, "notes": self.notes(),
                "changed": [r.to_dict() for r in self.changed],
                "apart": [r.to_dict() for r in self.apart],
                "noise": [r.to_dict() for r in self.noise],
                "unchanged_count": self.same, "only_one_side": self.only_one_side}


def separation_p(n_a: int, n_b: int) -> float:
    """Two-sided exact p of two fully separated samples: 2 / C(n_a + n_b, n_a), at most 1."""
    return min(1.0, 2 / math.comb(n_a + n_b, n_a))


def score(med_a: float, med_b: float, unit: str) -> float:
    floor = FLOORS.get(unit, 1.0)
    return abs(math.log((abs(med_b) + floor) / (abs(med_a) + floor)))


def _ratio(med_a: float, med_b: float) -> float | None:
    if med_a == 0:
        return None if med_b == 0 else math.inf
    return med_b / med_a


def compare_values(key: str, metric: Metric, a: list[float], b: list[float],
                   alpha: float = ALPHA) -> Row | None:
    """One metric's row, or None when every value on both sides is the same."""
    if len(set(a) | set(b)) == 1:
        return None
    separated = max(a) < min(b) or max(b) < min(a)
    mw = stats.mann_whitney(a, b, method="exact" if separated else "auto")
    verdict = "noise"
    if separated:
        verdict = "changed" if mw.p < alpha else "apart"
    med_a, med_b = median(a), median(b)
    return Row(key, metric.label, metric.unit, metric.group, tuple(a), tuple(b), med_a,
               med_b, med_b - med_a, _ratio(med_a, med_b), verdict, mw.p,
               score(med_a, med_b, metric.unit))


def _table(runs: list[Run]) -> tuple[list[tuple[bool, dict[str, float]]], dict[str, Metric]]:
    values, info = [], {}
    for run in runs:
        m = metrics(run)
        values.append((run.traced, {k: v for k, (v, _) in m.items()}))
        info.update({k: meta for k, (_, meta) in m.items()})
    return values, info


def _series(values: list[tuple[bool, dict[str, float]]], key: str) -> list[float] | None:
    """The metric in every run; a syscall a traced run never made is 0; else None."""
    out = []
    for traced, run in values:
        if key in run:
            out.append(run[key])
        elif traced and zero_when_absent(key):
            out.append(0.0)
        else:
            return None
    return out


def diff(a: Profile, b: Profile, *, alpha: float = ALPHA) -> Diff:
    """Every metric of both traces, classified by the rule and ordered by size."""
    va, info_a = _table(a.runs)
    vb, info_b = _table(b.runs)
    result = Diff(a.label, b.label, len(a.runs), len(b.runs), a.engine.get("name", "?"),
                  b.engine.get("name", "?"), alpha,
                  status_a=[r.shell_status for r in a.runs],
                  status_b=[r.shell_status for r in b.runs],
                  overhead_a=a.overhead(), overhead_b=b.overhead(),
                  lost_a=a.lost_runs(), lost_b=b.lost_runs())
    info = {**info_b, **info_a}
    for key in sorted(info):
        sa, sb = _series(va, key), _series(vb, key)
        if sa is None or sb is None:
            result.only_one_side.append(key)
            continue
        row = compare_values(key, info[key], sa, sb, alpha)
        if row is None:
            result.same += 1
            continue
        {"changed": result.changed, "apart": result.apart, "noise": result.noise}[
            row.verdict].append(row)
    for rows in (result.changed, result.apart, result.noise):
        rows.sort(key=lambda r: (-r.score, r.key))
    return result
