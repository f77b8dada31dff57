"""pytest hooks and fixtures; the helpers tests share live in helpers.py."""

from __future__ import annotations

import os
import re
import shutil
import signal
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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
    # an xdist worker starts with COLUMNS=80 and LINES=24 where the session had neither, and
    # the text commands honour COLUMNS: the worker takes the session's terminal as it was
    terminal = getattr(config, "workerinput", {}).get("bb_terminal")
    if terminal is not None:
        for name, value in terminal.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """What each xdist worker is handed: the session's COLUMNS and LINES (or their absence)."""
    node.workerinput["bb_terminal"] = {n: os.environ.get(n) for n in ("COLUMNS", "LINES")}


def _cpu_s() -> float:
    """CPU seconds of this process, of the children it (or they) reaped, and of its live
    children themselves (a shared guest's QEMU runs for many tests before it is reaped)."""
    t = os.times()
    live = 0
    for task in Path("/proc/self/task").iterdir():
        try:
            pids = (task / "children").read_text().split()
        except OSError:
            continue
        for pid in pids:
            try:  # utime and stime, after the ")" that ends the command's name
                fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
            except OSError:
                continue
            live += int(fields[11]) + int(fields[12])
    return (t.user + t.system + t.children_user + t.children_system
            + live / os.sysconf("SC_CLK_TCK"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Each phase's CPU seconds in its report (`cpu_s`), from the end of the phase before:
    the suite is bound by the CPU of two cores, and a phase's wall time does not say what
    it cost (a sleep costs none; QEMU's is counted when its guest is reaped)."""
    outcome = yield
    now = _cpu_s()
    outcome.get_result().user_properties.append(("cpu_s", now - item.stash.get(_CPU, now)))
    item.stash[_CPU] = now


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    item.stash[_CPU] = _cpu_s()  # before its fixtures are set up


_CPU = pytest.StashKey[float]()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """With BACKBURNER_TEST_TIMES=FILE, each test's phases, seconds, outcome, nodeid and CPU
    seconds are appended to FILE as they end (a killed or hung run keeps what it measured;
    --durations prints only at the end): the suite's own profile, for keeping it inside
    its time."""
    path = os.environ.get("BACKBURNER_TEST_TIMES")
    if path and not os.environ.get("PYTEST_XDIST_WORKER"):
        # under xdist each worker's reports reach the controller, which writes them: one
        # line each, appended whole, also beside the guest part's pytest writing the file
        cpu = dict(report.user_properties).get("cpu_s")
        with open(path, "a") as f:
            nodeid = re.sub(r"@[^\[\]@]*$", "", report.nodeid)  # xdist's "@group" suffix
            f.write(f"{report.duration:.3f}\t{report.when}\t{report.outcome}\t{nodeid}\t"
                    f"{'' if cpu is None else format(cpu, '.3f')}\n")


#: Tests that one xdist worker runs as one unit: tests/net/'s checks compare the groups at
#: the cgroup v2 root that `run --net` and `govern net` make (backburner-net-*, bbcheck-*),
#: which every file there makes, and so does test_fuzz (`run --net background --net-dev
#: lo`, `govern net --dev lo`); test_netcls compares the cgroup v1 mounts, which bench's
#: network study makes where it attributes by net_cls. Any other file is a unit of its own
#: (its module fixtures are built once).
SHARED_UNITS = {"net": ("tests/net/", "tests/test_fuzz.py", "tests/bench/test_netstudy.py")}

#: The files that take longest, heaviest first (seconds of a full run on the 2-core
#: development VM, BACKBURNER_TEST_TIMES, docs/measurements/overhead.md "The test suite"):
#: xdist starts them first, so that no long one is left to run alone at the end, and
#: `scripts/test --quick` leaves them out (marked `slow`; the full suite runs them).
HEAVY = (
    "tests/net/",
    "tests/test_fuzz.py",
    "tests/bench/test_features.py",
    "tests/bench/test_netstudy.py",
    "tests/store/test_copy.py",
    "tests/test_cli.py",
    "tests/trace/test_cli_trace.py",
    "tests/test_debian.py",
    "tests/test_packaging.py",
    "tests/bench/test_pkgloads.py",
    "tests/extents/test_cli.py",
    "tests/govern/test_daemon.py",
    "tests/bench/test_faults.py",
    "tests/test_html.py",
    "tests/bench/test_machine.py",
    "tests/bench/test_cli_bench.py",
    "tests/bench/test_display.py",
    "tests/readahead/test_replay.py",
    "tests/readahead/test_cli.py",
    "tests/report/test_plot.py",
    "tests/stats/test_simulation.py",
    "tests/readahead/test_record.py",
    "tests/report/test_compare.py",
    "tests/report/test_terminal.py",
    "tests/slowdisk/test_device.py",
    "tests/report/test_data.py",
    "tests/bench/test_loads.py",
    "tests/govern/test_pattern.py",
    "tests/readahead/test_ext4image.py",
    "tests/readahead/test_layout.py",
    "tests/slowdisk/test_cli.py",
    "tests/stats/test_estimates.py",
    "tests/status/test_sources.py",
    "tests/bench/test_runner.py",
    # scripts/test runs tests/vm in a pytest of its own, on workers of its own
    "tests/vm/test_guest_readahead_boot.py",
    "tests/vm/test_guest_apply.py",
    "tests/vm/test_guest_deb.py",
    "tests/vm/test_guest_levers.py",
    "tests/vm/test_guest_cgroup2.py",
    "tests/vm/test_guest_office_levers.py",
    "tests/vm/test_guest_netv1.py",
    "tests/vm/test_guest_dm.py",
    "tests/vm/test_guest_net.py",
    "tests/vm/test_guest_netstudy.py",
    "tests/vm/test_guest_netboot.py",
    "tests/vm/test_guest_netsd.py",
    "tests/vm/test_guest_run.py",
    "tests/vm/test_guest_govern.py",
    "tests/vm/test_guest_slices.py",
    "tests/vm/test_guest_systemd_run.py",
    "tests/vm/",
    # last: its hang check kills the shared guest (a check after it would boot another)
    "tests/vm/test_rig.py",
)


def _rank(where: str) -> int:
    """A file's own entry, else the first directory that holds it."""
    if where in HEAVY:
        return HEAVY.index(where)
    return next((i for i, p in enumerate(HEAVY) if where.startswith(p)), len(HEAVY))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadfile` with SHARED_UNITS: each unit goes whole to one worker, the units in
    the order collected (heaviest first, see below), not by how many tests they hold."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class Units(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return next((u for u, paths in SHARED_UNITS.items() if nodeid.startswith(paths)),
                        super()._split_scope(nodeid))

    config.option.loadscopereorder = False
    return Units(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`slow` on HEAVY's tests; on an xdist worker, or in a process that shares the guest
    checks by claims (tests/vm/conftest.py), HEAVY's files first (each collects, in the same
    order); without root, the root tests are skipped."""
    root = Path(config.rootpath)
    for listed in HEAVY:
        if not (root / listed).exists():  # a file moved: its entry must move with it
            raise pytest.UsageError(f"tests/conftest.py names {listed}, which is gone")
    for item in items:
        if _rank(Path(item.path).relative_to(root).as_posix()) < len(HEAVY):
            item.add_marker(pytest.mark.slow)
    if os.environ.get("PYTEST_XDIST_WORKER") or os.environ.get("BACKBURNER_TEST_CLAIMS"):
        items.sort(key=lambda item: _rank(Path(item.path).relative_to(root).as_posix()))
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
def outside_tmp() -> Iterator[Path]:
    """A fresh private directory of root's that is not under /tmp (in /run), for what
    cannot lie there: a layer of an overlay laid over /tmp. Removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix="backburner-test-", dir="/run"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


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
