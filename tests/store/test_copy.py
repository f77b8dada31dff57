"""`store copy`: an offline run pushed into another database, idempotently — a run is
recognised by its uuid, a trial by (cell, round); copying twice adds nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import BB, PgCluster, bb, make_db, one_line_error

from backburner import report
from backburner.base.errors import DataError
from backburner.store import Store


def _counts(target: str) -> tuple[int, int]:
    s = Store.open(target, readonly=True)
    try:
        return len(s.runs()), len(s.trials(include_warmup=True))
    finally:
        s.close()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.root)])
def destination(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "lab.db")
    return request.getfixturevalue("pg_url")


def test_copy_is_idempotent(tmp_path: Path, destination: str) -> None:
    src = str(tmp_path / "offline.db")
    make_db(src, trials=3)
    runs, trials = _counts(src)
    r = bb("store", "copy", src, destination)
    assert r.returncode == 0, r.err
    assert "1 run(s) added" in r.out and f"{trials} trial(s) added" in r.out
    assert _counts(destination) == (runs, trials)
    again = bb("store", "copy", src, destination)
    assert again.returncode == 0, again.err
    assert "already there, nothing to add" in again.out and "0 trial(s) added" in again.out
    assert _counts(destination) == (runs, trials)
    a = Store.open(src, readonly=True)
    b = Store.open(destination, readonly=True)
    (ra,), (rb,) = a.runs(), b.runs()
    assert (ra.uuid, ra.machine_id, ra.hostname, ra.started_at, ra.finished_at, ra.config) == (
        rb.uuid, rb.machine_id, rb.hostname, rb.started_at, rb.finished_at, rb.config)
    strip = lambda ts: sorted(  # noqa: E731
        (t["round"], t["wall_s"], t["status"], t["extra"]["limit_s"]) for t in ts)
    assert strip(a.trials(include_warmup=True)) == strip(b.trials(include_warmup=True))
    a.close()
    b.close()


def test_a_run_copied_unfinished_is_completed_later(tmp_path: Path) -> None:
    src, dst = str(tmp_path / "offline.db"), str(tmp_path / "lab.db")
    store = make_db(src, trials=3, finish=False, close=False, rounds={
        ("mq-deadline", "writers:4:seq", "default"): 1})
    r = bb("store", "copy", src, dst)
    assert r.returncode == 0, r.err
    _, before = _counts(dst)
    run_id = store.runs()[0].id
    cell = next(c for c in store.cells() if c.cell.load == "writers:4:seq"
                and c.cell.policy == "default" and c.cell.scheduler == "mq-deadline")
    for rnd in (2, 3):  # the rest of the run, finished offline
        store.add_trial(run_id, cell.id, round=rnd, warmup=0, status="ok", cold=1, wall_s=3.4,
                        started_at=1.8e9, ended_at=1.8e9 + 4)
    store.finish_run(run_id)
    store.close()
    r = bb("store", "copy", src, dst)
    assert r.returncode == 0, r.err
    assert "1 completed" in r.out and "2 trial(s) added" in r.out
    assert _counts(dst)[1] == before + 2
    assert Store.open(dst, readonly=True).runs()[0].finished_at is not None



def test_an_unreachable_server_is_one_line_saying_what_can_be_done(tmp_path: Path) -> None:
    """A copy has no --fallback: it is run again once the server is back (and adds only what
    is missing); `report` only has the address to check."""
    src = str(tmp_path / "offline.db")
    make_db(src, trials=1)
    url = "postgresql://bench@/lab?host=/nonexistent-socket-dir&port=1"
    for argv in (["store", "copy", src, url], ["store", "copy", url, str(tmp_path / "x.db")]):
        r = bb(*argv)
        assert r.returncode == 69, r.err
        line = one_line_error(r)
        assert "unreachable" in line and "run the same copy again" in line
        assert "--fallback" not in line
    assert not (tmp_path / "x.db").exists()
    r = bb("report", url)
    assert r.returncode == 69 and "--fallback" not in one_line_error(r)


# --- a copy killed at any moment ----------------------------------------------------------

#: `backburner` with a SIGKILL at its Nth SQL statement or commit ($BB_KILL_AT): the real
#: command in a real process, killed at a point chosen exactly rather than by timing. It
#: prints how many statements it ran when it is not killed.
KILLED_AT = r'''
import atexit, os, signal, sys
import sqlite3

at, seen = int(os.environ.get("BB_KILL_AT", "0")), 0

def tick():
    global seen
    seen += 1
    if seen == at:
        os.kill(os.getpid(), signal.SIGKILL)

class Killing(sqlite3.Connection):
    def execute(self, *a, **k):
        tick()
        return super().execute(*a, **k)

    def commit(self):
        tick()
        return super().commit()

connect = sqlite3.connect
sqlite3.connect = lambda *a, **k: connect(*a, **{"factory": Killing, **k})
try:
    import psycopg
    execute = psycopg.Connection.execute
    def pg_execute(self, *a, **k):
        tick()
        return execute(self, *a, **k)
    psycopg.Connection.execute = pg_execute
except ImportError:
    pass
atexit.register(lambda: print(f"statements: {seen}", file=sys.stderr))
from backburner.cli import main
sys.exit(main(sys.argv[1:]))
'''

TWO_CELLS = {("bfq", "none", "-"): 0.3, ("bfq", "readers:1:seq", "default"): 3.0}


def _two_runs(path: str) -> None:
    """A small source of two finished runs (a copy has a first run and then another)."""
    store = make_db(path, trials=1, medians=TWO_CELLS, close=False)
    make_db(path, trials=1, medians=TWO_CELLS, store=store, seed=2)


def _killed_copy(src: str, dst: str, at: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", KILLED_AT, "store", "copy", src, dst],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "BB_KILL_AT": str(at)})


def _content(target: str) -> tuple[set[tuple], set[tuple]]:
    """Runs (identity and finish) and trials (cell, round, values) of a database."""
    s = Store.open(target, readonly=True)
    try:
        keys = {c.id: c.key for c in s.cells()}
        uuids = {r.id: r.uuid for r in s.runs()}
        runs = {(r.uuid, r.started_at, r.finished_at, r.seed) for r in s.runs()}
        trials = {(uuids[t["run_id"]], keys[t["cell_id"]], t["round"], t["wall_s"],
                   t["status"]) for t in s.trials(include_warmup=True)}
        return runs, trials
    finally:
        s.close()


def _check_after_kill(src: str, dst: str) -> None:
    """What a killed copy leaves: nothing, or a result database holding part of the
    source (that `report` reads, once it holds a counted trial)."""
    if not os.path.exists(dst):
        return
    runs, trials = _content(dst)
    source_runs, source_trials = _content(src)
    assert {r[0] for r in runs} <= {r[0] for r in source_runs}
    assert trials <= source_trials
    try:
        report.load(dst)
    except DataError as err:
        assert "has no counted trials yet" in str(err), err


def _check_rerun(src: str, dst: str, tmp: Path, before: set[str]) -> None:
    """A second copy completes the first: the source's runs and trials, nothing else, and
    no file left beside the destination."""
    again = bb("store", "copy", src, dst)
    assert again.returncode == 0, again.err
    assert _content(dst) == _content(src)
    assert sorted(os.listdir(tmp)) == sorted(before | {os.path.basename(dst)})


def test_a_copy_killed_at_any_statement_leaves_a_database_a_rerun_completes(
        tmp_path: Path) -> None:
    """SIGKILL at every statement of creating the new file and the first run, then at every
    third: the destination is absent or a result database, and a rerun completes it."""
    src = str(tmp_path / "offline.db")
    _two_runs(src)
    full = _killed_copy(src, str(tmp_path / "probe.db"), 0)
    assert full.returncode == 0, full.stderr
    total = int(full.stderr.rsplit("statements: ", 1)[1])
    os.unlink(tmp_path / "probe.db")
    before = set(os.listdir(tmp_path))
    for at in sorted({*range(1, 25), *range(25, total, 3)}):
        dst = str(tmp_path / f"lab-{at}.db")
        killed = _killed_copy(src, dst, at)
        assert killed.returncode == -signal.SIGKILL, (at, killed.stderr)
        _check_after_kill(src, dst)
        _check_rerun(src, dst, tmp_path, before)
        before.add(os.path.basename(dst))


def test_report_reads_what_a_killed_copy_left(tmp_path: Path) -> None:
    """The real `report` on a copy killed after its first run, and on one killed while
    creating the file (absent: 66, or read)."""
    src = str(tmp_path / "offline.db")
    _two_runs(src)
    probe = _killed_copy(src, str(tmp_path / "probe.db"), 0)
    total = int(probe.stderr.rsplit("statements: ", 1)[1])
    for at, wanted in ((3, {0, 66}), (total // 2, {0})):
        dst = str(tmp_path / f"lab-{at}.db")
        assert _killed_copy(src, dst, at).returncode == -signal.SIGKILL
        r = bb("report", dst)
        assert r.returncode in wanted, (at, r.err)
        if r.returncode:
            assert "no such result database" in one_line_error(r)


@pytest.mark.root
def test_a_copy_into_postgres_killed_at_any_statement_is_completed_by_a_rerun(
        tmp_path: Path, pg_cluster: PgCluster) -> None:
    """A shared destination: the schema is made in one transaction the server rolls back
    when its client dies, every trial is its own; a rerun completes what is there."""
    src = str(tmp_path / "offline.db")
    _two_runs(src)
    full = _killed_copy(src, pg_cluster.new_database(), 0)
    assert full.returncode == 0, full.stderr
    total = int(full.stderr.rsplit("statements: ", 1)[1])
    for at in sorted({*range(1, 12), *range(12, total, 7)}):
        dst = pg_cluster.new_database()
        killed = _killed_copy(src, dst, at)
        assert killed.returncode == -signal.SIGKILL, (at, killed.stderr)
        again = bb("store", "copy", src, dst)
        assert again.returncode == 0, (at, again.err)
        assert _content(dst) == _content(src)


def test_a_copy_killed_from_outside_mid_copy_is_completed_by_a_rerun(tmp_path: Path) -> None:
    """A real SIGKILL from another process, once the first run is copied (its line is
    printed) and while the next ones are."""
    src = str(tmp_path / "offline.db")
    store = make_db(src, trials=40, close=False)
    for seed in (2, 3):
        make_db(src, trials=40, store=store, seed=seed, close=seed == 3)
    dst = str(tmp_path / "lab.db")
    with subprocess.Popen([*BB, "store", "copy", src, dst], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"}) as proc:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        proc.kill()
        proc.communicate()
    assert "added with" in first and proc.returncode == -signal.SIGKILL
    _check_after_kill(src, dst)
    assert len(_content(dst)[0]) < 3, "the copy ended before it was killed"
    _check_rerun(src, dst, tmp_path, {os.path.basename(src)})
