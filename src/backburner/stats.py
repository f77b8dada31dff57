"""Statistics for start-up latency samples: summaries, comparisons, verdicts and warnings.

Everything here is a pure function: numbers in, frozen dataclasses out, no I/O. The results
hold only plain floats, ints, strings and tuples so ``dataclasses.asdict`` gives JSON.

Why these choices:

* Latencies under load are skewed and heavy-tailed, so we centre on the *median* and give it
  the exact, distribution-free order-statistic interval (its coverage is at least the
  confidence asked for, for any continuous distribution; a percentile bootstrap of the
  median covers less than promised at the small n of a bench cell), instead of mean +/- sd.
* Comparisons are a *ratio of medians* ("3.2x slower than idle"), because that is what a
  user wants to read, with a bootstrap CI (its coverage checked by simulation in the tests);
  Mann-Whitney U (scipy's) and Cliff's delta are reported too, distribution-free.
* Outliers are flagged, never dropped: a slow start under load is the thing we measure.
* A timed-out trial is *right-censored*: it took at least its limit. Dropping it would make a
  cell that often times out look fast (6 starts at idle speed and 4 timeouts at 30x idle would
  read "indistinguishable from idle"), so the functions below take such values as
  ``censored`` and count them. Order statistics are monotone in every value, so the truth
  lies between the statistic with each censored value at its limit and the same statistic
  with each one unbounded: the median is the former (a lower bound when the two differ,
  ``median_lower_bound``), and an interval takes its lower end from the former and its upper
  end from the latter (infinite when a censored value reaches it). Such an interval holds the
  interval the uncensored times would give, so its coverage is still at least the confidence
  asked for (the order-statistic one exactly so; the bootstrap ones as far as a bootstrap
  goes), and a verdict drawn from it is never more optimistic than the data allow.
* Bootstraps use a seeded ``numpy.random.Generator`` so a report is reproducible.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from .units import fmt_factor, fmt_pct

#: 1 / Phi^-1(3/4), rounded: makes the MAD estimate sigma for normal data.
MAD_NORMAL_SCALE = 1.4826
#: Tukey's fence multiplier.
TUKEY_K = 1.5
OUTLIER_RULE = (
    f"Tukey fences: x < Q1 - {TUKEY_K}*IQR or x > Q3 + {TUKEY_K}*IQR "
    "(numpy linear quantiles; flagged, never dropped)"
)
#: Bimodality-coefficient threshold: 5/9, the value for a uniform distribution.
BIMODAL_THRESHOLD = 0.555
BIMODAL_MIN_N = 10
NOT_COLD_FRACTION = 0.10
OUTLIER_WARN_FRACTION = 0.10
#: Round number of trials we recommend even when fewer would technically do.
RECOMMENDED_TRIALS = 10


# --------------------------------------------------------------------------- result types


@dataclass(frozen=True)
class Summary:
    """Descriptive statistics of one cell; quantiles use numpy's default 'linear' method."""

    n: int
    median: float
    #: the exact order-statistic interval, the one reports show (None when n is too small)
    median_ci: tuple[float, float] | None
    #: percentile bootstrap, for the record (None above a few thousand samples)
    median_ci_bootstrap: tuple[float, float] | None
    confidence: float
    q1: float
    q3: float
    iqr: float
    min: float
    max: float
    mean: float
    stdev: float
    mad: float
    mad_scaled: float
    outliers: tuple[int, ...]
    outlier_rule: str
    #: right-censored values (timeouts at their limit) among the n; the statistics above
    #: count them at their limit, and ``outliers`` indexes the completed samples only
    censored: int = 0
    median_lower_bound: bool = False


@dataclass(frozen=True)
class RatioCI:
    """median(a) / median(b) with a bootstrap percentile interval."""

    ratio: float
    lo: float
    hi: float
    confidence: float


@dataclass(frozen=True)
class MannWhitney:
    """Two-sided Mann-Whitney U test; ``u`` is U of the first sample, ``method`` the one used."""

    u: float
    p: float
    method: str


@dataclass(frozen=True)
class CliffsDelta:
    """P(a > b) - P(a < b); positive means the first sample tends to be larger (slower)."""

    delta: float
    magnitude: str


@dataclass(frozen=True)
class Comparison:
    """Everything we say when comparing two cells."""

    ratio: RatioCI
    mann_whitney: MannWhitney
    cliffs_delta: CliffsDelta


@dataclass(frozen=True)
class Verdict:
    """One sentence for the user, its machine-readable kind, and the ratio behind it."""

    kind: str
    text: str
    ratio: RatioCI


@dataclass(frozen=True)
class Warning_:  # trailing underscore: do not shadow the builtin Warning
    """A problem with the data; ``message`` always says what to do about it."""

    code: str
    message: str


# --------------------------------------------------------------------------- validation


def _as_samples(samples: ArrayLike, name: str = "samples") -> np.ndarray:
    """Return a finite 1-D float array, or raise ValueError saying what is wrong."""
    x = np.asarray(samples, dtype=float)
    if x.ndim != 1:
        raise ValueError(f"{name} must be a 1-D sequence of numbers, got shape {x.shape}")
    if x.size == 0:
        raise ValueError(f"{name} is empty: need at least one measurement")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{name} contains NaN or infinity; drop or fix those measurements")
    return x


def _as_censored(censored: ArrayLike) -> np.ndarray:
    """Right-censored values (each a lower bound of a time), possibly none."""
    x = np.asarray(censored, dtype=float).reshape(-1)
    return _as_samples(x, "censored") if x.size else x


def _bounds(x: np.ndarray, censored: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The values with every censored one at its limit, and with every one unbounded."""
    return np.concatenate([x, censored]), np.concatenate([x, np.full(censored.size, np.inf)])


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be strictly between 0 and 1, got {confidence}")


def _check_resamples(resamples: int) -> None:
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")


# --------------------------------------------------------------------------- bootstrap


#: Above this many samples a cell's median gets no bootstrap interval (only the exact one).
BOOTSTRAP_MEDIAN_MAX_N = 2000
def _bootstrap_medians(x: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Medians of ``resamples`` bootstrap resamples of ``x``, drawn without building them.

    A resample is n draws of x's values with replacement, i.e. n uniform U(0,1) draws mapped
    through the sorted sample (value floor(n*U)); the mapping keeps order, so a resample's
    k-th smallest value is the sorted sample at floor(n*U_(k)), and the k-th of n uniforms
    is Beta(k, n-k+1), the next one above it u + (1-u)*Beta(1, n-k). The medians come out
    with exactly the bootstrap's distribution at O(resamples) cost instead of
    O(resamples*n): a lab's compare of 100 machines took 33 s in resampling before.
    """
    xs = np.sort(x)
    n = xs.size
    if n == 1:
        return np.full(resamples, xs[0])
    k = (n + 1) // 2  # 1-based: the middle one (odd n), the lower middle one (even n)
    u = rng.beta(k, n - k + 1, size=resamples)
    lower = xs[np.minimum((u * n).astype(np.intp), n - 1)]
    if n % 2:
        return lower
    above = u + (1.0 - u) * rng.beta(1, n - k, size=resamples)
    return (lower + xs[np.minimum((above * n).astype(np.intp), n - 1)]) / 2


def _percentile_interval(values: np.ndarray, confidence: float,
                         upper: np.ndarray | None = None) -> tuple[float, float]:
    """Central percentile interval: the plain percentile bootstrap. With ``upper`` (the same
    resamples with censored values unbounded), the upper end is taken from it, infinite
    where it reaches an unbounded one (numpy's interpolation would give NaN there)."""
    alpha = 1.0 - confidence
    if upper is None:
        lo, hi = np.quantile(values, [alpha / 2, 1 - alpha / 2])
        return float(lo), float(hi)
    lo = float(np.quantile(values, alpha / 2))
    unbounded = np.isposinf(upper)
    if math.ceil((1 - alpha / 2) * (upper.size - 1)) >= upper.size - int(unbounded.sum()):
        return lo, math.inf
    finite = np.where(unbounded, np.max(upper, where=~unbounded, initial=0.0), upper)
    return lo, float(np.quantile(finite, 1 - alpha / 2))


def bootstrap_median_ci(
    samples: ArrayLike, *, confidence: float = 0.95, resamples: int = 10_000, seed: int = 0,
    censored: ArrayLike = (),
) -> tuple[float, float]:
    """Percentile-bootstrap CI of the median; deterministic for a given seed. With
    ``censored`` values, the widest interval they allow (see the module's docstring)."""
    x, c = _as_samples(samples), _as_censored(censored)
    _check_confidence(confidence)
    _check_resamples(resamples)
    if not c.size:
        rng = np.random.default_rng(seed)
        return _percentile_interval(_bootstrap_medians(x, resamples, rng), confidence)
    low, high = _bounds(x, c)
    # the same seed draws the same resamples of both: each upper median is >= its lower one
    return _percentile_interval(
        _bootstrap_medians(low, resamples, np.random.default_rng(seed)), confidence,
        _bootstrap_medians(high, resamples, np.random.default_rng(seed)))


# --------------------------------------------------------------------------- order statistics


def _median_interval_coverage(n: int, k: int) -> float:
    """Coverage of [x_(k), x_(n-k+1)] for the median: 1 - 2 P(Binomial(n, 1/2) <= k-1).

    Exact for any continuous distribution, because each sample falls below the true
    median with probability 1/2 independently.
    """
    from scipy.stats import binom

    return 1.0 - 2.0 * float(binom.cdf(k - 1, n, 0.5))


def min_trials(confidence: float = 0.95) -> int:
    """Smallest n for which even [min, max] covers the median with the asked confidence.

    That is the least n with 1 - 2 * 0.5**n >= confidence (6 at 95%, 8 at 99%); below it
    no distribution-free interval of the median exists.
    """
    _check_confidence(confidence)
    n = 1
    while 1.0 - 2.0 * 0.5**n < confidence:
        n += 1
    return n


def order_statistic_ci(samples: ArrayLike, confidence: float = 0.95, *,
                       censored: ArrayLike = ()) -> tuple[float, float] | None:
    """Exact distribution-free CI of the median, [x_(k), x_(n-k+1)] with the largest valid k.

    Complements the bootstrap: its coverage is guaranteed (it is conservative), while the
    percentile bootstrap undercovers for small n. Returns None when n < min_trials().
    ``censored`` values count in n; x_(k) takes them at their limit and x_(n-k+1) unbounded
    (infinite when one of them is that order statistic), so the coverage still holds.
    """
    low, high = _bounds(_as_samples(samples), _as_censored(censored))
    _check_confidence(confidence)
    k = _order_statistic_k(low.size, confidence)
    if k is None:
        return None
    return float(np.sort(low)[k - 1]), float(np.sort(high)[low.size - k])


def _order_statistic_k(n: int, confidence: float) -> int | None:
    """The largest k whose [x_(k), x_(n-k+1)] covers the median with ``confidence``."""
    if _median_interval_coverage(n, 1) < confidence:
        return None
    from scipy.stats import binom

    # the largest k with 2 P(B <= k-1) <= 1 - confidence: k-1 is the (1-c)/2 quantile's
    # neighbourhood; check it and its neighbours exactly (binom.ppf is discrete)
    k = max(1, int(binom.ppf((1 - confidence) / 2, n, 0.5)))
    while k > 1 and _median_interval_coverage(n, k) < confidence:
        k -= 1
    while k + 1 <= (n + 1) // 2 and _median_interval_coverage(n, k + 1) >= confidence:
        k += 1
    return k


# --------------------------------------------------------------------------- summary


def tukey_outliers(samples: ArrayLike) -> tuple[int, ...]:
    """Indices (into the input) of samples outside Tukey's fences; see OUTLIER_RULE."""
    x = _as_samples(samples)
    q1, q3 = np.quantile(x, [0.25, 0.75])
    iqr = q3 - q1
    mask = (x < q1 - TUKEY_K * iqr) | (x > q3 + TUKEY_K * iqr)
    return tuple(int(i) for i in np.flatnonzero(mask))


def summarize(
    samples: ArrayLike, *, confidence: float = 0.95, resamples: int = 10_000, seed: int = 0,
    censored: ArrayLike = (),
) -> Summary:
    """Describe one cell robustly: median with two CIs, quartiles, MAD, flagged outliers.

    Quartiles use numpy's default 'linear' quantile method (Hyndman-Fan type 7). ``stdev``
    uses ddof=1 and is NaN for n < 2. Raises ValueError on empty ``samples``.
    ``censored`` values (timeouts) count at their limit, so every statistic but the outliers
    (of ``samples`` only) includes them; see the module's docstring for the intervals.
    """
    done, c = _as_samples(samples), _as_censored(censored)
    x, high = _bounds(done, c)
    _check_confidence(confidence)
    _check_resamples(resamples)
    q1, median, q3 = (float(v) for v in np.quantile(x, [0.25, 0.5, 0.75]))
    mad = float(np.median(np.abs(x - median)))
    return Summary(
        n=int(x.size),
        median=median,
        median_ci=order_statistic_ci(done, confidence, censored=c),
        # (for the record; above a few thousand samples, where it and the order-statistic
        # interval agree, it is not drawn)
        median_ci_bootstrap=(bootstrap_median_ci(done, confidence=confidence,
                                                 resamples=resamples, seed=seed, censored=c)
                             if x.size <= BOOTSTRAP_MEDIAN_MAX_N else None),
        confidence=confidence,
        q1=q1,
        q3=q3,
        iqr=q3 - q1,
        min=float(x.min()),
        max=float(x.max()),
        mean=float(x.mean()),
        stdev=float(x.std(ddof=1)) if x.size >= 2 else math.nan,
        mad=mad,
        mad_scaled=mad * MAD_NORMAL_SCALE,
        outliers=tukey_outliers(done),
        outlier_rule=OUTLIER_RULE,
        censored=int(c.size),
        median_lower_bound=bool(np.median(high) != median),
    )


def censored_median(samples: ArrayLike, censored: ArrayLike = ()) -> tuple[float, bool]:
    """The median with each censored value at its limit, and whether that is only a lower
    bound (a censored value reaches it)."""
    low, high = _bounds(_as_samples(samples), _as_censored(censored))
    median = float(np.median(low))
    return median, bool(np.median(high) != median)


# --------------------------------------------------------------------------- comparisons


def ratio_of_medians(
    a: ArrayLike,
    b: ArrayLike,
    *,
    confidence: float = 0.95,
    resamples: int = 10_000,
    seed: int = 0,
    a_censored: ArrayLike = (),
    b_censored: ArrayLike = (),
) -> RatioCI:
    """median(a) / median(b) with a percentile CI from resampling each group independently.

    The groups are independent runs, so each is resampled on its own; the ratio of the two
    bootstrap medians gives the interval. Raises ValueError if median(b) is zero.
    Censored values of either group count at their limit in the ratio; the interval's lower
    end takes a's at their limit and b's unbounded, its upper end the other way round.
    """
    xa, xb = _as_samples(a, "a"), _as_samples(b, "b")
    ca, cb = _as_censored(a_censored), _as_censored(b_censored)
    _check_confidence(confidence)
    _check_resamples(resamples)
    (la, ha), (lb, hb) = _bounds(xa, ca), _bounds(xb, cb)
    med_b = float(np.median(lb))
    if med_b == 0.0:
        raise ValueError("median of b is zero, so the ratio of medians is undefined")

    def boot(xa: np.ndarray, xb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        rng = np.random.default_rng(seed)  # the same resamples for every bound
        return _bootstrap_medians(xa, resamples, rng), _bootstrap_medians(xb, resamples, rng)

    with np.errstate(divide="ignore", invalid="ignore"):
        if ca.size or cb.size:
            (low_a, high_b), (high_a, low_b) = boot(la, hb), boot(ha, lb)
            lo, hi = _percentile_interval(low_a / high_b, confidence, high_a / low_b)
        else:
            boot_a, boot_b = boot(xa, xb)
            lo, hi = _percentile_interval(boot_a / boot_b, confidence)
    return RatioCI(float(np.median(la)) / med_b, lo, hi, confidence)


def mann_whitney(a: ArrayLike, b: ArrayLike, *, method: str = "auto") -> MannWhitney:
    """Two-sided Mann-Whitney U test: ``scipy.stats.mannwhitneyu`` (its "auto" picks the
    exact null distribution for small samples without ties, else the normal approximation
    with tie and continuity corrections). ``u`` is U of the first sample."""
    from scipy import stats as sps

    xa, xb = _as_samples(a, "a"), _as_samples(b, "b")
    if method not in {"auto", "exact", "asymptotic"}:
        raise ValueError(f"method must be 'auto', 'exact' or 'asymptotic', got {method!r}")
    res = sps.mannwhitneyu(xa, xb, alternative="two-sided", method=method)
    return MannWhitney(u=float(res.statistic), p=float(res.pvalue), method=f"scipy {method}")


def cliffs_magnitude(delta: float) -> str:
    """Romano et al. (2006) labels for |delta|: 0.147, 0.33, 0.474."""
    d = abs(delta)
    if d < 0.147:
        return "negligible"
    if d < 0.33:
        return "small"
    if d < 0.474:
        return "medium"
    return "large"


def cliffs_delta(a: ArrayLike, b: ArrayLike) -> CliffsDelta:
    """Cliff's delta = (#(a_i > b_j) - #(a_i < b_j)) / (n_a n_b), counted by binary search.

    A scale-free effect size that says how often one cell beats the other, which the p-value
    (which shrinks with n) does not.
    """
    xa, xb = _as_samples(a, "a"), _as_samples(b, "b")
    sb = np.sort(xb)
    below = np.searchsorted(sb, xa, side="left")  # b_j < a_i
    above = xb.size - np.searchsorted(sb, xa, side="right")  # b_j > a_i
    delta = float(below.sum() - above.sum()) / (xa.size * xb.size)
    return CliffsDelta(delta=delta, magnitude=cliffs_magnitude(delta))


def compare(
    a: ArrayLike,
    b: ArrayLike,
    *,
    confidence: float = 0.95,
    resamples: int = 10_000,
    seed: int = 0,
    method: str = "auto",
) -> Comparison:
    """Ratio of medians with CI, Mann-Whitney U and Cliff's delta of ``a`` against ``b``."""
    return Comparison(
        ratio=ratio_of_medians(a, b, confidence=confidence, resamples=resamples, seed=seed),
        mann_whitney=mann_whitney(a, b, method=method),
        cliffs_delta=cliffs_delta(a, b),
    )


# --------------------------------------------------------------------------- verdict


def verdict(
    loaded: ArrayLike,
    baseline: ArrayLike,
    *,
    tolerance: float = 0.10,
    confidence: float = 0.95,
    seed: int = 0,
    resamples: int = 10_000,
    loaded_censored: ArrayLike = (),
    baseline_censored: ArrayLike = (),
) -> Verdict:
    """Say whether ``loaded`` is slower, faster or indistinguishable from ``baseline`` (idle).

    We only claim "indistinguishable" when the whole ratio CI lies within 1 +/- tolerance:
    a wide interval straddling 1 is "inconclusive", not evidence of no effect. Timed-out
    trials (``*_censored``, at their limit) widen the interval as far as they could reach,
    so they can make a verdict "slower" or "inconclusive", never falsely reassuring; a ratio
    whose loaded median they reach is marked as a lower bound (\u2265).
    """
    if not 0.0 <= tolerance < 1.0:
        raise ValueError(f"tolerance must be in [0, 1), got {tolerance}")
    r = ratio_of_medians(loaded, baseline, confidence=confidence, resamples=resamples, seed=seed,
                         a_censored=loaded_censored, b_censored=baseline_censored)
    conf = fmt_pct(confidence)
    at_least = "\u2265" if censored_median(loaded, loaded_censored)[1] else ""
    if r.lo > 1.0 + tolerance:
        kind = "slower"
        text = (
            f"{at_least}{fmt_factor(r.ratio)}\u00d7 slower than idle "
            f"({conf} CI {fmt_factor(r.lo)}\u2013{fmt_factor(r.hi)}\u00d7)"
        )
    elif r.hi < 1.0 - tolerance:
        kind = "faster"
        text = (
            f"{fmt_factor(1 / r.ratio)}\u00d7 faster than idle "
            f"({conf} CI {fmt_factor(1 / r.hi)}\u2013{fmt_factor(1 / r.lo)}\u00d7)"
        )
    elif r.lo >= 1.0 - tolerance and r.hi <= 1.0 + tolerance:
        kind = "indistinguishable"
        text = (
            f"indistinguishable from idle (within \u00b1{fmt_pct(tolerance)}; "
            f"{fmt_factor(r.ratio)}\u00d7 idle, {conf} CI "
            f"{fmt_factor(r.lo)}\u2013{fmt_factor(r.hi)}\u00d7)"
        )
    else:
        kind = "inconclusive"
        advice = ("timeouts leave it open above: raise --timeout to measure them"
                  if math.isinf(r.hi) else "run more trials to decide")
        text = (
            f"inconclusive: {at_least}{fmt_factor(r.ratio)}\u00d7 idle ({conf} CI "
            f"{fmt_factor(r.lo)}\u2013{fmt_factor(r.hi)}\u00d7); {advice}"
        )
    return Verdict(kind=kind, text=text, ratio=r)


# --------------------------------------------------------------------------- warnings


def bimodality_coefficient(samples: ArrayLike) -> float:
    """Sarle's BC = (g1^2 + 1) / (g2 + 3(n-1)^2 / ((n-2)(n-3))), bias-corrected g1, g2.

    Above 5/9 (a uniform's value) suggests two modes, e.g. some trials hit a cache and some
    did not, in which case a single median misdescribes the cell. NaN if n < 4 or constant.
    """
    x = _as_samples(samples)
    n = x.size
    d = x - x.mean()
    m2 = float(np.mean(d**2))
    if n < 4 or m2 == 0.0:
        return math.nan
    g1 = float(np.mean(d**3)) / m2**1.5
    g2 = float(np.mean(d**4)) / m2**2 - 3.0
    skew = g1 * math.sqrt(n * (n - 1)) / (n - 2)
    kurt = ((n + 1) * g2 + 6.0) * (n - 1) / ((n - 2) * (n - 3))
    return (skew**2 + 1.0) / (kurt + 3.0 * (n - 1) ** 2 / ((n - 2) * (n - 3)))


def _too_few_trials(n: int, confidence: float, timeouts: int = 0) -> Warning_ | None:
    """Too few *run* trials. When timeouts make up the shortfall, more trials would not help
    (they would time out too): the timeouts warning says what to do instead."""
    if n >= min_trials(confidence) or (timeouts and n + timeouts >= min_trials(confidence)):
        return None
    advise = max(RECOMMENDED_TRIALS, min_trials(confidence))
    head = "no completed trials" if n == 0 else f"only {n} trial{'s' if n != 1 else ''}"
    return Warning_(
        "too-few-trials",
        f"{head}: too few for a {fmt_pct(confidence)} interval of the median; "
        f"use --trials {advise} or more",
    )


def _timeouts(timeouts: int, summary: Summary | None) -> Warning_ | None:
    if timeouts <= 0:
        return None
    ci = summary.median_ci if summary else None
    if summary is None:
        effect = "no trial completed, so only a lower bound of the time is known"
    elif summary.median_lower_bound:
        effect = "so the median is only a lower bound (\u2265) and its interval is open above"
    elif ci is not None and math.isinf(ci[1]):
        effect = "so the median's interval is open above (\u221e)"
    else:
        effect = "they do not reach the median or its interval"
    return Warning_(
        "timeouts",
        f"{timeouts} trial{'s' if timeouts != 1 else ''} timed out and "
        f"{'are' if timeouts != 1 else 'is'} counted in this cell at the limit "
        f"{'they' if timeouts != 1 else 'it'} hit (the probe took at least that long), not "
        f"dropped: {effect}; raise --timeout if the probe is merely slow, or treat this "
        "configuration as pathological",
    )


def _bimodal(x: np.ndarray) -> Warning_ | None:
    if x.size < BIMODAL_MIN_N:
        return None
    bc = bimodality_coefficient(x)
    if not bc > BIMODAL_THRESHOLD:
        return None
    return Warning_(
        "bimodal",
        f"samples look bimodal (bimodality coefficient {bc:.2f} > {BIMODAL_THRESHOLD}); "
        "the median may describe neither mode: look at the strip plot and run more trials",
    )


def _not_cold(median: float, warm_median: float | None) -> Warning_ | None:
    if warm_median is None or abs(median - warm_median) > NOT_COLD_FRACTION * abs(warm_median):
        return None
    return Warning_(
        "not-cold",
        "the probe's cold time equals its warm time: caches were probably not dropped, "
        "or the probe's files are not on the device under test",
    )


def _outliers(x: np.ndarray) -> Warning_ | None:
    k = len(tukey_outliers(x))
    if k <= OUTLIER_WARN_FRACTION * x.size:
        return None
    return Warning_(
        "outliers",
        f"{k} of {x.size} trials ({k / x.size:.0%}) are outliers by Tukey's rule "
        "(flagged, not dropped); stop other activity on the machine, check the strip plot, "
        "or run more trials",
    )


def warnings_for(
    samples: ArrayLike,
    *,
    timeouts: int = 0,
    warm_median: float | None = None,
    confidence: float = 0.95,
    summary: Summary | None = None,
) -> list[Warning_]:
    """All warnings for one cell, in a stable order; empty ``samples`` is allowed here.
    ``summary`` (of the samples and the timeouts) says what the timeouts leave unknown.

    Codes: too-few-trials, timeouts, bimodal, not-cold, outliers.
    """
    _check_confidence(confidence)
    raw = np.asarray(samples, dtype=float)
    found = [_too_few_trials(int(raw.size), confidence, timeouts), _timeouts(timeouts, summary)]
    if raw.size:
        x = _as_samples(raw)
        found += [_bimodal(x), _not_cold(float(np.median(x)), warm_median), _outliers(x)]
    return [w for w in found if w is not None]
