"""The PostgreSQL backend against a real throwaway server: a password never accepted in the
address, an unreachable server (69) and refused credentials (77) named by host, one writer
per run across machines, and `report` reading a shared database."""

from __future__ import annotations

import pytest
from helpers import PgCluster, bb, make_db, one_line_error

from backburner.errors import AccessError, BusyError, UnavailableError, UsageError
from backburner.store import Store

pytestmark = pytest.mark.root


def test_a_password_in_the_address_is_refused() -> None:
    with pytest.raises(UsageError, match="PGPASSWORD or ~/.pgpass"):
        Store.open("postgresql://bench:s3cret@db.lab/backburner")


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
    b.lock_run(b.run(run_id))  # free once its writer is gone
    b.close()


def test_report_reads_a_shared_database(pg_url: str) -> None:
    store = Store.create(pg_url)
    make_db(None, store=store, trials=3, close=False)
    store.close()
    r = bb("report", pg_url)
    assert r.returncode == 0, r.err
    assert "mq-deadline" in r.out and "slower" in r.out
    r = bb("report", pg_url, "--export", "json")
    assert r.returncode == 0 and '"runs"' in r.out
