"""Interrupting a real bench in every phase leaves nothing behind and loses no committed
trial: a shortened run of benchmarks/fault_injection.py (whose figures are in
docs/measurements/reliability.md)."""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.root

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "fault_injection.py"


def _script():  # noqa: ANN202 - a module
    spec = importlib.util.spec_from_file_location("fault_injection", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["fault_injection"] = module
    spec.loader.exec_module(module)
    return module


def test_every_phase_interrupted_is_fully_restored(tmp_path: Path) -> None:
    fi = _script()
    windows = fi.phase_times(tmp_path)
    assert list(windows) == list(fi.PHASES)
    rng = random.Random(7)
    outcomes = []
    for phase in fi.PHASES:
        for kind in ("SIGINT", "SIGKILL+restore"):
            start, end = windows[phase]
            o = None
            for attempt in range(4):  # a run that ended before the signal injected nothing:
                # sooner next time (the reference run's phase may have been slower)
                delay = rng.uniform(0, (end - start) * 0.5) / 4 ** attempt
                o = fi.inject(tmp_path, phase, kind, delay)
                if o is not None:
                    break
            assert o is not None, (phase, kind)
            outcomes.append(o)
    problems = [(o.phase, o.kind, o.problems) for o in outcomes if not o.restored]
    assert problems == []
    assert sum(o.lost for o in outcomes) == 0
    assert {o.phase for o in outcomes} >= {"layout", "trials", "report"}
