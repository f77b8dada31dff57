"""Database addresses in messages: a password (in the userinfo, however mistyped, or in the
query) is never shown; libpq's reasons keep their words but not the address they quote."""

from __future__ import annotations

from pathlib import Path

import pytest

from backburner.base.errors import UsageError
from backburner.store import Store
from backburner.store.address import libpq_reason, looks_like_url, shown

#: (address as typed, as shown): the password masked the way psql shows it
SHOWN = [
    ("results.db", "results.db"),
    ("user:pw@host.db", "user:pw@host.db"),  # a file name stays as given
    ("postgresql://bench@db.lab/backburner", "postgresql://bench@db.lab/backburner"),
    ("postgresql://bench:s3cret@db.lab:5432/bb", "postgresql://bench:***@db.lab:5432/bb"),
    ("postgres://u:s3cret@[::1/db", "postgres://u:***@[::1/db"),
    ("postgresql://u:pa/ss@h/db", "postgresql://u:***@h/db"),  # libpq: host u, port pa
    ("postgresql://u:p@ss@h/db", "postgresql://u:***@h/db"),
    ("postgresql://u:pa?ss@h/db?password=x", "postgresql://u:pa?ss@h/db?password=***"),
    ("postgresql://u@h/db?sslmode=require&PassWord=x", "postgresql://u@h/db?sslmode=require"
     "&PassWord=***"),
    ("postgresql://u@h/db?sslpassword=k3y", "postgresql://u@h/db?sslpassword=***"),
    ("postgresql:/u:s3cret@h/db", "postgresql:/u:***@h/db"),
    ("postgresql://", "postgresql://"),
    ("postgresql://:s3cret@h", "postgresql://:***@h"),
]


@pytest.mark.parametrize(("typed", "want"), SHOWN)
def test_shown_masks_every_password(typed: str, want: str) -> None:
    assert shown(typed) == want


def test_libpq_reasons_lose_the_address_they_quote() -> None:
    url = "postgresql://u:s3cret@[::1/db"
    assert libpq_reason('end of string reached when looking for matching "]" in IPv6 host '
                        f'address in URI: "{url}"', url) == (
        'end of string reached when looking for matching "]" in IPv6 host address in URI')
    assert libpq_reason('invalid percent-encoded token: "pa%zzss"',
                        "postgresql://u:pa%zzss@h/db") == "invalid percent-encoded token"
    # a password with a '/' is a host and a port to libpq: its pieces come back unquoted
    assert libpq_reason('connection to server at "u" (10.0.0.1), port 1234 failed: refused',
                        "postgresql://u:1234/x@h/db") == (
        'connection to server at "u" (10.0.0.1), port *** failed: refused')
    assert libpq_reason("connection failed: no route to host\nmore", "x.db") == (
        "no route to host")


@pytest.mark.parametrize("url", [
    "postgresql://u:s3cret@[::1/db", "postgresql://u:s3cret@h/db?x=%zz",
    "postgresql://u:pa%zzs3cret@h/db", "postgresql://u@h/db?password=s3cret&broken",
    "postgresql:/u:s3cret@h/db", "postgres:u:s3cret@h"])
def test_an_address_that_does_not_parse_is_shown_without_its_password(url: str) -> None:
    with pytest.raises(UsageError) as err:
        Store.open(url, readonly=True)
    assert "s3cret" not in str(err.value) and "\n" not in str(err.value)
    assert err.value.exit_status == 64


@pytest.mark.parametrize("url", ["postgresql://u:s3cret@h/db",
                                 "postgresql://u@h/db?sslpassword=s3cret"])
def test_a_password_libpq_sees_is_refused_without_showing_it(url: str) -> None:
    with pytest.raises(UsageError, match="PGPASSWORD, ~/.pgpass") as err:
        Store.create(url)
    assert "s3cret" not in str(err.value)


def test_dash_and_mistyped_addresses_are_never_file_names(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert looks_like_url("postgresql://h/db") and not looks_like_url("./postgresql:x")
    monkeypatch.chdir(tmp_path)
    for target in ("-", "postgresql:/h/db", "postgres:h"):
        with pytest.raises(UsageError):
            Store.create(target)
    assert list(tmp_path.iterdir()) == []


def test_a_password_libpq_would_take_for_a_port_is_refused_too() -> None:
    """libpq ends the user name at a '/': in u:4321/s3cret@h it would connect to host u,
    port 4321, and every message naming the database would show the rest."""
    with pytest.raises(UsageError, match="looks like it holds a password") as err:
        Store.open("postgresql://u:4321/s3cret@/db?host=/nonexistent-socket-dir")
    assert "s3cret" not in str(err.value) and "4321" not in str(err.value)


@pytest.mark.parametrize("url", ["postgresql://bench:s3cret@db.lab/bb",
                                 "postgresql://u:s3cret@[::1/db", "postgresql:/u:s3cret@h"])
def test_bench_output_refuses_the_address_without_showing_the_password(url: str) -> None:
    """What `bench --output` checks before it prints the run's first line."""
    from backburner.bench import runner

    with pytest.raises(UsageError) as err:
        runner.prepare_output(url)
    assert "s3cret" not in str(err.value)
