"""pytest hooks and fixtures; the helpers tests share live in helpers.py."""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import PgCluster, start_pg_cluster, stop_pg_cluster


def pytest_configure(config: pytest.Config) -> None:
    """Give SIGINT and SIGQUIT back their default meaning when the suite was started with
    them ignored (`nohup CMD &` from a non-interactive shell ignores them, and an ignored
    signal stays ignored across exec): the tests that send ^C to a backburner child would
    otherwise fail for the launcher's sake, 13 of them in one such run."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGQUIT) is signal.SIG_IGN:
        signal.signal(signal.SIGQUIT, signal.SIG_DFL)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """With BACKBURNER_TEST_TIMES=FILE, each test's phases and seconds are appended to FILE
    as they end (a killed or hung run keeps what it measured; --durations prints only at
    the end): the suite's own profile, for keeping it inside its time."""
    path = os.environ.get("BACKBURNER_TEST_TIMES")
    if path:
        with open(path, "a") as f:
            f.write(f"{report.duration:.3f}\t{report.when}\t{report.outcome}\t"
                    f"{report.nodeid}\n")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.geteuid() == 0:
        return  # root tests always run as root
    skip = pytest.mark.skip(reason="needs root")
    for item in items:
        if "root" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PgCluster]:
    """One throwaway PostgreSQL server for the whole session (root only: it runs as the
    postgres user)."""
    if os.geteuid() != 0:
        pytest.skip("needs root")
    cluster = start_pg_cluster()
    try:
        yield cluster
    finally:
        stop_pg_cluster(cluster)


@pytest.fixture
def pg_url(pg_cluster: PgCluster) -> str:
    """A fresh, empty database on the session's server."""
    return pg_cluster.new_database()


@pytest.fixture
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """BACKBURNER_STATE_DIR in a fresh tmp dir (inherited by subprocesses)."""
    path = tmp_path / "state"
    path.mkdir()
    monkeypatch.setenv("BACKBURNER_STATE_DIR", str(path))
    return path




@pytest.fixture
def cgroup2_group() -> Iterator[Path]:
    """An empty group of our own in the cgroup2 hierarchy (controllers or not: a socket
    belongs to the group of the task that made it either way), removed afterwards."""
    from backburner.kernel import cgroups

    root = cgroups.unified_root()
    assert root is not None, "the test machines mount cgroup2"
    path = Path(root, f"bbtest-{uuid.uuid4().hex[:8]}")
    path.mkdir()
    try:
        yield path
    finally:
        path.rmdir()
