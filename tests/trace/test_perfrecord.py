"""trace.perfrecord for real: a system-wide recording that another run's tracefs cannot
break, and that mounts nothing on the host."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from backburner.kernel import procfs
from backburner.system.tracefs import PERF_TRACEFS
from backburner.trace import engines
from backburner.trace.perfrecord import PerfRecord

pytestmark = [pytest.mark.root, pytest.mark.timeout(120)]


def _tracefs() -> set[str]:
    return {m.mountpoint for m in procfs.mounts() if m.fstype == "tracefs"}


def _argv(data: str, ctl: int, ack: int) -> list[str]:
    return ["perf", "record", "-q", "-a", "-D", "-1", "--control", f"fd:{ctl},{ack}",
            "-e", "sched:sched_process_exec", "-o", data]


def test_a_recording_reads_back_after_another_runs_tracefs_went(
        tmp_path: Path, state_dir: Path) -> None:
    """The first tracefs on the host, another run's, is unmounted mid-recording: perf
    used to take it and then wrote data it could not read ("incompatible file format")."""
    if engines.PerfEngine().missing():
        pytest.fail(f"perf cannot run here: {engines.PerfEngine().missing()}")
    before = _tracefs()
    assert PERF_TRACEFS not in before, "this check needs no tracefs on " + PERF_TRACEFS
    decoy = tmp_path / "tracefs-of-another-run"
    decoy.mkdir()
    subprocess.run(["mount", "-t", "tracefs", "tracefs", str(decoy)], check=True)
    recording = PerfRecord("test-", "exec events")
    try:
        recording.start(_argv)
        assert _tracefs() == before | {str(decoy)}  # perf's own is not the host's
        subprocess.run(["umount", str(decoy)], check=True)
        subprocess.run(["/bin/true"], check=True)
        lines = recording.script("comm,event")
    finally:
        recording.close()
        subprocess.run(["umount", str(decoy)], capture_output=True)
    assert any("sched_process_exec" in line and "true" in line for line in lines), lines
    assert _tracefs() == before
