"""Statistics for start-up latency samples: summaries, comparisons, verdicts and caveats.

Everything here is a pure function: numbers in, frozen dataclasses out, no I/O and no words
(kinds, codes and numbers; `report.words` says them). The results hold only plain floats,
ints, strings, string enums and tuples, so ``dataclasses.asdict`` gives JSON. One module per
concept: `estimates` (one cell), `comparisons` (two cells), `verdicts` (what they mean).

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
* A verdict is read off a ratio's interval against a band (`verdicts.classify`): slower
  when the whole interval is above it, "at most" (the interval's upper end) once that end is
  inside it -- the one-sided question a user asks of a protected start -- and
  indistinguishable when both ends are; undecided only while the upper end is above the band
  and the lower end is not. The band is what a person notices for a start of that length
  (`band`: more than 10% and more than 100 ms, at most ±25%), or given by hand.
* A run that stops once its verdict is decided gets its intervals from confidence
  sequences (`sequential`: valid at every number of trials at once, so stopping on them
  costs no validity); its ratios to idle from the rounds' pairs (`paired`: one sequence of
  per-round ratios, about half the trials of two medians' sequences), by the rule in
  `stopping`; `simulation` measures both on studies with a known truth. Each `RatioCI`
  names the method that made it.
* Bootstraps use a seeded ``numpy.random.Generator`` so a report is reproducible.
"""

from .band import (
    NOTICEABLE_FRACTION,
    NOTICEABLE_S,
    WIDEST,
    Band,
    Basis,
    band_for,
    noticeable,
)
from .comparisons import (
    CliffsDelta,
    Comparison,
    MannWhitney,
    RatioCI,
    cliffs_delta,
    cliffs_magnitude,
    compare,
    mann_whitney,
    ratio_of_medians,
)
from .estimates import (
    BOOTSTRAP_MEDIAN_MAX_N,
    MAD_NORMAL_SCALE,
    TUKEY_K,
    Summary,
    bootstrap_median_ci,
    censored_median,
    min_trials,
    order_statistic_ci,
    summarize,
    tukey_outliers,
)
from .paired import METHOD as PAIRED_METHOD
from .paired import Pairs, pair_rounds, paired_ratio_cs
from .sequential import METHOD as SEQUENTIAL_METHOD
from .sequential import accepted_counts, median_cs, ratio_cs
from .stopping import Rule, Stop, decision, out_of_reach, trials_needed
from .verdicts import (
    BIMODAL_MIN_N,
    BIMODAL_THRESHOLD,
    DECIDED,
    NOT_COLD_FRACTION,
    OUTLIER_WARN_FRACTION,
    RECOMMENDED_TRIALS,
    Caveat,
    CaveatCode,
    Param,
    TimeoutReach,
    Verdict,
    VerdictKind,
    bimodality_coefficient,
    classify,
    paired_verdict,
    sequential_verdict,
    timeout_reach,
    verdict,
    warnings_for,
)

__all__ = [
    "NOTICEABLE_FRACTION", "NOTICEABLE_S", "WIDEST", "Band", "Basis", "band_for", "noticeable",
    "DECIDED", "BIMODAL_MIN_N", "BIMODAL_THRESHOLD", "BOOTSTRAP_MEDIAN_MAX_N", "MAD_NORMAL_SCALE",
    "NOT_COLD_FRACTION", "OUTLIER_WARN_FRACTION", "RECOMMENDED_TRIALS", "TUKEY_K",
    "PAIRED_METHOD", "SEQUENTIAL_METHOD", "Caveat", "CaveatCode", "Rule", "Stop",
    "CliffsDelta", "Comparison", "MannWhitney", "Pairs", "Param", "RatioCI",
    "Summary", "TimeoutReach", "Verdict", "VerdictKind",
    "accepted_counts", "bimodality_coefficient", "classify", "decision", "median_cs",
    "out_of_reach", "pair_rounds", "paired_ratio_cs", "paired_verdict", "ratio_cs",
    "trials_needed", "sequential_verdict", "bootstrap_median_ci", "censored_median", "cliffs_delta",
    "cliffs_magnitude", "compare", "mann_whitney", "min_trials", "order_statistic_ci",
    "ratio_of_medians", "summarize", "timeout_reach", "tukey_outliers", "verdict",
    "warnings_for",
]
