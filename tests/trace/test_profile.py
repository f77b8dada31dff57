"""The trace file: round trip, validation (every defect is a one-line DataError 65), the
flat metrics and the views."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from backburner.base.errors import DataError, NotFoundError
from backburner.trace import profile


def test_round_trip(make_profile, make_run, tmp_path: Path) -> None:
    p = make_profile("prog --x", [make_run(0, {"read": 5}, errnos={"read": {"EINTR": 2}}),
                                  make_run(1, {"read": 7})],
                     calibration=[make_run(0, traced=False, wall_s=0.5)])
    p.runs[1].lost_events = 3
    path = str(tmp_path / "t.json")
    profile.save(p, path)
    back = profile.load(path)
    assert profile.to_dict(back) == profile.to_dict(p)
    assert back.runs[0].threads[0].syscalls["read"].errnos == {"EINTR": 2}
    assert json.loads(Path(path).read_text())["version"] == profile.VERSION == 1
    assert back.overhead() == pytest.approx(2.0) and back.lost_runs() == [2]


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d.update(format="something-else"), "is not a backburner trace"),
    (lambda d: d.update(version=profile.VERSION + 1), "newer backburner"),
    (lambda d: d.update(version="1"), "version"),
    (lambda d: d.update(runs=[]), "no runs"),
    (lambda d: d["runs"][0].pop("outcome"), "outcome is missing"),
    (lambda d: d["runs"][0]["outcome"].update(nivcsw="many"), "nivcsw is not a finite number"),
    (lambda d: d["runs"][0]["outcome"].update(exit_code=None), "neither an exit code"),
    (lambda d: d["runs"][0]["threads"][0]["syscalls"]["read"].update(calls=True),
     "calls is not a finite number"),
    (lambda d: d["runs"][0]["threads"][0]["syscalls"]["read"]["errnos"].update(E=1.5),
     "errno counts"),
    (lambda d: d["runs"][0]["threads"][0].update(tid="x"), "tid is not a finite number"),
    (lambda d: d["runs"][0].update(threads={}), "threads has the wrong type"),
    (lambda d: d.pop("engine"), "engine is missing"),
])
def test_every_defect_is_a_data_error(make_profile, make_run, tmp_path: Path, mutate,
                                      message) -> None:
    d = profile.to_dict(make_profile("p", [make_run(0, {"read": 1})]))
    mutate(d)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(d))
    with pytest.raises(DataError) as err:
        profile.load(str(path))
    assert message in str(err.value) and "\n" not in str(err.value)
    assert err.value.exit_status == 65


@pytest.mark.parametrize("content", [b"", b"{not json", b"\xff\xfe\x00binary", b"[1, 2]",
                                     b"[" * 100_000])
def test_not_a_trace_is_65(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "x.json"
    path.write_bytes(content)
    with pytest.raises(DataError):
        profile.load(str(path))


def test_missing_file_is_66(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError):
        profile.load(str(tmp_path / "absent.json"))


def test_metrics(make_run) -> None:
    run = make_run(0, {"sched_yield": 40, "openat": 9}, errnos={"openat": {"ENOENT": 4}},
                   nivcsw=77, cal=12)
    m = {k: v for k, (v, _) in profile.metrics(run).items()}
    assert m["syscall:sched_yield:calls"] == 40
    assert m["syscall:openat:errno:ENOENT"] == 4 and m["syscall:openat:errors"] == 4
    assert m["syscall:futex:calls"] == 3  # the worker thread, merged in
    assert m["syscalls:calls"] == 52 and m["tasks:threads"] == 2 and m["tasks:processes"] == 1
    assert m["rusage:nivcsw"] == 77 and m["irq:CAL"] == 12 and m["psi:io:some"] == 0.1
    assert m["stat:ctxt"] == 1000 and m["sched:wait_s"] == 0.01
    assert m["rusage:max_rss_kb"] == 50000
    labels = profile.metrics(run)
    assert labels["rusage:nivcsw"][1].label == "involuntary context switches"
    assert labels["irq:CAL"][1].label == "function call IPIs (CAL)"


def test_peak_rss_below_the_launchers_is_not_the_jobs(make_run) -> None:
    run = make_run(0, {"read": 1}, max_rss_kb=11000, launcher_rss_kb=12000)
    assert "rusage:max_rss_kb" not in profile.metrics(run)


def test_untraced_runs_have_no_syscall_metrics(make_run) -> None:
    keys = profile.metrics(make_run(0, traced=False)).keys()
    assert not any(k.startswith(("syscall", "tasks")) for k in keys)
    assert "rusage:nvcsw" in keys and "irq:CAL" in keys


def test_processes_view(make_run) -> None:
    run = make_run(0, {"read": 2})
    (pv,) = profile.processes(run)
    assert pv.pid == 100 and pv.comm == "job" and len(pv.threads) == 2
    assert pv.syscalls["futex"].calls == 3 and pv.wait_s == 0.01
    assert run.shell_status == 0
    assert make_run(0, exit_code=None, signal=11).shell_status == 139
