"""trace.perfrecord for real: a system-wide recording that another run's tracefs cannot
break, that works beside the system's own tracefs, and whose tracefs stays in perf's own
mount namespace. Each check runs in a mount namespace of its own, so its tracefs mounts
never meet the other tests' (or the host's)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import in_own_mount_namespace

from backburner.system.tracefs import PERF_TRACEFS
from backburner.trace import engines

pytestmark = [pytest.mark.root, pytest.mark.timeout(120)]

#: In the check's namespace: `SETUP`, a recording of exec events during which `DURING`
#: runs and /bin/true is started, then what perf read back and the tracefs mounts seen.
RECORD = """
import json, os, subprocess
from backburner.kernel import procfs
from backburner.trace.perfrecord import PerfRecord

def tracefs():
    return sorted(m.mountpoint for m in procfs.mounts() if m.fstype == "tracefs")

def sh(cmd):
    subprocess.run(cmd, shell=True, check=True)

{setup}
before = tracefs()
rec = PerfRecord("test-", "exec events")
rec.start(lambda data, ctl, ack: ["perf", "record", "-q", "-a", "-D", "-1", "--control",
                                  f"fd:{{ctl}},{{ack}}", "-e", "sched:sched_process_exec",
                                  "-o", data])
during = tracefs()
{during}
subprocess.run(["/bin/true"], check=True)
try:
    lines = rec.script("comm,event")
finally:
    rec.close()
print(json.dumps(dict(before=before, during=during, after=tracefs(), lines=lines)))
"""
#: /sys/kernel/tracing as this host may have it or not: emptied in the check's namespace.
NONE_THERE = (f"while any(m.mountpoint == {PERF_TRACEFS!r} for m in procfs.mounts()):\n"
              f"    sh('umount -l {PERF_TRACEFS}')")


def _record(setup: str, during: str = "") -> dict:
    if engines.PerfEngine().missing():
        pytest.fail(f"perf cannot run here: {engines.PerfEngine().missing()}")
    out = in_own_mount_namespace(RECORD.format(setup=setup, during=during), timeout=100)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.splitlines()[-1])


def _saw_true(got: dict) -> bool:
    return any("sched_process_exec" in line and "true" in line for line in got["lines"])


def test_a_recording_reads_back_after_another_runs_tracefs_went(
        tmp_path: Path, state_dir: Path) -> None:
    """The first tracefs of the machine, another run's, is unmounted mid-recording: perf
    used to take it and then wrote data it could not read ("incompatible file format")."""
    decoy = tmp_path / "tracefs-of-another-run"
    decoy.mkdir()
    got = _record(f"{NONE_THERE}\nsh('mount -t tracefs tracefs {decoy}')",
                  during=f"sh('umount {decoy}')")
    assert got["before"] == got["during"] == [str(decoy)]  # perf's own is in its namespace
    assert _saw_true(got), got["lines"]
    assert got["after"] == []


def test_a_recording_works_beside_the_systems_tracefs_and_leaves_it(
        state_dir: Path) -> None:
    """systemd mounts tracefs on /sys/kernel/tracing at boot (and a perf run by hand mounts
    one there and leaves it): perf's own is mounted over it in perf's namespace only."""
    got = _record(f"{NONE_THERE}\nsh('mount -t tracefs tracefs {PERF_TRACEFS}')")
    assert got["before"] == got["during"] == got["after"] == [PERF_TRACEFS]
    assert _saw_true(got), got["lines"]
