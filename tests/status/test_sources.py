"""status.sources on the real kernel: a `run` job, a tree re-prioritised by `run --pid` and
a process a running `govern` governs, each listed with what the kernel has in force (read
back with ioprio_get and sched_getscheduler), and what differs once it is changed by hand."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import BB, TIMEOUT, bb, rules_dir, wait_for

from backburner.kernel import priorities
from backburner.kernel.priorities import IOPrio
from backburner.policy import grammar
from backburner.status import records

pytestmark = pytest.mark.root


def _listed(source: str) -> list[dict]:
    r = bb("status", "--json")
    assert r.returncode == 0, r.err
    return [e for e in json.loads(r.out)["entries"] if e["source"] == source]


@pytest.fixture
def sleeper(tmp_path: Path) -> Iterator[tuple[Path, list[subprocess.Popen]]]:
    """`sleep` under a name of its own (the kernel names a process after the path it was
    executed by), and the processes started with it, ended afterwards."""
    link = tmp_path / f"bbst{uuid.uuid4().hex[:10]}"
    link.symlink_to("/bin/sleep")
    started: list[subprocess.Popen] = []
    yield link, started
    for p in started:
        if p.poll() is None:
            p.kill()
        p.wait(TIMEOUT)


def test_a_run_job_with_what_is_in_force_and_what_differs(
        state_dir: Path, sleeper: tuple[Path, list[subprocess.Popen]]) -> None:
    link, started = sleeper
    run = subprocess.Popen([*BB, "run", "--policy", "background", "--", str(link), "300"])
    started.append(run)
    wait_for(lambda: any(link.name in e["what"] for e in _listed("run")),
             what="the job in `status`")  # listed from its fork on; named once it execs
    (job,) = _listed("run")
    pid = job["pid"]
    assert job["by"] == f"backburner run (PID {run.pid})" and link.name in job["what"]
    assert (job["in_force"]["io"], job["in_force"]["cpu"]) == ("idle", "idle")
    assert str(priorities.ioprio_get(pid)) == "idle"  # what the view says is the kernel's
    assert any("backburner/run-" in g for g in job["in_force"]["cgroups"]), job
    assert job["differs"] == [] and "io-weight 10" in job["sets"]
    priorities.ioprio_set(pid, IOPrio("be", 4))  # changed behind its back
    (job,) = _listed("run")
    assert job["in_force"]["io"] == "be:4"
    assert job["differs"] == ["io: set idle, in force be:4"]
    text = bb("status").out
    assert f"PID {pid} ({link.name})" in text and "DIFFERS   io: set idle, in force be:4" in text
    run.send_signal(signal.SIGTERM)  # forwarded to the job: both end
    run.wait(TIMEOUT)
    assert _listed("run") == [] and not list(records.folder().glob("run-*.json"))


def test_a_run_pid_tree_and_govern_explain(
        state_dir: Path, tmp_path: Path, sleeper: tuple[Path, list[subprocess.Popen]]) -> None:
    link, started = sleeper
    target = subprocess.Popen([str(link), "300"])
    started.append(target)
    d = rules_dir(tmp_path, f'[[rule]]\nname = "mine"\nmatch = {{ comm = "{link.name}" }}\n'
                  'io = "idle"\n')
    before = bb("govern", "explain", str(target.pid), "--rules", str(d), "--no-defaults").out
    assert "=> rule mine would govern it: io idle" in before  # no daemon: not in force
    assert "in force now: io none; cpu normal, nice 0" in before
    assert "set by no backburner command" in before
    r = bb("run", "--pid", str(target.pid), "--io", "idle", "--cpu", "batch")
    assert r.returncode == 0, r.err
    (tree,) = _listed("run --pid")
    assert tree["pid"] == target.pid and tree["sets"] == "io idle, cpu batch"
    assert (tree["in_force"]["io"], tree["in_force"]["cpu"]) == ("idle", "batch")
    assert tree["differs"] == []
    after = bb("govern", "explain", str(target.pid), "--rules", str(d), "--no-defaults").out
    assert "in force now: io idle; cpu batch, nice 0" in after
    assert f"set by backburner run --pid {target.pid} since" in after
    assert bb("restore", "--pid", str(target.pid)).returncode == 0
    assert _listed("run --pid") == []


def test_a_governed_process(state_dir: Path, tmp_path: Path,
                            sleeper: tuple[Path, list[subprocess.Popen]]) -> None:
    link, started = sleeper
    target = subprocess.Popen([str(link), "300"])
    started.append(target)
    d = rules_dir(tmp_path, f'[[rule]]\nname = "mine"\nmatch = {{ comm = "{link.name}" }}\n'
                  'io = "idle"\ncpu = "idle"\n')
    ready = tmp_path / "ready"
    daemon = subprocess.Popen([*BB, "govern", "run", "--rules", str(d), "--no-defaults",
                               "--ready-file", str(ready)], stderr=subprocess.PIPE)
    started.append(daemon)
    wait_for(lambda: ready.exists() or daemon.poll() is not None, what="the daemon")
    try:
        wait_for(lambda: _listed("govern"), what="the governed process in `status`")
        (g,) = _listed("govern")
        assert g["pid"] == target.pid
        assert g["by"] == f"govern rule mine (daemon PID {daemon.pid})"
        assert (g["in_force"]["io"], g["in_force"]["cpu"]) == ("idle", "idle")
        assert g["differs"] == [] and g["sets"] == "io idle, cpu idle"
        os.sched_setscheduler(target.pid, os.SCHED_OTHER, os.sched_param(0))  # by hand
        (g,) = _listed("govern")
        assert g["differs"] == ["cpu: set idle, in force normal (nice 0)"]
        r = bb("govern", "explain", str(target.pid), "--rules", str(d), "--no-defaults")
        assert "=> rule mine governs it: io idle, cpu idle" in r.out
        assert "in force now: io idle; cpu normal, nice 0" in r.out
        assert "DIFFERS: cpu: set idle, in force normal (nice 0)" in r.out
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(TIMEOUT)
    assert _listed("govern") == []


def test_the_files_apply_installed_and_the_disks(state_dir: Path, tmp_path: Path) -> None:
    from backburner.apply import install as apply
    from backburner.status import sources

    root = tmp_path / "image"
    root.mkdir()
    policy = grammar.parse_policy("background")
    apply.install(apply.plan(apply.SchedulerRule("bfq"), ["backup.service"], policy), str(root))
    found = sources.gather(apply_root=str(root))
    files = [e for e in found.entries if e.source == "apply"]
    assert sorted(e.what for e in files) == ["drop-in of backup.service", "slice backburner.slice",
                                             "udev scheduler rule"]
    dropin = next(e for e in files if e.what == "drop-in of backup.service")
    assert "backup.service" in dropin.sets and "policy background" in dropin.sets
    assert dropin.since is not None and dropin.differs == []
    (root / "etc/systemd/system/backup.service.d/50-backburner.conf").write_text(
        apply.MARKER + "\n# edited\n")
    dropin = next(e for e in sources.gather(apply_root=str(root)).entries
                  if e.what == "drop-in of backup.service")
    assert dropin.differs and "edited by hand" in dropin.differs[0]
    names = {d.name for d in found.disks}
    assert names and not any(n.startswith("loop") for n in names)
    for d in found.disks:
        sched = (Path("/sys/block") / d.name / "queue/scheduler").read_text()
        assert f"[{d.scheduler}]" in sched or sched.strip() == d.scheduler
