"""stats.stopping: the rule bench runs -- min runs, decided, or out of budget."""

from __future__ import annotations

import numpy as np
import pytest

from backburner import stats as bs


def _cells(ratio: float, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.lognormal(np.log(ratio), 0.1, n), rng.lognormal(0, 0.1, n)


def test_a_clear_difference_is_decided_once_min_runs_are_in() -> None:
    loaded, base = _cells(3.0, 12)
    rule = bs.Rule(min_runs=10, max_runs=50)
    assert bs.decision(rule, loaded[:9], base[:9]) == bs.Stop.CONTINUE  # before min_runs
    assert bs.decision(rule, loaded[:10], base[:10]) == bs.Stop.DECIDED


def test_an_undecided_cell_continues_until_max_runs() -> None:
    loaded, base = _cells(1.1, 20)
    rule = bs.Rule(min_runs=5, max_runs=20)
    assert bs.decision(rule, loaded[:19], base[:19]) == bs.Stop.CONTINUE
    assert bs.decision(rule, loaded, base) == bs.Stop.BUDGET


def test_timeouts_count_as_trials() -> None:
    loaded, base = _cells(1.0, 10)
    rule = bs.Rule(min_runs=1, max_runs=10)
    assert bs.decision(rule, loaded[:8], base, loaded_censored=[60.0, 60.0]) == bs.Stop.BUDGET


def test_no_baseline_sample_leaves_a_cell_undecided() -> None:
    rule = bs.Rule(min_runs=1, max_runs=3)
    assert bs.decision(rule, [1.0, 1.0], []) == bs.Stop.CONTINUE


@pytest.mark.parametrize("args", [(0, 5), (6, 5), (1, 5, 1.0), (1, 5, 0.1, 1.0)])
def test_rule_refuses_nonsense(args: tuple[float, ...]) -> None:
    with pytest.raises(ValueError):
        bs.Rule(*args)  # type: ignore[arg-type]
