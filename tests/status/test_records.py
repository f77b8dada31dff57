"""status.records: the record of a `run` job lives exactly as long as its `backburner run`."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from backburner.kernel import procfs
from backburner.status import records


def test_the_record_lives_while_the_block_runs(state_dir: Path) -> None:
    with records.running_job(["tar", "xf", "a"], {"io": "idle"}):
        (rec,) = records.read()
        assert (rec.pid, rec.argv, rec.sets) == (os.getpid(), ["tar", "xf", "a"],
                                                 {"io": "idle"})
        assert rec.start == procfs.start_time(os.getpid())
        (path,) = records.folder().glob("run-*.json")
        assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert records.read() == [] and not list(records.folder().glob("*"))


def test_a_dead_runs_record_is_ignored_then_pruned(state_dir: Path) -> None:
    """A `backburner run` killed by SIGKILL leaves its record: readers skip it (its process
    is gone, or its PID is another process's) and the next `run` removes it."""
    where = records.folder()
    where.mkdir(mode=0o700)
    stale = where / f"run-{os.getpid()}-1.json"  # our PID, another start time
    stale.write_text(json.dumps({"format": 1, "pid": os.getpid(), "start": 1, "argv": ["x"],
                                 "sets": {}, "since": 0.0, "groups": []}))
    stale.chmod(0o600)
    assert records.read() == []
    with records.running_job(["y"], {}):
        assert not stale.exists() and [r.argv for r in records.read()] == [["y"]]


def test_a_state_directory_that_cannot_take_it_never_stops_the_job(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    unsafe = tmp_path / "open"
    unsafe.mkdir(mode=0o777)
    unsafe.chmod(0o777)  # writable by anyone: refused by safepath
    monkeypatch.setenv("BACKBURNER_STATE_DIR", str(unsafe))
    ran = False
    with records.running_job(["z"], {}):
        ran = True
    assert ran and records.read() == [] and not (unsafe / "jobs").exists()
