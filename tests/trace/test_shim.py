"""The launcher: the job's own status and rusage in RESULT, and no job at all once the
recorder that holds the other end of its --alive pipe is gone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import TIMEOUT

pytestmark = pytest.mark.timeout(60)


def _shim(tmp_path: Path, *, recorder_alive: bool) -> tuple[int, Path, Path]:
    result = tmp_path / "result.json"
    marker = tmp_path / "ran"
    read_end, write_end = os.pipe()
    if not recorder_alive:
        os.close(write_end)
    try:
        proc = subprocess.run([sys.executable, "-m", "backburner.trace.shim", "--alive",
                               str(read_end), str(result), "--", "sh", "-c",
                               f"touch {marker}; exit 4"],
                              pass_fds=(read_end,), timeout=TIMEOUT, capture_output=True)
    finally:
        os.close(read_end)
        if recorder_alive:
            os.close(write_end)
    return proc.returncode, result, marker


def test_runs_the_job_while_the_recorder_holds_the_pipe(tmp_path: Path) -> None:
    status, result, marker = _shim(tmp_path, recorder_alive=True)
    assert status == 0 and marker.exists()
    assert json.loads(result.read_text())["outcome"]["exit_code"] == 4


def test_never_starts_the_job_once_the_recorder_is_gone(tmp_path: Path) -> None:
    """A recorder killed while `unshare` forked the namespace's first process leaves that
    process without a parent-death signal: the run must then not start the job at all."""
    status, result, marker = _shim(tmp_path, recorder_alive=False)
    assert status == 75 and not marker.exists() and not result.exists()


def test_usage(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "backburner.trace.shim", "only-one"],
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 64 and proc.stderr.startswith("usage:")
