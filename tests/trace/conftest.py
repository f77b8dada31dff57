"""A builder of synthetic traces (the real Profile model, known figures), for the pure tests
of profile, diff and render."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from backburner.trace.parsers import SyscallStats
from backburner.trace.profile import Profile, Run, Thread

OUTCOME = {"pid": 100, "status": 0, "exit_code": 0, "signal": None, "core_dumped": False,
           "wall_s": 1.0, "user_s": 0.5, "sys_s": 0.1, "max_rss_kb": 50000, "in_blocks": 0,
           "out_blocks": 0, "started_at": 1.7e9, "launcher_rss_kb": 12000, "minflt": 100,
           "majflt": 0, "nvcsw": 10, "nivcsw": 5}


def build_run(index: int, syscalls: dict[str, int] | None = None, *, traced: bool = True,
             errnos: dict[str, dict[str, int]] | None = None, cal: int = 10,
             **outcome: Any) -> Run:
    """One run: `syscalls` name -> calls on the job's main thread (1 ms each), a worker
    thread with 3 futex calls, `cal` function-call IPIs on CPU0."""
    calls = {n: SyscallStats(c, sum((errnos or {}).get(n, {}).values()), c * 0.001,
                             dict((errnos or {}).get(n, {}))) for n, c in (syscalls or {}).items()}
    threads = [Thread(100, 100, "job", calls, {"run_s": 0.4, "wait_s": 0.01, "slices": 20,
                                               "samples": 5}),
               Thread(101, 100, "worker", {"futex": SyscallStats(3, 0, 0.002, {})}, None)]
    counters = {"window_s": 1.0,
                "interrupts": {"CAL": {"desc": "Function call interrupts", "per_cpu": [cal, 0],
                                       "total": cal}},
                "stat": {"ctxt": 1000, "cpu_user": 0.5},
                "psi": {"io": {"some": 0.1, "full": 0.0}}}
    return Run(index, traced, {**OUTCOME, **outcome}, counters,
               threads if traced else [], 10)


@pytest.fixture
def make_run() -> Callable[..., Run]:
    return build_run


@pytest.fixture
def make_profile() -> Callable[..., Profile]:
    def build(label: str, runs: list[Run], engine: str = "perf",
              calibration: list[Run] | None = None) -> Profile:
        return Profile(label=label, command=label.split(), engine={"name": engine,
                       "version": "test 1.0", "note": "synthetic"}, created_at=1.7e9,
                       host={"kernel": "6.1.0-test", "cpus": 2}, sample_interval_s=0.05,
                       runs=runs, calibration=calibration or [], tool="backburner test")
    return build
