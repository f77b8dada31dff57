"""bench.runner's rules against a scripted executor: no root, no device, no sleeping.

The order trials run and are stored in, warm-ups, cache drops, when loads start, settle and
stop, the abort limits and rules, resume and the progress shown are all decided by
`runner.Bench`; `Scripted` writes down what it is asked and answers each probe start from a
script. test_machine.py runs the same rules on the real executor and real testbeds."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import BULK, Scripted, Times, bb, one_line_error, usual

from backburner.base.errors import SystemStateError
from backburner.bench import config, runner
from backburner.bench.executor import Executor
from backburner.bench.prepare import StepResult
from backburner.store import Store
from backburner.store.cell import Cell


def _plan(**kw: object) -> config.Plan:
    base: dict = dict(probes=["/bin/true"], loads=["none", "readers:1:seq"],
                      policies=["default", "background"], schedulers=["mq-deadline", "bfq"],
                      device="testbed:1G", trials=2, settle_s=0.3, timeout_s=30, seed=11)
    base.update(kw)
    return config.plan(config.BenchConfig(**base), resolve=False)  # type: ignore[arg-type]


class Recorder:
    def __init__(self) -> None:
        self.progress: list[tuple[int, int, str, str]] = []
        self.events: list[str] = []

    def report(self, p: runner.Progress) -> None:
        self.progress.append((p.done, p.total, p.cell, p.last))
        self.events = list(p.events)


def _new_run(tmp_path: Path, plan: config.Plan) -> tuple[Store, int]:
    store = Store.create(str(tmp_path / "r.db"))
    return store, store.add_run("bb test", plan.config.to_dict(), plan.config.seed, {}, "test")


def _bench(tmp_path: Path, plan: config.Plan, executor: Executor
           ) -> tuple[Store, int, Recorder]:
    store, run_id = _new_run(tmp_path, plan)
    rec = Recorder()
    runner.Bench(plan, store, run_id, executor, rec.report).run()
    return store, run_id, rec


def _stored(store: Store, run_id: int) -> list[tuple[Cell, dict[str, Any]]]:
    """(cell, trial) in the order the trials were committed."""
    cells = {c.id: c.cell for c in store.cells(run_id)}
    return [(cells[t["cell_id"]], t) for t in store.trials(include_warmup=True,
                                                           run_ids=[run_id])]


def _between_measures(calls: list[tuple[Any, ...]]) -> list[list[tuple[Any, ...]]]:
    """The calls made before each probe start, since the previous one (its stop included)."""
    out: list[list[tuple[Any, ...]]] = [[]]
    for call in calls:
        if call[0] == "measure":
            out.append([])
        else:
            out[-1].append(call)
    return out[:-1]


# --- order, warm-ups, cache drops ----------------------------------------------------------


def test_trials_run_and_are_stored_in_the_seeded_order(tmp_path: Path) -> None:
    plan = _plan()
    fake = Scripted()
    store, run_id, _ = _bench(tmp_path, plan, fake)
    slots = plan.slots()
    stored = _stored(store, run_id)
    assert [(c.key, t["round"]) for c, t in stored] == [(s.cell.key, s.round) for s in slots]
    assert [c for c, _ in fake.measures()] == [s.cell for s in slots]
    assert fake.calls[0] == ("open",) and fake.calls[-1] == ("close",)
    assert store.runs()[0].finished_at is not None
    assert store.runs()[0].environment["device"] == {"name": "scripted0"}
    assert {c.key for c in store.cells(run_id)} == {c.key for c in plan.cells}
    assert _plan().slots() == slots and _plan(seed=12).slots() != slots  # the seed decides


def test_warm_ups_run_warm_and_are_never_counted_as_trials(tmp_path: Path) -> None:
    """Warm-ups come first, are stored flagged (cold=0, warmup=1) but never among the
    counted trials, and no cache is dropped before them; every counted trial is cold, after
    exactly one drop."""
    plan = _plan(warmup=2, trials=3)
    fake = Scripted()
    store, run_id, _ = _bench(tmp_path, plan, fake)
    stored = _stored(store, run_id)
    cells = len(plan.cells)
    assert [t["warmup"] for _, t in stored] == [1] * 2 * cells + [0] * 3 * cells
    assert all(t["cold"] == 1 - t["warmup"] for _, t in stored)
    assert {t["round"] for _, t in stored if t["warmup"]} == {0, 1}
    assert len(store.trials(run_ids=[run_id])) == 3 * cells  # the counted ones
    assert all(not t["warmup"] for t in store.trials(run_ids=[run_id]))
    drops = [before.count(("drop",)) for before in _between_measures(fake.calls)]
    assert drops == [0] * 2 * cells + [1] * 3 * cells


def test_a_warm_run_drops_nothing_and_its_warm_ups_set_the_limits(tmp_path: Path) -> None:
    plan = _plan(cold=False, timeout_s=30)
    fake = Scripted()
    store, run_id, _ = _bench(tmp_path, plan, fake)
    assert ("drop",) not in fake.calls
    assert all(t["cold"] == 0 for _, t in _stored(store, run_id))
    # the unloaded warm-ups run first, so every loaded start is already limited: 30 × 0.1 s
    assert {round(lim, 9) for c, lim in fake.measures() if not c.unloaded} == {3.0}


# --- the abort rules ------------------------------------------------------------------------


def test_the_limit_is_abort_factor_times_the_cold_unloaded_median(tmp_path: Path) -> None:
    """max(1 s, factor × the median of the scheduler's cold unloaded times), never above
    the timeout; the timeout until a cold unloaded time exists (warm-ups set none)."""
    unloaded = {"mq-deadline": 0.5, "kyber": 2.0, "bfq": 0.01}
    plan = _plan(timeout_s=8, abort_factor=10, schedulers=list(unloaded))
    fake = Scripted(lambda c: ("ok", unloaded[c.scheduler] if c.unloaded else 2.0))
    store, run_id, _ = _bench(tmp_path, plan, fake)
    seen: set[str] = set()
    for (cell, limit), slot in zip(fake.measures(), plan.slots(), strict=True):
        if cell.unloaded:
            assert limit == 8
            if not slot.warmup:
                seen.add(cell.scheduler)
        elif cell.scheduler not in seen:
            assert limit == 8  # no cold unloaded time of its scheduler yet
        else:  # 10 × 0.5 s; 10 × 2 s = 20 s, above the timeout; 10 × 0.01 s, below 1 s
            assert limit == {"mq-deadline": 5.0, "kyber": 8.0, "bfq": 1.0}[cell.scheduler]
    assert seen == set(unloaded)
    assert [t["extra"]["limit_s"] for _, t in _stored(store, run_id)] == \
        [limit for _, limit in fake.measures()]


def test_the_limit_comes_from_the_cells_own_baseline(tmp_path: Path) -> None:
    """A replayed (prepared) idle start 7× faster must not set the limit for cells without
    the preparation: each loaded cell is limited by its own unloaded baseline."""
    plan = _plan(prepares=["before:replay=true"], schedulers=["bfq"], policies=["default"],
                 timeout_s=300, trials=3, warmup=0)
    fake = Scripted(lambda c: ("ok", (0.1 if c.prepare == "replay" else 0.7)
                               if c.unloaded else 2.0))
    _bench(tmp_path, plan, fake)
    limited = {(c.prepare, round(lim, 9)) for c, lim in fake.measures()
               if not c.unloaded and lim != 300}
    assert limited == {("none", 21.0), ("replay", 3.0)}


def test_a_cell_is_given_up_after_abort_after_timeouts(tmp_path: Path) -> None:
    """Its (abort_after + 1)-th slot and all later ones are stored aborted without a probe
    start or a load; the warm-up's timeout counts; other cells are not affected."""
    plan = _plan(trials=5, abort_after=2)
    bad = Cell("/bin/true", "testbed:1G", "bfq", "readers:1:seq", "background")
    fake = Scripted(lambda c: ("timeout", 0) if c == bad else usual(c))
    store, run_id, _ = _bench(tmp_path, plan, fake)
    statuses = [t["status"] for c, t in _stored(store, run_id) if c == bad]
    assert statuses == ["timeout", "timeout", "aborted", "aborted", "aborted", "aborted"]
    assert [c for c, _ in fake.measures()].count(bad) == 2
    aborted = [t for c, t in _stored(store, run_id) if t["status"] == "aborted"]
    assert {t["extra"]["reason"] for t in aborted} == {"2 earlier trials timed out"}
    assert all(t["wall_s"] is None and t["started_at"] == t["ended_at"] for t in aborted)
    assert fake.calls.count(("start", bad)) == 2  # no load for an aborted slot
    others = [t["status"] for c, t in _stored(store, run_id) if c != bad]
    assert set(others) == {"ok"}


def test_failures_keep_their_stderr_and_neither_abort_nor_set_limits(tmp_path: Path) -> None:
    plan = _plan(trials=4, abort_after=1, timeout_s=30)
    fake = Scripted(lambda c: ("failed", 0.05) if c.unloaded else ("ok", 0.4))
    store, run_id, _ = _bench(tmp_path, plan, fake)
    stored = _stored(store, run_id)
    assert len(fake.measures()) == len(stored) == len(plan.slots())  # none aborted
    assert {lim for _, lim in fake.measures()} == {30}  # no successful baseline
    failed = [t for c, t in stored if c.unloaded]
    assert all(t["status"] == "failed" and t["exit_code"] == 3 for t in failed)
    assert all(t["extra"]["stderr_tail"] == ["the reason it failed"] for t in failed)
    assert all("stderr_tail" not in t["extra"] for c, t in stored if not c.unloaded)


def test_a_load_that_fails_while_the_probe_runs_fails_that_trial_only(tmp_path: Path) -> None:
    """A package that would not install mid-run: that trial fails with the load's last lines
    (the probe was timed against no load); the bench goes on, the next trial starts it again."""
    plan = _plan(trials=3, policies=["default"], schedulers=["bfq"], warmup=0)
    loaded = [i for i, s in enumerate(plan.slots()) if not s.cell.unloaded]
    said = ["dpkg: error processing archive app.deb (--install):", " unexpected end of file"]
    fake = Scripted(load_fails={loaded[1]: said})
    store, run_id, _ = _bench(tmp_path, plan, fake)
    trials = [t for c, t in _stored(store, run_id) if not c.unloaded]
    assert [t["status"] for t in trials] == ["ok", "failed", "ok"]
    failed = trials[1]
    assert failed["extra"]["stderr_tail"] == said
    assert failed["extra"]["reason"] == "the load failed while the probe ran"
    assert "failure" not in failed["extra"]["bulk"] and failed["extra"]["bulk"] == BULK
    assert all("stderr_tail" not in t["extra"] for t in (trials[0], trials[2]))
    assert [c[0] for c in fake.calls].count("start") == 3  # started again after it


# --- resume ---------------------------------------------------------------------------------


def test_a_resumed_run_skips_exactly_the_committed_trials(tmp_path: Path) -> None:
    """Interrupted in its 8th probe start, a run keeps 7 trials and stops the load it had
    started; resumed, it runs exactly the rest of the seeded order, each slot once."""
    plan = _plan(trials=3)
    slots = plan.slots()
    first = Scripted(interrupt_at=7)
    store, run_id = _new_run(tmp_path, plan)
    with pytest.raises(KeyboardInterrupt):
        runner.Bench(plan, store, run_id, first, Recorder().report).run()
    store.close()
    assert first.calls[-1] == ("close",) and first.running == set()
    job = runner.Resume(str(tmp_path / "r.db"))
    try:
        assert (job.run_id, job.total, job.left) == (run_id, len(slots), len(slots) - 7)
        assert not job.finished
        second, rec = Scripted(), Recorder()
        runner.Bench(job.plan, job.store, job.run_id, second, rec.report).run()
        stored = _stored(job.store, run_id)
    finally:
        job.store.close()
    assert [c for c, _ in second.measures()] == [s.cell for s in slots[7:]]
    assert [(c.key, t["round"]) for c, t in stored] == [(s.cell.key, s.round) for s in slots]
    assert rec.progress[0][:2] == (7, len(slots))


def test_a_resumed_run_keeps_its_timeouts_and_limits(tmp_path: Path) -> None:
    """The abort count and the unloaded baselines continue from what is stored."""
    plan = _plan(trials=4, abort_after=2, timeout_s=30, schedulers=["bfq"], seed=11)
    slots = plan.slots()
    bad = Cell("/bin/true", "testbed:1G", "bfq", "readers:1:seq", "background")
    times: Times = lambda c: ("timeout", 0) if c == bad else usual(c)  # noqa: E731
    # seed 11: the bad cell times out in slots 1 and 3 and is given up in slot 6; slot 4 is
    # the one cold unloaded trial before slot 7, a loaded one, whose probe is interrupted
    assert [i for i, s in enumerate(slots[:8]) if s.cell == bad] == [1, 3, 6]
    assert [i for i, s in enumerate(slots[:8]) if s.cell.unloaded and not s.warmup] == [4]
    assert not slots[7].cell.unloaded
    store, run_id = _new_run(tmp_path, plan)
    with pytest.raises(KeyboardInterrupt):
        runner.Bench(plan, store, run_id, Scripted(times, interrupt_at=6),
                     Recorder().report).run()
    assert len(_stored(store, run_id)) == 7
    second = Scripted(times)
    runner.Bench(plan, store, run_id, second, Recorder().report).run()
    assert second.measures()[0] == (slots[7].cell, 3.0)  # 30 × the stored 0.1 s
    assert bad not in [c for c, _ in second.measures()]
    statuses = [t["status"] for c, t in _stored(store, run_id) if c == bad]
    assert statuses == ["timeout", "timeout", "aborted", "aborted", "aborted"]


# --- loads: lifetimes, settling, interleaving -----------------------------------------------


def test_a_load_per_trial_is_started_settled_and_stopped_around_its_probe(
        tmp_path: Path) -> None:
    plan = _plan(trials=2)
    fake = Scripted(weight_raising={"bfq": 5.0})
    store, run_id, _ = _bench(tmp_path, plan, fake)
    stored = _stored(store, run_id)
    before = _between_measures(fake.calls)
    for (cell, t), calls in zip(stored, before, strict=True):
        calls = [c for c in calls if c[0] != "stop" and c != ("open",)]  # (the last one's)
        drop = [("drop",)] if t["cold"] else []
        if cell.unloaded:
            assert calls == [("prepare", cell), ("scheduler", cell.scheduler), *drop]
            assert "settle_s" not in t["extra"] and "bulk" not in t["extra"]
        else:  # weight raising is waited out only by a load that lives for a block
            assert calls == [("prepare", cell), ("scheduler", cell.scheduler), *drop,
                             ("start", cell), ("settle", cell.load, 0.3)]
            assert t["extra"]["settle_s"] == 0.3 and t["extra"]["bulk"] == BULK
    after = [fake.calls[i + 1][0] for i, c in enumerate(fake.calls) if c[0] == "measure"]
    assert [a == "stop" for a in after] == [not c.unloaded for c, _ in stored]
    assert [c for c in fake.calls if c[0] == "stop"] == [
        ("stop", c.load) for c, _ in stored if not c.unloaded]


def test_a_load_that_lives_for_a_block(tmp_path: Path) -> None:
    """Started once per block (after the scheduler switch), settled past the scheduler's
    weight raising, caches dropped under it before every trial, stopped after the block's
    last trial: its bulk work is stored with that trial, its settle time with the first."""
    plan = _plan(trials=3, block=3, load_lifetime="cell", warmup=0, schedulers=["bfq"],
                 policies=["background"], settle_s=0.3)
    fake = Scripted(weight_raising={"bfq": 5.0})
    store, run_id, _ = _bench(tmp_path, plan, fake)
    loaded = [t for c, t in _stored(store, run_id) if not c.unloaded]
    assert ["settle_s" in t["extra"] for t in loaded] == [True, False, False]
    assert ["bulk" in t["extra"] for t in loaded] == [False, False, True]
    assert loaded[0]["extra"]["settle_s"] == 5.0
    load = "readers:1:seq"
    cell = Cell("/bin/true", "testbed:1G", "bfq", load, "background")
    assert [c for c in fake.calls if c[0] in ("start", "settle", "stop")] == [
        ("start", cell), ("settle", load, 5.0), ("stop", load)]
    before = [[c for c in calls if c != ("open",)] for calls in _between_measures(fake.calls)]
    first = [c for c, _ in fake.measures()].index(cell)
    assert before[first] == [("prepare", cell), ("scheduler", "bfq"), ("start", cell),
                             ("settle", load, 5.0), ("drop",)]  # dropped while it runs
    assert before[first + 1] == before[first + 2] == [("prepare", cell), ("drop",)]


def test_a_block_load_that_ended_is_started_again(tmp_path: Path) -> None:
    plan = _plan(trials=3, block=3, load_lifetime="cell", warmup=0, schedulers=["bfq"],
                 policies=["background"], loads=["readers:1:seq"])
    fake = Scripted(dies_after={0: "readers:1:seq"})
    store, run_id, _ = _bench(tmp_path, plan, fake)
    loaded = [t for c, t in _stored(store, run_id) if not c.unloaded]
    assert ["settle_s" in t["extra"] for t in loaded] == [True, True, False]
    assert [c[0] for c in fake.calls if c[0] in ("start", "stop")] == ["start", "start", "stop"]


def test_an_aborted_slot_that_ends_a_block_stops_its_load(tmp_path: Path) -> None:
    plan = _plan(trials=3, block=3, load_lifetime="cell", warmup=0, schedulers=["bfq"],
                 policies=["background"], loads=["readers:1:seq"], abort_after=1)
    fake = Scripted(lambda c: ("timeout", 0) if not c.unloaded else usual(c))
    store, run_id, _ = _bench(tmp_path, plan, fake)
    loaded = [t for c, t in _stored(store, run_id) if not c.unloaded]
    assert [t["status"] for t in loaded] == ["timeout", "aborted", "aborted"]
    assert ["bulk" in t["extra"] for t in loaded] == [False, False, True]
    assert [c[0] for c in fake.calls if c[0] in ("start", "measure", "stop")
            and (c[0] != "measure" or not c[1].unloaded)] == ["start", "measure", "stop"]


def test_a_load_that_ends_while_settling_ends_the_run(tmp_path: Path) -> None:
    """The trials before it stay committed; the run is not finished; nothing is left open."""
    plan = _plan()
    fake = Scripted(ends_while_settling="readers:1:seq")
    store, run_id = _new_run(tmp_path, plan)
    with pytest.raises(SystemStateError, match="ended during settling"):
        runner.Bench(plan, store, run_id, fake, Recorder().report).run()
    first_loaded = next(i for i, s in enumerate(plan.slots()) if not s.cell.unloaded)
    assert len(_stored(store, run_id)) == first_loaded
    assert store.runs()[0].finished_at is None
    assert fake.calls[-1] == ("close",)


def test_what_a_trial_stores(tmp_path: Path) -> None:
    """The trial's row, and its extra's keys in the order they are stored."""
    plan = _plan(loads=["readers:1:seq"], policies=["default"], schedulers=["bfq"],
                 prepares=["before:warm=true"], trials=1, warmup=0)
    fake = Scripted(lambda c: ("failed", 0.25) if c.prepare == "warm" else ("ok", 0.5))
    store, run_id, _ = _bench(tmp_path, plan, fake)
    trial = next(t for c, t in _stored(store, run_id) if c.prepare == "warm"
                 and not c.unloaded)
    assert list(trial["extra"]) == ["launcher_rss_kb", "nvcsw", "nivcsw", "majflt", "settle_s",
                                    "prepare", "limit_s", "bulk", "stderr_tail"]
    assert trial["extra"]["launcher_rss_kb"] == 1024 and trial["extra"]["majflt"] == 2
    assert (trial["status"], trial["wall_s"], trial["exit_code"], trial["cold"]) == \
        ("failed", 0.25, 3, 1)
    assert (trial["in_blocks"], trial["max_rss_kb"], trial["user_s"]) == (16, 2048, 0.01)
    assert trial["load_read_bps"] == pytest.approx(1000 / 0.5)  # the probe's own taken out
    assert trial["load_write_bps"] == 0


# --- progress ------------------------------------------------------------------------------


def test_progress_before_and_after_every_slot(tmp_path: Path) -> None:
    plan = _plan(loads=["none"], schedulers=["bfq"], trials=2, timeout_s=30, abort_after=1)
    fake = Scripted(lambda c: ("timeout", 0))
    _, _, rec = _bench(tmp_path, plan, fake)
    warm, cold = "bfq · none · - (warm-up)", "bfq · none · -"
    assert rec.progress == [
        (0, 3, warm, ""), (1, 3, warm, "timeout 30.000s"),
        (1, 3, cold, "timeout 30.000s"), (2, 3, cold, "aborted"),
        (2, 3, cold, "aborted"), (3, 3, cold, "aborted")]


def test_progress_shows_each_times_status_and_seconds(tmp_path: Path) -> None:
    plan = _plan(loads=["none"], schedulers=["bfq"], trials=1)
    _, _, rec = _bench(tmp_path, plan, Scripted(lambda c: ("ok", 0.1234)))
    assert [p[3] for p in rec.progress] == ["", "ok 0.123s", "ok 0.123s", "ok 0.123s"]
    assert Counter(p[2] for p in rec.progress) == {"bfq · none · - (warm-up)": 2,
                                                    "bfq · none · -": 2}


# --- --resume of a shared database: only this machine's own run -----------------------------


def _shared_run(store: Store, hostname: str, machine: str | None = None,
                finished: bool = False) -> int:
    cfg = config.BenchConfig(probes=["/bin/true"], loads=["none"], policies=["default"],
                             schedulers=["none"], device="testbed:64M", trials=1)
    run = store.add_run("backburner bench", cfg.to_dict(), 0, {}, "v", machine=machine,
                        hostname=hostname)
    if finished:
        store.finish_run(run)
    return run


@pytest.mark.root  # (the PostgreSQL server runs as its own user)
def test_resume_of_a_shared_database_never_takes_another_machines_run(
        pg_url: str, state_dir: Path) -> None:
    """Resuming `postgresql://…` on a machine with no run there must not continue another
    machine's run (two machines' trials would mix in one run): it is refused, naming the
    machines whose runs are unfinished."""
    s = Store.create(pg_url)
    _shared_run(s, "ssd-desktop", "f" * 32)
    _shared_run(s, "hdd-laptop-3", "e" * 32)
    _shared_run(s, "done-box", "d" * 32, finished=True)
    s.close()
    r = bb("bench", "--resume", pg_url)
    assert r.returncode == 65, r.err
    line = one_line_error(r)
    assert "no run of this machine" in line
    assert "hdd-laptop-3 (eeeeeeee), ssd-desktop (ffffffff)" in line and "done-box" not in line
    s = Store.open(pg_url, readonly=True)
    assert s.trials(include_warmup=True) == [] and len(s.runs()) == 3
    s.close()

    s = Store.open(pg_url)  # this machine's unfinished run is the one resumed
    mine = _shared_run(s, "here")
    _shared_run(s, "here", finished=True)  # (a later finished one is not)
    s.close()
    job = runner.Resume(pg_url)
    try:
        assert job.run_id == mine and not job.finished and job.left == 2
    finally:
        job.store.close()


def test_resume_of_a_copied_file_still_takes_its_last_run(tmp_path: Path) -> None:
    """A file copied from another machine is resumed here: its last run, whoever made it."""
    db = str(tmp_path / "copied.db")
    s = Store.create(db)
    _shared_run(s, "ssd-desktop", "f" * 32)
    last = _shared_run(s, "hdd-laptop-3", "e" * 32)
    s.close()
    job = runner.Resume(db)
    try:
        assert job.run_id == last
    finally:
        job.store.close()


# --- --prepare (hyperfine's) ----------------------------------------------------------------


def _step(status: str) -> StepResult:
    tail = ("rm: cannot remove 'x': Permission denied",) if status != "ok" else ()
    return StepResult("prepare", status, 0.02, 0 if status == "ok" else 1, "", tail)


def test_prepare_runs_first_in_every_slot_warm_up_or_counted(tmp_path: Path) -> None:
    """Before the scheduler switch, the cache drop and the load: un-timed, and what it
    reads is dropped again before a cold trial."""
    plan = _plan(trials=2, warmup=1)
    fake = Scripted(prepared=lambda c: _step("ok"))
    store, run_id, _ = _bench(tmp_path, plan, fake)
    stored = _stored(store, run_id)
    assert len(stored) == len(plan.slots())
    for (cell, t), calls in zip(stored, _between_measures(fake.calls), strict=True):
        calls = [c for c in calls if c[0] not in ("stop", "open")]
        assert calls[0] == ("prepare", cell)
        assert t["status"] == "ok" and t["extra"]["trial_prepare"]["status"] == "ok"


def test_a_failed_prepare_fails_its_trial_without_the_probe(tmp_path: Path) -> None:
    plan = _plan(trials=2, warmup=0, policies=["default"], schedulers=["bfq"])
    bad = Cell("/bin/true", "testbed:1G", "bfq", "readers:1:seq", "default")
    fake = Scripted(prepared=lambda c: _step("failed" if c == bad else "ok"))
    store, run_id, _ = _bench(tmp_path, plan, fake)
    failed = [t for c, t in _stored(store, run_id) if c == bad]
    assert [t["status"] for t in failed] == ["failed", "failed"]
    assert all(t["wall_s"] is None for t in failed)
    assert failed[0]["extra"]["stderr_tail"] == ["rm: cannot remove 'x': Permission denied"]
    assert failed[0]["extra"]["reason"] == "the --prepare command failed"
    assert failed[0]["extra"]["trial_prepare"]["status"] == "failed"
    assert bad not in [c for c, _ in fake.measures()]  # the probe never started
    assert ("start", bad) not in fake.calls  # nor its load
    others = [t["status"] for c, t in _stored(store, run_id) if c != bad]
    assert others and set(others) == {"ok"}


def test_a_failed_prepare_stops_a_block_load_it_ends(tmp_path: Path) -> None:
    """With --load-lifetime cell the load may already run: the block's last slot stops it,
    prepared or not."""
    plan = _plan(trials=2, block=2, load_lifetime="cell", warmup=0, schedulers=["bfq"],
                 policies=["default"], loads=["readers:1:seq"])
    slots = [s for s in plan.slots() if not s.cell.unloaded]
    last = slots[-1]
    count = iter(range(100))
    fake = Scripted(prepared=lambda c: _step(
        "failed" if not c.unloaded and next(count) == 1 else "ok"))
    store, run_id, _ = _bench(tmp_path, plan, fake)
    loaded = [t for c, t in _stored(store, run_id) if c == last.cell]
    assert [t["status"] for t in loaded] == ["ok", "failed"]
    assert "bulk" in loaded[1]["extra"]  # the load stopped after the failed slot
    assert fake.running == set()


# --- until decided (--min-runs, --max-runs, --max-time) --------------------------------------


def _noisy(ratios: dict[str, float], seed: int = 5) -> Callable[[Cell], tuple[str, float]]:
    """Lognormal start-up times: 0.1 s unloaded, that times the policy's ratio loaded."""
    rng = np.random.default_rng(seed)

    def times(cell: Cell) -> tuple[str, float]:
        median = 0.1 if cell.unloaded else 0.1 * ratios[cell.policy]
        return "ok", float(median * rng.lognormal(0.0, 0.05))
    return times


def _counted(store: Store, run_id: int) -> Counter[Cell]:
    return Counter(c for c, t in _stored(store, run_id) if not t["warmup"])


def test_until_decided_a_clear_cell_stops_and_its_slots_are_skipped(tmp_path: Path) -> None:
    """A cell 3× slower is decided within a few rounds and left alone; a cell 1.25×
    unloaded (on the edge of the band a person notices for a 0.1 s start, ±25%) cannot be
    decided: it runs until even its best case is out of the budget's reach, or to max_runs,
    with its baseline; the other baseline stops with its last decided cell. Why each
    stopped is stored with the run."""
    plan = _plan(schedulers=["bfq", "mq-deadline"], min_runs=8, max_runs=40)
    fake = Scripted(_noisy({"default": 3.0, "background": 1.25}))
    store, run_id, rec = _bench(tmp_path, plan, fake)
    counted = _counted(store, run_id)
    clear = [c for c in plan.cells if c.policy == "default"]
    edge = [c for c in plan.cells if c.policy == "background"]
    assert all(8 <= counted[c] < 20 for c in clear)
    reasons = store.run(run_id).environment["stopping"]
    assert {reasons[c.key] for c in clear} == {"decided"}
    for c in edge:
        assert (reasons[c.key], counted[c] == 40) in {("max-runs", True),
                                                      ("out-of-reach", False)}
    assert "out-of-reach" in {reasons[c.key] for c in edge}
    for base in (c for c in plan.cells if c.unloaded):
        assert counted[base] == max(counted[c] for c in plan.cells
                                    if not c.unloaded and c.baseline() == base)
    assert rec.progress[-1][0] == rec.progress[-1][1] == len(fake.measures())


@pytest.mark.parametrize(("tolerance", "reasons"), [
    (None, {"decided"}), (0.1, {"out-of-reach", "max-runs"})])
def test_until_decided_the_band_is_sized_from_the_baseline_seen(
        tmp_path: Path, tolerance: float | None, reasons: set[str]) -> None:
    """1.12× a 0.1 s start is 12 ms: less than a person notices (the band is ±25% there),
    so the cell is decided ("at most"), soon; against a band of ±10% given by hand it lies
    on the band's edge and is never decided."""
    plan = _plan(schedulers=["bfq"], policies=["background"], min_runs=8, max_runs=40,
                 tolerance=tolerance)
    store, run_id, _ = _bench(tmp_path, plan, Scripted(_noisy({"background": 1.12})))
    loaded = next(c for c in plan.cells if not c.unloaded)
    assert store.run(run_id).environment["stopping"][loaded.key] in reasons
    if tolerance is None:
        assert _counted(store, run_id)[loaded] < 20


def test_until_decided_the_undecided_cells_keep_the_seeded_order(tmp_path: Path) -> None:
    plan = _plan(min_runs=6, max_runs=30)
    fake = Scripted(_noisy({"default": 3.0, "background": 1.1}))
    store, run_id, _ = _bench(tmp_path, plan, fake)
    ran = [(c, t["round"]) for c, t in _stored(store, run_id)]
    in_order = [(s.cell, s.round) for s in plan.slots() if (s.cell, s.round) in set(ran)]
    assert ran == in_order


def test_a_baseline_stops_once_every_cell_judged_against_it_is_decided(
        tmp_path: Path) -> None:
    plan = _plan(schedulers=["bfq"], min_runs=8, max_runs=60)
    fake = Scripted(_noisy({"default": 3.0, "background": 0.5}))
    store, run_id, rec = _bench(tmp_path, plan, fake)
    counted = _counted(store, run_id)
    base = next(c for c in plan.cells if c.unloaded)
    assert counted[base] == max(counted[c] for c in plan.cells if not c.unloaded) < 60
    assert set(store.run(run_id).environment["stopping"].values()) == {"decided"}
    assert rec.events == []  # no budget ended a cell: nothing said of one


def test_max_time_stops_every_cell_at_a_block_start_and_says_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With a load per block of 4 trials, the time budget never cuts a block: every cell's
    trials are whole blocks, and its load stopped as often as it started."""
    clock = iter(range(0, 10_000, 1))
    monkeypatch.setattr("backburner.bench.stopping.time.monotonic", lambda: next(clock))
    plan = _plan(load_lifetime="cell", block=4, max_time_s=30.0, min_runs=40, max_runs=400)
    fake = Scripted(_noisy({"default": 1.1, "background": 1.1}))
    store, run_id, rec = _bench(tmp_path, plan, fake)
    counted = _counted(store, run_id)
    assert all(0 < counted[c] < 400 and counted[c] % 4 == 0 for c in plan.cells)
    assert set(store.run(run_id).environment["stopping"].values()) == {"max-time"}
    (said,) = rec.events  # the progress says the budget ended them, once, naming them
    assert said.startswith(f"the time budget (30s of trials, --max-time) ended "
                           f"{len(plan.cells)} cells before they were decided: ")
    assert all(c.label in said for c in plan.cells)
    starts = [c for c in fake.calls if c[0] == "start"]
    assert len(starts) == sum(1 for c in fake.calls if c[0] == "stop") and fake.running == set()


def test_a_resumed_sequential_run_ends_as_an_uninterrupted_one(tmp_path: Path) -> None:
    plan = _plan(min_runs=6, max_runs=30)
    whole, _ = tmp_path / "whole", tmp_path / "cut"
    whole.mkdir()
    store, run_id, _ = _bench(whole, plan, Scripted(_noisy({"default": 3.0,
                                                             "background": 1.1})))
    expected = _counted(store, run_id)
    cut_store, cut_id = _new_run(tmp_path, plan)
    times = _noisy({"default": 3.0, "background": 1.1})
    with pytest.raises(KeyboardInterrupt):
        runner.Bench(plan, cut_store, cut_id, Scripted(times, interrupt_at=40),
                     Recorder().report).run()
    runner.Bench(plan, cut_store, cut_id, Scripted(times), Recorder().report).run()
    assert _counted(cut_store, cut_id) == expected
    cut_store.close()
    job = runner.Resume(str(tmp_path / "r.db"))
    try:
        assert job.complete  # finished where it was decided: nothing left to resume
    finally:
        job.store.close()


def test_until_decided_a_cell_given_up_after_its_timeouts_stops(tmp_path: Path) -> None:
    """Its timeouts give it up (one aborted slot, as in a fixed-count run), and no more
    aborted slots pile up to max_runs; its baseline stops with the other cell."""
    plan = _plan(schedulers=["bfq"], min_runs=8, max_runs=60, abort_after=2)
    bad = next(c for c in plan.cells if c.policy == "background")
    clear = _noisy({"default": 3.0, "background": 3.0})
    fake = Scripted(lambda c: ("timeout", 0) if c == bad else clear(c))
    store, run_id, _ = _bench(tmp_path, plan, fake)
    statuses = [t["status"] for c, t in _stored(store, run_id) if c == bad]
    assert statuses == ["timeout", "timeout", "aborted"]
    reasons = store.run(run_id).environment["stopping"]
    assert reasons[bad.key] == "aborted" and max(_counted(store, run_id).values()) < 60
