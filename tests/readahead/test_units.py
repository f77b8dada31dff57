"""The boot units: `systemd-analyze verify` accepts copies whose ExecStart points at this
checkout's entry point (systemd is not PID 1 here, so they cannot be started), and the
exact command lines they run work: record until SIGTERM, then replay what it wrote."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from backburner import system
from backburner.readahead import packfile

from .conftest import Bed, resident

# another worker's cache drop (every cold bench trial drops the page cache machine-wide)
# evicts the pages a replay just read before the check sees them: run alone
pytestmark = pytest.mark.alone

UNITS = Path(__file__).resolve().parents[2] / "systemd"
NAMES = ["backburner-readahead-record.service", "backburner-readahead-replay.service"]
INSTALLED = "/usr/bin/backburner"
PACK = "/var/lib/backburner/readahead/boot.pack"


def exec_start(name: str) -> list[str]:
    for line in (UNITS / name).read_text().splitlines():
        if line.startswith("ExecStart="):
            return shlex.split(line.removeprefix("ExecStart="))
    raise AssertionError(f"{name} has no ExecStart")


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze")
def test_units_verify(tmp_path: Path) -> None:
    entry = Path(sys.executable).with_name("backburner")
    assert entry.exists(), "the venv's entry point (pip install -e .)"
    for name in NAMES:
        text = (UNITS / name).read_text()
        assert INSTALLED in text and PACK in text
        (tmp_path / name).write_text(text.replace(INSTALLED, str(entry)))
    res = subprocess.run(["systemd-analyze", "verify", "--man=no",
                          *(str(tmp_path / n) for n in NAMES)],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and res.stdout + res.stderr == "", res.stdout + res.stderr


def _runnable(name: str, pack: Path) -> list[str]:
    argv = exec_start(name)
    assert argv[0] == INSTALLED
    return [sys.executable, "-m", "backburner",
            *(str(pack) if a == PACK else a for a in argv[1:])]


@pytest.mark.root
def test_the_units_command_lines(bed: Bed, tmp_path: Path) -> None:
    pack = tmp_path / "boot.pack"
    # the record unit's exact arguments, watching only the test's filesystem
    record = _runnable(NAMES[0], pack) + ["--mount", str(bed.mnt)]
    assert record[3:7] == ["readahead", "record", "--system", "--seconds"]
    proc = subprocess.Popen(record, stderr=subprocess.PIPE, text=True)
    try:
        assert "recording what is read on" in proc.stderr.readline()
        subprocess.run(["cat", bed.path("lib/mod.py")], stdout=subprocess.DEVNULL, check=True)
        proc.send_signal(signal.SIGTERM)  # what `systemctl stop` sends
        err = proc.communicate(timeout=30)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    files = [e.path for e in packfile.load(pack).entries if not e.device]
    assert files == [bed.path("lib/mod.py")]
    system.drop_caches()
    replay = _runnable(NAMES[1], pack)
    res = subprocess.run(replay, capture_output=True, text=True, timeout=90)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("replayed 1 file,")
    assert resident(bed.path("lib/mod.py")) == [(0, -(-os.path.getsize(
        bed.path("lib/mod.py")) // 4096) * 4096)]
