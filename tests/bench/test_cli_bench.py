"""`backburner bench` on bad input, as a real subprocess: the right exit status, one line on
stderr (no traceback), and nothing left behind (no database, no testbed, no journal)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import rich
from helpers import TIMEOUT, Result, bb

import backburner
from backburner import system
from backburner.store import Store

pytestmark = pytest.mark.root

BUSY_WARNING = "other heavy IO is running on"  # a warning the shared machine may add
HEADER = re.compile(r"backburner: bench: \d+ cells")  # the run's header line, before any trial


def error_line(r: Result) -> str:
    """stderr is one `backburner: ...` line, no traceback. The run's header line and a warning
    about other heavy IO on the machine (not ours to control) may precede it."""
    assert "Traceback" not in r.err, r.err
    lines = r.err.strip().splitlines()
    assert all(ln.startswith("backburner: ") for ln in lines), r.err
    lines = [ln for ln in lines if BUSY_WARNING not in ln and not HEADER.match(ln)]
    assert len(lines) == 1, r.err
    return lines[0]


def _left_behind(pid: int, state_dir: Path, db: Path) -> list[str]:
    """Testbeds, loop devices, the database and journals a failed bench left behind."""
    work = state_dir / "work"
    found = [str(p) for p in work.iterdir()] if work.is_dir() else []
    found += [dev for p in found for dev in system.loops_backed_by(os.path.join(p, "disk.img"))]
    found += [str(p) for p in db.parent.glob(db.name + "*")]
    jdir = state_dir / "journal"
    if jdir.is_dir():
        found += [str(p) for p in jdir.iterdir()]
    return found


BASE = ["bench", "--probe", "/bin/true", "--device", "testbed:256M", "--trials", "1"]


def test_unknown_scheduler_64(tmp_path: Path, state_dir: Path) -> None:
    db = tmp_path / "r.db"
    r = bb(*BASE, "--scheduler", "cfq", "-o", str(db), timeout=120)
    assert r.returncode == 64, r.err
    line = error_line(r)
    assert "'cfq'" in line and "bfq" in line  # names it and says what is offered
    assert _left_behind(r.pid, state_dir, db) == []  # the testbed was made, and undone


def test_missing_probe_127(tmp_path: Path, state_dir: Path) -> None:
    db = tmp_path / "r.db"
    r = bb(*BASE, "--probe", "no-such-probe-xyz --flag", "-o", str(db))
    assert r.returncode == 127, r.err
    assert "no-such-probe-xyz" in error_line(r)
    assert _left_behind(r.pid, state_dir, db) == []


@pytest.mark.parametrize(("spec", "message"), [
    ("readers:x:seq", "does not parse"), ("writers:2:zigzag", "does not parse"),
    ("cmd:", "needs a command"), ("readers:10", "does not parse")])
def test_bad_load_64(tmp_path: Path, state_dir: Path, spec: str, message: str) -> None:
    db = tmp_path / "r.db"
    r = bb(*BASE, "--load", spec, "-o", str(db))
    assert r.returncode == 64, r.err
    assert message in error_line(r)
    assert _left_behind(r.pid, state_dir, db) == []


@pytest.mark.parametrize("args", [["--policy", "bogus"], ["--trials", "0"],
                                  ["--device", "testbed:lots"], ["--trials", "two"],
                                  ["--device", "testbed:1M"], ["--device", "slowdisk:nope:1G"],
                                  ["--timeout", "-1"], ["--settle", "-5"],
                                  ["--abort-factor", "0"], ["--max-time", "soon"],
                                  ["--trials", "5", "--max-runs", "9"],
                                  ["--min-runs", "9", "-M", "5"], ["--tolerance", "2"]])
def test_other_bad_options_64(tmp_path: Path, state_dir: Path, args: list[str]) -> None:
    db = tmp_path / "r.db"
    r = bb(*BASE, *args, "-o", str(db))
    assert r.returncode == 64, r.err
    error_line(r)
    assert _left_behind(r.pid, state_dir, db) == []


def test_existing_output_73(tmp_path: Path, state_dir: Path) -> None:
    db = tmp_path / "r.db"
    db.write_bytes(b"someone's precious results")
    r = bb(*BASE, "-o", str(db))
    assert r.returncode == 73, r.err
    assert "already exists" in error_line(r)
    assert db.read_bytes() == b"someone's precious results"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.db", "state"]
    assert not (state_dir / "work").exists() or not list((state_dir / "work").iterdir())


def test_seed_drawn_printed_and_stored_then_resume_says_complete(tmp_path: Path,
                                                                  state_dir: Path) -> None:
    db = tmp_path / "r.db"
    r = bb(*BASE, "--scheduler", "bfq", "-o", str(db), timeout=180)
    assert r.returncode == 0, r.err
    (header,) = [ln for ln in r.err.splitlines() if HEADER.match(ln)]
    m = re.search(r"seed (\d+) \(--seed \1 repeats the order\)", header)
    assert m, header
    s = Store.open(str(db), readonly=True)
    (run,) = s.runs()
    assert run.seed == int(m.group(1)) == run.config["seed"]
    trials = s.trials(include_warmup=True)
    assert [(t["round"], t["cold"]) for t in trials] == [(0, 0), (1, 1)]
    s.close()
    assert [p for p in _left_behind(r.pid, state_dir, db) if not p.startswith(str(db))] == []

    # it reports the run (statistics, the tables): seconds of CPU, minutes on a busy machine
    again = bb("bench", "--resume", str(db), timeout=180)
    assert again.returncode == 0, again.err
    assert "the run is complete (2 trials); nothing to resume" in again.err
    assert "baseline" in again.out
    assert len(Store.open(str(db), readonly=True).trials(include_warmup=True)) == 2


def test_resume_of_a_missing_database(tmp_path: Path, state_dir: Path) -> None:
    r = bb("bench", "--resume", str(tmp_path / "missing.db"))
    assert r.returncode == 66, r.err
    error_line(r)


def test_resume_of_a_file_that_is_not_a_database(tmp_path: Path, state_dir: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_text("not sqlite\n" * 50)
    r = bb("bench", "--resume", str(junk))
    assert r.returncode == 65, r.err
    error_line(r)
    assert junk.read_text() == "not sqlite\n" * 50


# --- not root ------------------------------------------------------------------------------

# Not root (euid 65534), but allowed to read and enter any folder, so the test works wherever
# CI put the clone and its venv (under /root, mode 0700, say): it still cannot write state.
AS_NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
             "--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search"]


@pytest.fixture
def shared(tmp_path: Path) -> Iterator[Path]:
    """A folder the nobody user can write to."""
    path = Path("/tmp") / f"bb-bench-nobody-{os.getpid()}"
    path.mkdir(mode=0o1777)
    path.chmod(0o1777)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _nobody_env(shared: Path) -> tuple[str, dict[str, str]]:
    """A python >= 3.11 that nobody can run, with backburner and rich importable (the venv's
    own interpreter may live under /root, which nobody cannot enter)."""
    paths = [str(Path(backburner.__file__).resolve().parents[1]),
             str(Path(rich.__file__).resolve().parents[1])]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": ":".join(paths),
           "BACKBURNER_STATE_DIR": str(shared / "state"), "HOME": str(shared)}
    for cand in (sys.executable, shutil.which("python3") or "", "/usr/bin/python3"):
        if cand and subprocess.run(
                [*AS_NOBODY, cand, "-c", "import sys, backburner.bench.ui;"
                 "assert sys.version_info >= (3, 11)"],
                env=env, cwd="/", capture_output=True, timeout=TIMEOUT).returncode == 0:
            return cand, env
    pytest.fail("no python that the nobody user can run with backburner importable")


def _as_nobody(shared: Path, *args: str) -> Result:
    python, env = _nobody_env(shared)
    with subprocess.Popen([*AS_NOBODY, python, "-m", "backburner", *args], env=env, cwd="/",
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        out, err = proc.communicate(timeout=TIMEOUT)
    return Result(proc.pid, proc.returncode, out, err)


def test_not_root_77(shared: Path) -> None:
    db = shared / "r.db"
    r = _as_nobody(shared, *BASE, "-o", str(db))
    assert r.returncode == 77, r.err
    assert "needs root" in error_line(r)
    assert not db.exists() and not (shared / "state" / "journal").exists()
    assert not (shared / "state" / "work").exists()


def test_not_root_in_an_unwritable_cwd_77(shared: Path) -> None:
    r = _as_nobody(shared, *BASE)  # default output: results/bench-*.db under cwd "/"
    assert r.returncode == 77, r.err
    error_line(r)


@pytest.mark.parametrize("policy", ["group-idle", "iocost"])
def test_group_knobs_this_machine_lacks_69_before_anything_is_built(
        tmp_path: Path, state_dir: Path, policy: str) -> None:
    db = tmp_path / "r.db"
    r = bb(*BASE, "--policy", policy, "-o", str(db))
    assert r.returncode == 69, r.err
    line = error_line(r)
    assert f"policy {policy} needs cgroup v2's" in line and "cgroup.controllers" in line, line
    assert _left_behind(r.pid, state_dir, db) == []
