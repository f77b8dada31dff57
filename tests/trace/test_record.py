"""Recording for real: each engine against a program whose syscalls we know exactly (per
thread and per process), the launcher left out, counters present, runs interleaved."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest
from helpers import in_own_mount_namespace

from backburner import system
from backburner.base.errors import (
    CommandNotExecutable,
    CommandNotFound,
    UnavailableError,
    UsageError,
)
from backburner.kernel import procfs
from backburner.system.tracefs import PERF_TRACEFS
from backburner.trace import engines, profile, record

pytestmark = pytest.mark.timeout(120)

WORKLOAD = r"""
import os, sys, threading
def worker():
    for _ in range(50):
        os.sched_yield()
t = threading.Thread(target=worker)
t.start()
t.join()
for _ in range(30):
    os.sched_yield()
for _ in range(7):
    try:
        os.rmdir("/nonexistent-backburner-trace-test")
    except FileNotFoundError:
        pass
pid = os.fork()
if pid == 0:
    for _ in range(20):
        os.sched_yield()
    os._exit(0)
os.waitpid(pid, 0)
sys.exit(5)
"""

ENGINES = [pytest.param("strace", id="strace"),
           pytest.param("perf", id="perf", marks=pytest.mark.root)]


def _require(engine: str) -> None:
    why = engines.ENGINES[engine]().missing()
    if why:  # CI installs both (scripts/setup); say so instead of passing silently
        pytest.fail(f"engine {engine} cannot run here: {why}")


@pytest.mark.parametrize("engine", ENGINES)
def test_exact_counts_per_thread_and_process(engine: str, state_dir) -> None:
    _require(engine)
    prof, outcome = record.record([sys.executable, "-c", WORKLOAD],
                                  record.Options(engine=engine))
    assert outcome.exit_code == 5 and prof.runs[0].shell_status == 5
    run = prof.runs[0]
    job = outcome.pid
    threads = {t.tid: t for t in run.threads}
    yields = {tid: t.syscalls["sched_yield"].calls for tid, t in threads.items()
              if "sched_yield" in t.syscalls}
    assert yields.get(job) == 30
    (worker,) = [tid for tid, n in yields.items() if n == 50]
    (child,) = [tid for tid, n in yields.items() if n == 20]
    assert threads[worker].pid == job and threads[child].pid == child != job
    rmdir = threads[job].syscalls["rmdir"]
    assert (rmdir.calls, rmdir.errors, rmdir.errnos) == (7, 7, {"ENOENT": 7})
    assert {t.pid for t in run.threads} == {job, child}  # the launcher is not in it
    merged = {k: v for k, (v, _) in profile.metrics(run).items()}
    assert merged["syscall:sched_yield:calls"] == 100 and merged["tasks:processes"] == 2
    assert merged["rusage:wall_s"] > 0 and "rusage:nivcsw" in merged
    assert run.counters["stat"]["ctxt"] > 0 and run.counters["interrupts"]
    assert prof.engine["name"] == engine and prof.engine["version"] != "?"


def test_engine_none_keeps_counters_only(state_dir) -> None:
    prof, outcome = record.record([sys.executable, "-c", "import time; time.sleep(0.3)"],
                                  record.Options(engine="none", sample_interval=0.02))
    run = prof.runs[0]
    assert outcome.exit_code == 0 and not run.traced
    assert all(not t.syscalls for t in run.threads)
    sampled = [t for t in run.threads if t.pid == outcome.pid]
    assert sampled and sampled[0].sched is not None  # the sampler saw the job's thread
    assert 0.3 <= run.outcome["wall_s"] < 5


def test_overhead_runs_and_compare_interleave(state_dir) -> None:
    engine = "perf" if engines.PerfEngine().missing() is None else "strace"
    prof, _ = record.record(["true"], record.Options(runs=2, engine=engine, overhead=True))
    assert len(prof.runs) == 2 and len(prof.calibration) == 2
    assert all(r.traced for r in prof.runs) and not any(r.traced for r in prof.calibration)
    assert prof.overhead() is not None and prof.overhead() > 0
    a, b = record.compare(["true"], ["sh", "-c", "exit 0"],
                          record.Options(runs=3, engine="none"))
    starts = sorted([(r.outcome["started_at"], "A") for r in a.runs]
                    + [(r.outcome["started_at"], "B") for r in b.runs])
    assert "".join(side for _, side in starts) == "ABBAAB"


def test_bad_commands(state_dir, tmp_path) -> None:
    with pytest.raises(CommandNotFound):
        record.record(["no-such-command-bb-trace"], record.Options(engine="strace"))
    script = tmp_path / "script"
    script.write_text("#!/bin/sh\nexit 0\n")
    with pytest.raises(CommandNotExecutable):
        record.record([str(script)], record.Options(engine="none"))


def test_choose(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    with pytest.raises(UsageError):
        engines.choose("ltrace")
    monkeypatch.setenv("PATH", str(tmp_path))  # no tracer on PATH
    with pytest.raises(UnavailableError, match="Debian package strace"):
        engines.choose("strace")
    with pytest.raises(UnavailableError, match="no tracer can run here"):
        engines.choose("auto")
    assert engines.choose("none").name == "none"
    assert os.environ["PATH"] == str(tmp_path)


def _tracefs() -> set[str]:
    return {m.mountpoint for m in procfs.mounts() if m.fstype == "tracefs"}


def _intents(state_dir: Path) -> list[str]:
    return [event["kind"] for journal in (state_dir / "journal").glob("*.jsonl")
            for event in map(json.loads, journal.read_text().splitlines())
            if event["event"] == "intent"]


@pytest.mark.root
def test_a_session_keeps_its_scratch_in_the_journal_and_in_memory(state_dir: Path) -> None:
    """The run directories are a private directory under the work root with a tmpfs on it,
    both journaled (so `restore` removes them after a SIGKILL); nothing is left when the
    session ends, and no tracefs is mounted on the host (perf has its own)."""
    _require("perf")
    tracefs_before = _tracefs()
    with record.Session(engines.choose("perf")) as session:
        work = str(session.workdir)
        assert os.path.dirname(work) == str(system.work_root())
        assert os.path.basename(work).startswith("trace-")
        assert os.stat(work).st_mode & 0o777 == 0o700
        fstype = {m.mountpoint: m.fstype for m in procfs.mounts()}
        assert fstype[os.path.realpath(work)] == "tmpfs"
        assert _intents(state_dir).count("privdir") == 1
        run, outcome = session.run(["true"], 0)
        assert outcome.exit_code == 0 and run.threads
        assert _tracefs() == tracefs_before
    assert not os.path.exists(work) and list(system.work_root().iterdir()) == []
    assert list((state_dir / "journal").iterdir()) == []


def test_sampled_threads_are_numbered_as_the_tracer_saw_them(state_dir: Path) -> None:
    """The run has its own PID namespace: the run-queue wait of each thread is kept under
    the thread's number there, the one the tracer and the launcher report."""
    _require("strace")
    prof, outcome = record.record(
        [sys.executable, "-c", "import os, time; time.sleep(0.3); print(os.getpid())"],
        record.Options(engine="strace", sample_interval=0.02))
    job = {t.tid: t for t in prof.runs[0].threads}[outcome.pid]
    assert job.syscalls and job.sched is not None and job.sched["samples"] >= 2


#: In the check's own mount namespace: /sys/kernel/tracing emptied, `SETUP`, then one perf
#: recording of `ARGV`; its exit status and the syscalls seen.
RECORD_IN_NAMESPACE = """
import json, subprocess, sys
from backburner.kernel import procfs
from backburner.trace import record
while any(m.mountpoint == {tracefs!r} for m in procfs.mounts()):
    subprocess.run(["umount", "-l", {tracefs!r}], check=True)
{setup}
prof, outcome = record.record({argv!r}, record.Options(engine="perf"))
print(json.dumps(dict(status=outcome.exit_code,
                      calls=sorted({{n for t in prof.runs[0].threads for n in t.syscalls}}))))
"""


def _record_in_namespace(setup: str, argv: list[str]) -> dict:
    _require("perf")
    code = RECORD_IN_NAMESPACE.format(tracefs=PERF_TRACEFS, setup=setup, argv=argv)
    out = in_own_mount_namespace(code, timeout=100)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.splitlines()[-1])


@pytest.mark.root
def test_a_recording_survives_the_tracefs_it_would_have_taken_going(
        tmp_path: Path, state_dir: Path) -> None:
    """Another run's tracefs, the first on the machine, goes while we record (here the
    traced job itself unmounts it): perf read the events' formats from it at the end and
    wrote data it could not read back ("incompatible file format", several recordings at
    once). perf now reads a tracefs of its own."""
    decoy = tmp_path / "tracefs-of-another-run"
    decoy.mkdir()
    mount = ["mount", "-t", "tracefs", "tracefs", str(decoy)]
    got = _record_in_namespace(f"subprocess.run({mount!r}, check=True)",
                               ["umount", str(decoy)])
    assert got["status"] == 0 and any(n.startswith("umount") for n in got["calls"])


@pytest.mark.root
def test_a_recording_works_beside_the_systems_tracefs(state_dir: Path) -> None:
    """With the system's tracefs on /sys/kernel/tracing (systemd mounts it at boot) perf's
    own goes over it, in perf's namespace only."""
    mount = ["mount", "-t", "tracefs", "tracefs", PERF_TRACEFS]
    got = _record_in_namespace(f"subprocess.run({mount!r}, check=True)",
                               ["sh", "-c", f"mountpoint -q {PERF_TRACEFS}"])
    assert got["status"] == 0 and "execve" in got["calls"]


@pytest.mark.root
def test_perf_is_not_offered_where_the_kernel_has_no_tracefs(monkeypatch) -> None:
    """...and the error does not tell the user to install perf, which is installed."""
    monkeypatch.setattr(system, "PERF_TRACEFS", "/nonexistent-backburner-tracefs")
    why = "this kernel has no tracefs (/nonexistent-backburner-tracefs is missing)"
    assert engines.PerfEngine().missing() == why
    with pytest.raises(UnavailableError) as info:
        engines.choose("perf")
    assert info.value.message == f"engine perf: {why}" and info.value.hint is None


@pytest.mark.parametrize("engine", [*ENGINES, pytest.param("none", id="none")])
def test_what_the_job_leaves_running_is_stopped_with_its_run(
        engine: str, tmp_path: Path, state_dir: Path) -> None:
    """strace waits for every process it traces: a daemon the job started held the
    recording open until it exited (perf and `none` end with the namespace)."""
    if engine != "none":
        _require(engine)
    mark = tmp_path / "left-running"
    prof, outcome = record.record(["sh", "-c", f"(sleep 3; touch {mark}) & exit 2"],
                                  record.Options(engine=engine))
    assert outcome.exit_code == 2
    time.sleep(4)
    assert not mark.exists()
