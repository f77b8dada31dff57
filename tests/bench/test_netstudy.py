"""bench.netstudy, for real (root): a network study over the testbed's 1 Mbit/s link, as a
subprocess. Its trials are stored, `report` shows every cell with its verdict, SIGTERM or
SIGINT in the middle (with the background policy on the client's link) leaves no namespace,
qdisc, cgroup, process or journal, `--resume` finishes the run, and bad input is one line
and a distinct status before anything is built."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
from helpers import BB, TIMEOUT, WITHOUT_CGROUP2, bb, one_line_error

from backburner import system
from backburner.kernel import cgroups
from backburner.net import testbed

pytestmark = [pytest.mark.root, pytest.mark.timeout(240)]

#: three cells, three trials each, no warm-up: ~20 s on the development VM
ARGS = ["bench", "--net-link", "1mbit:0ms", "--load", "download:4", "--policy", "default",
        "--policy", "background", "-r", "3", "-w", "0", "--settle", "1", "--seed", "4"]


def _netns() -> set[str]:
    path = Path(system.net.NETNS_DIR)
    return {p.name for p in path.iterdir()} if path.is_dir() else set()


def _groups() -> set[str]:
    root = cgroups.unified_root()
    assert root is not None, "the test machines mount cgroup2"
    return {p.name for p in Path(root).glob("backburner-bench-net-*")}


def _db(db: Path, sql: str) -> list[tuple]:
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
        try:
            return conn.execute(sql).fetchall()
        finally:
            conn.close()
    except sqlite3.Error:
        return []


def _trials(db: Path) -> int:
    return int((_db(db, "SELECT count(*) FROM trials") or [(0,)])[0][0])


def _bed_of(db: Path) -> dict:
    """The testbed's facts as the run stored them once it was built ({} before)."""
    rows = _db(db, "SELECT environment FROM runs")
    return json.loads(rows[0][0]).get("device", {}) if rows else {}


def _inodes(names: list[str]) -> set[str]:
    return {f"net:[{st[1]}]" for n in names if (st := system.net.netns_identity(n))}


def _in_namespaces(inodes: set[str]) -> list[int]:
    """Processes in any of these network namespaces (which live while one is in them)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and os.readlink(entry / "ns" / "net") in inodes:
                found.append(int(entry.name))
        except OSError:
            pass
    return found


def _no_journal(state_dir: Path) -> bool:
    """No change was made, or every one was undone: each is journaled before it is made
    (the namespaces of the machine are not compared: other work may make its own)."""
    jdir = state_dir / "journal"
    return not jdir.is_dir() or list(jdir.iterdir()) == []


def _assert_nothing_left(state_dir: Path, groups: set[str], names: list[str],
                         inodes: set[str]) -> None:
    """The run's namespaces (and with them its links and qdiscs), its cgroup, any process
    in its namespaces and its journal are gone."""
    assert not set(names) & _netns()
    assert _groups() <= groups
    assert _in_namespaces(inodes) == []
    assert _no_journal(state_dir)


def _until(proc: subprocess.Popen, db: Path, what: str, predicate: object) -> None:
    deadline = time.monotonic() + 90
    while not predicate():  # type: ignore[operator]
        assert proc.poll() is None, proc.communicate()[1].decode()
        assert time.monotonic() < deadline, f"no {what} within 90 s"
        time.sleep(0.05)


def _paced(bed: dict) -> bool:
    """The background policy is on: its HTB classes are on the client's link."""
    ns = bed["namespaces"][2]
    return len(system.tc_classes(ns, f"{ns}0")) >= 3


def _interrupted(tmp_path: Path, sig: int, *extra: str) -> tuple[Path, dict, set[str]]:
    db = tmp_path / "net.db"
    with open(tmp_path / "bench.log", "wb") as log:
        proc = subprocess.Popen([*BB, *ARGS, *extra, "-o", str(db)], stdin=subprocess.DEVNULL,
                                stdout=log, stderr=log, start_new_session=True)
    try:
        _until(proc, db, "testbed", lambda: _bed_of(db).get("namespaces"))
        bed = _bed_of(db)
        inodes = _inodes(bed["namespaces"])
        assert len(inodes) == 3
        # a trial committed (a run with none is discarded), then a protected load running
        _until(proc, db, "trial", lambda: _trials(db) > 0)
        _until(proc, db, "background load", lambda: _paced(bed))
        time.sleep(0.5)  # its downloads under way
        if sig == signal.SIGINT:  # as ^C at a terminal: to the whole foreground group
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)
        proc.wait(TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    said = (tmp_path / "bench.log").read_text()
    assert proc.returncode == 128 + sig, said
    assert "system state restored" in said and "Traceback" not in said, said
    return db, bed, inodes


def test_sigterm_leaves_nothing_then_resume_stores_and_reports(tmp_path: Path,
                                                               state_dir: Path) -> None:
    before = _groups()
    db, bed, inodes = _interrupted(tmp_path, signal.SIGTERM)
    _assert_nothing_left(state_dir, before, bed["namespaces"], inodes)
    assert 0 < _trials(db) < 9

    r = bb("bench", "--resume", str(db), env={**os.environ, "COLUMNS": "250"}, timeout=200)
    assert r.returncode == 0, r.err
    bed2 = _bed_of(db)  # the resumed run's own testbed, gone too
    _assert_nothing_left(state_dir, before, bed2["namespaces"], set())
    assert bed2 == {**bed, "namespaces": bed2["namespaces"]}
    assert bed["name"] == "link:1mbit:0ms:300ms" and bed["rate_bit"] == 1_000_000

    rows = _db(db, "SELECT c.load, c.policy, c.device, c.scheduler, t.status, t.cold, "
                   "t.load_read_bps, t.wall_s, t.extra FROM trials t "
                   "JOIN cells c ON c.id = t.cell_id")
    assert len(rows) == 9 and {r[2:4] for r in rows} == {("link:1mbit:0ms:300ms", "fifo")}
    wrong = [(r[0], r[1], r[4], r[5], {k: v for k, v in json.loads(r[8]).items()
                                       if k in ("reason", "stderr_tail", "limit_s", "net")})
             for r in rows if not (r[4] == "ok" and r[5] == 0)]
    assert wrong == [], (wrong, _db(db, "SELECT min(started_at), max(ended_at) FROM trials"))
    for load, policy, *_, received, wall, extra in rows:
        x = json.loads(extra)
        assert x["net"]["fetch_s"] == wall and 0 < x["net"]["connect_s"] < wall
        if load == "none":
            assert "bulk" not in x
            # an idle link: the stopped downloads' queue was drained before this trial (a
            # full one costs a handshake about 240 ms), and little but the page crossed it:
            # its headers and ACKs, in a window of 90 ms, are a few kB/s (seen: up to 40)
            assert x["net"]["connect_s"] < 0.1 and received < 62_500, (x, received)
            continue
        assert received > 30_000  # the downloads' bytes crossed the link during the probe
        bulk = x["bulk"]
        # four downloads' own bytes over their run: a real share of the 1 Mbit/s link
        assert bulk["downloads"] == 4 and bulk["unit"] == "bytes"
        assert 0.2e6 < 8 * bulk["units"] / bulk["seconds"] < 1.05e6, bulk
        # the policy took effect: the downloads' ACKs went through its paced class
        assert (bulk.get("paced_packets", 0) > 10) == (policy == "background"), bulk

    text = r.out
    assert "net:page on link:1mbit:0ms:300ms" in text
    header = next(ln for ln in text.splitlines() if "Median" in ln)
    assert "Queue" in header and "BG kbit/s rx/tx" in header and "Scheduler" not in header
    table = {tuple(ln.split()[:3]): ln for ln in text.splitlines()
             if ln.startswith("fifo ")}
    assert set(table) == {("fifo", "none", "-"), ("fifo", "download:4", "default"),
                          ("fifo", "download:4", "background")}
    assert "unloaded baseline" in table["fifo", "none", "-"]
    # four unprotected downloads fill the link's 300 ms queue: the page is many times slower
    assert "slower than unloaded" in table["fifo", "download:4", "default"]
    assert "kbit/s, unprotected" in table["fifo", "download:4", "default"]
    assert "(warm)" not in text and "caches were not dropped" not in text
    assert "unloaded cell of the same link" in text


def test_an_upload_study_shapes_the_uplink_under_the_background_policy(
        tmp_path: Path, state_dir: Path) -> None:
    """One upload: its own speed is the bytes the server acknowledged; under the background
    policy the uplink is shaped just below the link's rate and the upload's packets go to
    their class behind everything else (the page's request and ACKs)."""
    db = tmp_path / "up.db"
    before = _groups()
    r = bb("bench", "--net-link", "1mbit:0ms", "--load", "upload:1", "--policy", "default",
           "--policy", "background", "-r", "2", "-w", "0", "--settle", "1", "--seed", "4",
           "-o", str(db), env={**os.environ, "COLUMNS": "250"}, timeout=200)
    assert r.returncode == 0, r.err
    rows = _db(db, "SELECT c.load, c.policy, t.status, t.extra FROM trials t "
                   "JOIN cells c ON c.id = t.cell_id WHERE c.load = 'upload:1'")
    assert len(rows) == 4 and all(r[2] == "ok" for r in rows), rows
    for _load, policy, _status, extra in rows:
        bulk = json.loads(extra)["bulk"]
        assert bulk["uploads"] == 1 and bulk["unit"] == "bytes"
        assert 0.2e6 < 8 * bulk["units"] / bulk["seconds"] < 1.05e6, bulk
        # the policy's proof: the upload's data went through its class, in full frames
        if policy == "background":
            assert bulk["upload_packets"] > 20, bulk
            assert bulk["upload_bytes"] / bulk["upload_packets"] > 1000, bulk
        else:
            assert "upload_packets" not in bulk, bulk
    assert "upload:1" in r.out and "kbit/s, unprotected" in r.out
    assert _groups() <= before and _no_journal(state_dir)


def test_sigint_in_the_middle_leaves_nothing(tmp_path: Path, state_dir: Path) -> None:
    """Here the downloads live through a block of a cell's trials, the policy with them."""
    before = _groups()
    _, bed, inodes = _interrupted(tmp_path, signal.SIGINT, "--load-lifetime", "cell",
                                  "--block", "3")
    _assert_nothing_left(state_dir, before, bed["namespaces"], inodes)


@pytest.mark.parametrize(("args", "status", "words"), [
    (["--net-link", "1mbit:0ms", "--scheduler", "bfq"], 64, "--scheduler is for a disk study"),
    (["--net-link", "1mbit:0ms", "--device", "testbed:1G"], 64, "--device is for a disk"),
    (["--net-link", "1mbit:0ms", "--cold"], 64, "--cold is for a disk study"),
    (["--net-link", "1mbit:0ms", "--probe-layout", "aged"], 64, "--probe-layout is for a"),
    (["--net-link", "fast"], 64, "unknown link spec 'fast'"),
    (["--net-link", "1mbit:0ms", "--load", "readers:1:seq"], 64, "unknown network load"),
    (["--net-link", "1mbit:0ms", "--probe", "/bin/true"], 64, "unknown network probe"),
    (["--probe", "net:page"], 64, "network probe: it needs --net-link"),
])
def test_bad_input_is_one_line_before_anything(tmp_path: Path, state_dir: Path,
                                               args: list[str], status: int,
                                               words: str) -> None:
    db = tmp_path / "r.db"
    r = bb("bench", *args, "-o", str(db))
    assert r.returncode == status, r.err
    assert words in one_line_error(r)
    assert not db.exists() and _no_journal(state_dir)


def test_a_delay_without_netem_is_69_before_anything(tmp_path: Path, state_dir: Path) -> None:
    if testbed.qdisc_known("netem"):
        pytest.skip("this kernel has netem")  # the VM guest's
    db = tmp_path / "r.db"
    r = bb("bench", "--net-link", "1mbit:40ms", "--load", "download:4", "-o", str(db))
    assert r.returncode == 69, r.err
    assert "link delay 40ms needs the netem qdisc" in one_line_error(r)
    assert not db.exists() and _no_journal(state_dir)


def test_where_only_cgroup_v1_is_mounted_the_policy_paces_by_net_cls(
        tmp_path: Path, state_dir: Path) -> None:
    """Without a cgroup2 mount (a mount namespace of the study's own) the downloads' group
    is a net_cls group and the policy holds back their ACKs by its class id: the paced
    class's packets are in every background trial; nothing is left, the mount the study
    made for the hierarchy included."""
    db = tmp_path / "v1.db"
    before = system.v1_groups("net_cls")[0]
    res = subprocess.run([*WITHOUT_CGROUP2, *BB, "bench", "--net-link", "1mbit:0ms",
                          "--load", "download:1", "--policy", "background", "-r", "2",
                          "-w", "0", "--settle", "1", "--seed", "4", "-o", str(db)],
                         capture_output=True, text=True, timeout=200, env=os.environ.copy())
    assert res.returncode == 0, res.stderr
    rows = _db(db, "SELECT c.policy, t.status, t.extra FROM trials t "
                   "JOIN cells c ON c.id = t.cell_id WHERE c.load = 'download:1'")
    assert len(rows) == 2 and all(r[1] == "ok" for r in rows), rows
    for _policy, _status, extra in rows:
        bulk = json.loads(extra)["bulk"]
        assert bulk["paced_packets"] > 20, bulk
    # the group went, and with the study's mount the hierarchy it made: net_cls is bound
    # where it was (to no hierarchy on this host)
    deadline = time.monotonic() + 5
    while system.v1_groups("net_cls")[0] != before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert system.v1_groups("net_cls")[0] == before
    work = state_dir / "work"
    assert not (work.is_dir() and [p for p in work.iterdir() if p.name.startswith("netcls-")])
    assert _no_journal(state_dir)

