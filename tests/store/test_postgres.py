"""The PostgreSQL backend against a real throwaway server: a password never accepted in the
address, an unreachable server (69) and refused credentials (77) named by host, one writer
per run across machines, and `report` reading a shared database."""

from __future__ import annotations

import multiprocessing
import sys

import pytest
from helpers import PgCluster, bb, make_db, one_line_error, wait_for

from backburner.base.errors import AccessError, BusyError, UnavailableError, UsageError
from backburner.store import SCHEMA_VERSION, Store

pytestmark = pytest.mark.root


def test_a_password_in_the_address_is_refused() -> None:
    with pytest.raises(UsageError, match="PGPASSWORD, ~/.pgpass"):
        Store.open("postgresql://bench:s3cret@db.lab/backburner")


def test_without_psycopg_the_hint_names_debians_package(monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg raises ImportError
    with pytest.raises(UnavailableError) as err:
        Store.open("postgresql://bench@db.lab/backburner", readonly=True)
    assert err.value.exit_status == 69
    assert "apt install python3-psycopg" in str(err.value), str(err.value)


def test_an_unreachable_server_is_69_naming_the_host(pg_cluster: PgCluster) -> None:
    url = f"postgresql://postgres@/x?host={pg_cluster.socket_dir}&port=1"
    with pytest.raises(UnavailableError) as err:
        Store.open(url, readonly=True)
    assert err.value.exit_status == 69 and pg_cluster.socket_dir in str(err.value)
    r = bb("report", "postgresql://bench@nonexistent.invalid/backburner")
    assert r.returncode == 69, r.err
    line = one_line_error(r)
    assert "nonexistent.invalid" in line and "unreachable" in line


def test_refused_credentials_are_77(pg_cluster: PgCluster) -> None:
    pg_cluster.psql("DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = "
                    "'secured') THEN CREATE ROLE secured LOGIN PASSWORD 'x'; END IF; END $$")
    url = pg_cluster.url("postgres", user="secured")
    with pytest.raises(AccessError) as err:
        Store.open(url, readonly=True)
    assert err.value.exit_status == 77 and "access denied" in str(err.value)
    assert "x'" not in str(err.value)


def test_one_writer_per_run(pg_url: str) -> None:
    a = Store.create(pg_url)
    run_id = a.add_run("c", {}, 0, {}, "v")  # holds the run's lock while open
    b = Store.open(pg_url)
    with pytest.raises(BusyError, match="being written by another"):
        b.lock_run(b.run(run_id))
    other = b.add_run("c", {}, 0, {}, "v")  # another run in the same database: fine
    assert other != run_id
    a.close()

    def free() -> bool:  # once its writer is gone: the server ends a's session (and its
        try:             # lock) a moment after the client hangs up, later on a busy machine
            b.lock_run(b.run(run_id))
        except BusyError:
            return False
        return True

    wait_for(free, what="the run's lock to be freed with its writer's session")
    b.close()


def test_report_reads_a_shared_database(pg_url: str) -> None:
    store = Store.create(pg_url)
    make_db(None, store=store, trials=3, close=False)
    store.close()
    r = bb("report", pg_url)
    assert r.returncode == 0, r.err
    assert "mq-deadline" in r.out and "slower" in r.out
    r = bb("report", pg_url, "--format", "json")
    assert r.returncode == 0 and '"runs"' in r.out


# --- many machines starting at once against an empty (or old) database -----------------------

def _first_use(url: str, n: int, barrier: object, results: object, opener: str) -> None:
    """One lab machine: opens the shared database the moment the others do, then writes."""
    from backburner.store.cell import Cell

    try:
        barrier.wait(60)  # type: ignore[attr-defined]
        s = Store.create(url) if opener == "create" else Store.open(url)
        run = s.add_run(f"machine {n}", {}, n, {}, "v")
        cell = s.add_cell(run, Cell("p", f"machine-{n}", "bfq", "none", "-"))
        for i in range(5):
            s.add_trial(run, cell, round=i, warmup=0, status="ok", cold=1, wall_s=0.5,
                        started_at=1.0, ended_at=2.0)
        s.finish_run(run)
        s.close()
        results.put((n, "ok"))  # type: ignore[attr-defined]
    except BaseException as err:  # noqa: BLE001 - the parent reports what went wrong
        results.put((n, f"{type(err).__name__}: {err}"))  # type: ignore[attr-defined]


def _all_at_once(url: str, opener: str, n: int = 8) -> dict[int, str]:
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(n), ctx.Queue()
    procs = [ctx.Process(target=_first_use, args=(url, i, barrier, results, opener))
             for i in range(n)]
    for p in procs:
        p.start()
    said = dict(results.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(60)
    return said


def _check_stored_once(url: str, n: int, runs_before: int = 0) -> None:
    s = Store.open(url, readonly=True)
    assert s.schema_version == SCHEMA_VERSION
    assert len(s.runs()) == runs_before + n
    trials = s.trials(include_warmup=True)
    assert len({(t["run_id"], t["round"]) for t in trials}) == len(trials) == 5 * n
    s.close()


def test_machines_starting_at_once_on_an_empty_database(pg_cluster: PgCluster) -> None:
    """`bench --output postgresql://…` on eight machines at the same moment: the first
    creates the schema, the others wait for it and use it; nobody fails."""
    url = pg_cluster.new_database()
    said = _all_at_once(url, "create")
    assert set(said.values()) == {"ok"}, said
    _check_stored_once(url, 8)
    dbname = url.split("@/", 1)[1].split("?")[0]
    meta = pg_cluster.psql("SELECT key, value FROM meta ORDER BY key", dbname).split()
    assert meta == ["application|backburner", f"schema_version|{SCHEMA_VERSION}"]


def _v1_database(pg_cluster: PgCluster) -> str:
    """A shared database as backburner 0.1 left it (schema version 1, one run in it)."""
    url = pg_cluster.new_database()
    s = Store.create(url)
    s.add_run("old", {}, 3, {}, "0.1.0")
    s.close()
    dbname = url.split("@/", 1)[1].split("?")[0]
    pg_cluster.psql("DROP INDEX trials_by_cell; DROP INDEX cells_by_run; "
                    "ALTER TABLE runs DROP COLUMN uuid, DROP COLUMN machine_id, "
                    "DROP COLUMN hostname; ALTER TABLE cells DROP COLUMN prepare; "
                    "UPDATE meta SET value = '1' WHERE key = 'schema_version'", dbname)
    assert Store.open(url, readonly=True).schema_version == 1
    return url


@pytest.mark.parametrize("opener", ["create", "open"])
def test_machines_migrating_an_old_database_at_once(pg_cluster: PgCluster, opener: str
                                                    ) -> None:
    """Eight writers of a newer version meet a version-1 database: it is migrated once."""
    url = _v1_database(pg_cluster)
    said = _all_at_once(url, opener)
    assert set(said.values()) == {"ok"}, said
    _check_stored_once(url, 8, runs_before=1)
    s = Store.open(url, readonly=True)
    assert len({r.uuid for r in s.runs()}) == 9
    s.close()
