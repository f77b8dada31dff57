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
    if path and not os.environ.get("PYTEST_XDIST_WORKER"):
        # under xdist each worker's reports reach the controller, which writes them: one
        # line each, appended whole, also beside the guest part's pytest writing the file
        with open(path, "a") as f:
            f.write(f"{report.duration:.3f}\t{report.when}\t{report.outcome}\t"
                    f"{report.nodeid}\n")


#: Files whose tests share what one xdist worker must hold alone: tests/net/'s checks compare
#: the groups at the cgroup v2 root that `run --net` and `govern net` make
#: (backburner-net-*, bbcheck-*), which every file here makes.
SHARED_UNITS = {"tests/net/": "net"}

#: Files `scripts/test --quick` leaves out (the full suite runs them): each took 10 s or more
#: in a full run (BACKBURNER_TEST_TIMES, docs/benchmarks.md), integration tests mostly.
SLOW_FILES = (
    "tests/vm/",
    "tests/bench/test_cli_bench.py", "tests/bench/test_display.py",
    "tests/bench/test_faults.py", "tests/bench/test_features.py",
    "tests/bench/test_machine.py", "tests/bench/test_netstudy.py",
    "tests/bench/test_pkgloads.py", "tests/bench/test_runner.py",
    "tests/bench/test_loads.py",
    "tests/extents/test_cli.py",
    "tests/govern/test_daemon.py", "tests/govern/test_pattern.py",
    "tests/net/",
    "tests/readahead/test_cli.py", "tests/readahead/test_ext4image.py",
    "tests/readahead/test_layout.py", "tests/readahead/test_record.py",
    "tests/readahead/test_replay.py",
    "tests/report/test_compare.py", "tests/report/test_data.py", "tests/report/test_plot.py",
    "tests/report/test_terminal.py",
    "tests/slowdisk/test_cli.py", "tests/slowdisk/test_device.py",
    "tests/stats/test_estimates.py", "tests/stats/test_simulation.py",
    "tests/status/test_sources.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Marks for scripts/test's parts (its header says what runs beside what): each test
    goes to an xdist worker with the rest of its file (or its shared unit), and `slow` on
    SLOW_FILES' tests; without root, the root tests are skipped."""
    root = Path(config.rootpath)
    for listed in (*SHARED_UNITS, *SLOW_FILES):
        if not (root / listed).exists():  # a file moved: its entry must move with it
            raise pytest.UsageError(f"tests/conftest.py names {listed}, which is gone")
    for item in items:
        where = Path(item.path).relative_to(root).as_posix()
        if not any(m.name == "xdist_group" for m in item.iter_markers()):
            unit = next((u for p, u in SHARED_UNITS.items() if where.startswith(p)), where)
            item.add_marker(pytest.mark.xdist_group(unit))
        if where.startswith(SLOW_FILES):
            item.add_marker(pytest.mark.slow)
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
    from backburner import cgroup2

    root = cgroup2.unified_root()
    assert root is not None, "the test machines mount cgroup2"
    path = Path(root, f"bbtest-{uuid.uuid4().hex[:8]}")
    path.mkdir()
    try:
        yield path
    finally:
        path.rmdir()
