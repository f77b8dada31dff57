"""Shared test helpers: a private state directory and the CLI run as a real subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

BB = [sys.executable, "-m", "backburner"]
TIMEOUT = 30  # generous: the CI machine may be busy; the commands themselves take < 1 s


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.geteuid() == 0:
        return  # root tests always run as root
    skip = pytest.mark.skip(reason="needs root")
    for item in items:
        if "root" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """BACKBURNER_STATE_DIR in a fresh tmp dir (inherited by subprocesses)."""
    path = tmp_path / "state"
    path.mkdir()
    monkeypatch.setenv("BACKBURNER_STATE_DIR", str(path))
    return path


@dataclass
class Result:
    pid: int
    returncode: int
    stdout: bytes
    stderr: bytes

    @property
    def err(self) -> str:
        return self.stderr.decode(errors="replace")

    @property
    def out(self) -> str:
        return self.stdout.decode(errors="replace")


def bb(*args: str, input: bytes | None = None, timeout: float = TIMEOUT, **kw: object) -> Result:
    """Run `python -m backburner ARGS` to completion; bytes captured, pid kept."""
    with subprocess.Popen(
        [*BB, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw
    ) as proc:
        try:
            out, err = proc.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise
        return Result(proc.pid, proc.returncode, out, err)


def wait_for(predicate: Callable[[], object], timeout: float = TIMEOUT, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or predicate}")
        time.sleep(0.005)


def raw_status(proc: subprocess.Popen, timeout: float = TIMEOUT) -> int:
    """The raw wait status of a Popen child (os.waitpid), which Popen.returncode hides."""
    deadline = time.monotonic() + timeout
    while True:
        pid, status = os.waitpid(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return status
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"{proc.args} did not end within {timeout} s")
        time.sleep(0.005)


def one_line_error(result: Result) -> str:
    """Assert stderr is exactly one line and no traceback; return it."""
    assert "Traceback" not in result.err, result.err
    lines = result.err.strip().splitlines()
    assert len(lines) == 1, result.err
    return lines[0]
