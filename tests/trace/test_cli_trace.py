"""`backburner trace` as a user runs it (real subprocesses): exit statuses mirrored exactly,
bad input as one line with its status, show/diff without root, and the README demo."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import rich
from helpers import BB, TIMEOUT, Result, bb, one_line_error, raw_status

import backburner
from backburner.trace import engines, profile

pytestmark = pytest.mark.timeout(180)
DEMO = Path(__file__).resolve().parents[2] / "benchmarks" / "trace_demo"


def _record(tmp_path: Path, *cmd: str, engine: str = "strace", name: str = "t.json",
            extra: tuple[str, ...] = ()) -> tuple[Result, Path]:
    out = tmp_path / name
    return bb("trace", "record", "-q", "--engine", engine, "-o", str(out), *extra, "--",
              *cmd), out


def test_exit_status_is_mirrored(tmp_path: Path, state_dir: Path) -> None:
    r, out = _record(tmp_path, "sh", "-c", "echo hello; exit 7")
    assert r.returncode == 7 and r.out == "hello\n" and r.err == ""
    assert profile.load(str(out)).runs[0].outcome["exit_code"] == 7


@pytest.mark.parametrize("engine", ["strace", pytest.param("perf", marks=pytest.mark.root)])
def test_death_by_signal_is_mirrored(tmp_path: Path, state_dir: Path, engine: str) -> None:
    out = tmp_path / "t.json"
    proc = subprocess.Popen([*BB, "trace", "record", "-q", "--engine", engine, "-o", str(out),
                             "--", "sh", "-c", "kill -SEGV $$"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    status = raw_status(proc)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGSEGV
    run = profile.load(str(out)).runs[0]
    assert run.outcome["signal"] == signal.SIGSEGV and run.shell_status == 139


@pytest.mark.parametrize("engine", ["strace", pytest.param("perf", marks=pytest.mark.root)])
def test_sigterm_reaches_the_job_and_we_die_of_it(tmp_path: Path, state_dir: Path,
                                                  engine: str) -> None:
    out = tmp_path / "t.json"
    ready = tmp_path / "ready"
    proc = subprocess.Popen([*BB, "trace", "record", "-q", "--engine", engine, "-o", str(out),
                             "--", "sh", "-c", f"touch {ready}; exec sleep 30"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + TIMEOUT
    while not ready.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.2)  # sh has exec'd sleep
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    status = raw_status(proc)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM, proc.stderr.read()
    assert time.monotonic() - started < 15
    run = profile.load(str(out)).runs[0]
    assert run.outcome["signal"] == signal.SIGTERM
    assert run.outcome["wall_s"] < 25


def test_command_not_found_127_and_not_executable_126(tmp_path: Path, state_dir: Path) -> None:
    r, out = _record(tmp_path, "no-such-command-bb-trace")
    assert r.returncode == 127 and "command not found" in one_line_error(r)
    assert not out.exists()
    script = tmp_path / "script.sh"
    script.write_text("#!/bin/sh\n")
    r, _ = _record(tmp_path, str(script), engine="none")
    assert r.returncode == 126 and "cannot execute" in one_line_error(r)


def test_usage_errors_64_and_existing_output_73(tmp_path: Path, state_dir: Path) -> None:
    r = bb("trace", "record", "-o", str(tmp_path / "x.json"))
    assert r.returncode == 64 and "no command" in one_line_error(r)
    r = bb("trace", "compare", "--", "true")
    assert r.returncode == 64 and "two commands" in one_line_error(r)
    r = bb("trace", "compare", "--", "true", "--")
    assert r.returncode == 64 and "non-empty" in one_line_error(r)
    r = bb("trace", "record", "--engine", "ltrace", "-o", "x", "--", "true")
    assert r.returncode == 64
    existing = tmp_path / "old.json"
    existing.write_text("keep me")
    marker = tmp_path / "ran"
    r = bb("trace", "record", "-o", str(existing), "--", "touch", str(marker))
    assert r.returncode == 73 and "--force" in one_line_error(r)
    assert existing.read_text() == "keep me" and not marker.exists()
    r = bb("trace", "record", "--engine", "none", "-o", str(tmp_path / "no" / "dir.json"),
           "--", "touch", str(marker))
    assert r.returncode == 74 and not marker.exists()
    r, out = _record(tmp_path, "true", name="old.json", engine="none", extra=("--force",))
    assert r.returncode == 0 and profile.load(str(out)).runs


def test_no_tracer_installed_69_names_the_package(tmp_path: Path, state_dir: Path) -> None:
    env = {**os.environ, "PATH": str(tmp_path)}
    r = bb("trace", "record", "--engine", "strace", "-o", str(tmp_path / "t.json"), "--",
           "true", env=env)
    assert r.returncode == 69 and "Debian package strace" in one_line_error(r)
    r = bb("trace", "record", "-o", str(tmp_path / "t.json"), "--", "true", env=env)
    assert r.returncode == 69 and "apt-get install strace" in one_line_error(r)


def test_bad_trace_files(tmp_path: Path) -> None:
    junk = tmp_path / "junk.json"
    junk.write_text("not json at all")
    newer = tmp_path / "newer.json"
    newer.write_text(json.dumps({"format": profile.FORMAT, "version": profile.VERSION + 1}))
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"some": "json"}))
    for path, status, words in ((junk, 65, "not JSON"), (newer, 65, "newer backburner"),
                                (other, 65, "not a backburner trace"),
                                (tmp_path / "absent.json", 66, "no such trace file")):
        for args in (("show", str(path)), ("diff", str(path), str(path))):
            r = bb("trace", *args)
            assert r.returncode == status and words in one_line_error(r), (args, r.err)


# --- outputs and inputs ---------------------------------------------------------------------


def _char_device(path: Path) -> Path:
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # a /dev/null of our own
    return path


@pytest.mark.root
def test_outputs_never_go_into_a_device_and_refuse_it_before_running(
        tmp_path: Path, state_dir: Path) -> None:
    """-o and --html that are a device: one line, 73, before the command runs; the node
    stays a device (renaming over /dev/null would put a regular file in its place)."""
    dev = _char_device(tmp_path / "dev")
    marker = tmp_path / "ran"
    r = bb("trace", "record", "--engine", "none", "--force", "-o", str(dev), "--",
           "touch", str(marker))
    assert r.returncode == 73 and "a character device" in one_line_error(r)
    assert not marker.exists() and stat.S_ISCHR(os.lstat(dev).st_mode)
    r, trace = _record(tmp_path, "true", engine="none")
    assert r.returncode == 0
    r = bb("trace", "diff", str(trace), str(trace), "--html", str(dev))
    assert r.returncode == 73 and "a character device" in one_line_error(r) and r.out == ""
    r = bb("trace", "compare", "--engine", "none", "--html", str(dev), "--",
           "touch", str(marker), "--", "true")
    assert r.returncode == 73 and not marker.exists()
    assert stat.S_ISCHR(os.lstat(dev).st_mode)


def test_outputs_are_replaced_whole_never_written_through_a_link(
        tmp_path: Path, state_dir: Path) -> None:
    """A trace file is 0600 whatever the umask (it names the commands a user ran); an HTML
    report 0644; a symlink at either path is replaced, the file it points to untouched."""
    r, trace = _record(tmp_path, "true", engine="none")
    assert r.returncode == 0 and stat.S_IMODE(trace.stat().st_mode) == 0o600
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    link = tmp_path / "link.json"
    link.symlink_to(victim)
    r = bb("trace", "record", "-q", "--engine", "none", "--force", "-o", str(link), "--",
           "true")
    assert r.returncode == 0 and not link.is_symlink() and profile.load(str(link)).runs
    page = tmp_path / "page.html"
    page.symlink_to(victim)
    r = bb("trace", "diff", str(trace), str(link), "--html", str(page))
    assert r.returncode == 0, r.err
    assert not page.is_symlink() and page.read_text().startswith("<!DOCTYPE")
    assert stat.S_IMODE(page.stat().st_mode) == 0o644
    assert victim.read_text() == "keep me"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".~")] == []


def test_trace_inputs_that_are_not_regular_files_are_refused(tmp_path: Path) -> None:
    """show and diff read through `infile`: a FIFO or /dev/zero is one line (65), at once."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for args in (("show", str(fifo)), ("diff", str(fifo), str(fifo)),
                 ("diff", "/dev/zero", str(fifo)), ("show", str(tmp_path))):
        r = bb("trace", *args, timeout=10)
        assert r.returncode == 65 and " is a" in one_line_error(r), (args, r.err)


@pytest.fixture
def two_traces(tmp_path: Path, state_dir: Path) -> tuple[Path, Path]:
    a = tmp_path / "a.json"
    b = tmp_path / "b.json"
    r = bb("trace", "compare", "-q", "--engine", "strace", "--runs", "2", "-o",
           str(tmp_path / "ab"), "--", "sh", "-c", "true", "--", "sh", "-c",
           "for i in 1 2 3 4 5 6; do test -e /nonexistent-$i; done")
    assert r.returncode == 0, r.err
    (tmp_path / "ab-a.json").rename(a)
    (tmp_path / "ab-b.json").rename(b)
    return a, b


def test_show_and_diff_formats(two_traces: tuple[Path, Path], tmp_path: Path) -> None:
    a, b = two_traces
    r = bb("trace", "show", str(b))
    assert r.returncode == 0 and "Syscalls" in r.out and "Counters" in r.out
    r = bb("trace", "show", str(b), "--by", "thread", "--format", "markdown")
    assert r.returncode == 0 and "**Threads of run 1**" in r.out
    assert "| --: | --: | :-- | --: |" in r.out  # tid, pid, command, syscalls ...
    r = bb("trace", "show", str(b), "--run", "3")
    assert r.returncode == 64
    r = bb("trace", "diff", str(a), str(b), "--format", "json")
    data = json.loads(r.out)
    assert data["a"]["runs"] == 2 and data["alpha"] == 0.05
    enoent = next(x for x in data["apart"] if x["key"] == "syscall:newfstatat:errno:ENOENT")
    assert enoent["a"] == [0, 0] and enoent["b"] == [6, 6]  # apart: 2 runs cannot call it
    assert enoent["p"] == pytest.approx(1 / 3) and not data["changed"]
    page = tmp_path / "d.html"
    r = bb("trace", "diff", str(a), str(b), "--html", str(page))
    assert r.returncode == 0 and "Noise" in r.out and page.read_text().startswith("<!DOCTYPE")


AS_NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
             "--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search"]


@pytest.fixture
def nobody_dir() -> Iterator[Path]:
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="bb-trace-nobody-"))
    path.chmod(0o1777)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.mark.root
def test_show_and_diff_need_no_root(two_traces: tuple[Path, Path], nobody_dir: Path) -> None:
    import matplotlib

    a, b = two_traces
    paths = [str(Path(m.__file__).resolve().parents[1]) for m in (backburner, rich, matplotlib)]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": ":".join(paths),
           "HOME": str(nobody_dir), "BACKBURNER_STATE_DIR": str(nobody_dir / "state")}
    page = nobody_dir / "d.html"
    for args in (["show", str(a)], ["diff", str(a), str(b), "--html", str(page)]):
        proc = subprocess.run([*AS_NOBODY, sys.executable, "-m", "backburner", "trace", *args],
                              env=env, cwd="/", capture_output=True, text=True, timeout=TIMEOUT)
        assert proc.returncode == 0, proc.stderr
    assert page.stat().st_uid != 0 and not (nobody_dir / "state").exists()


def test_engines_lists_each(state_dir: Path) -> None:
    r = bb("trace", "engines")
    names = [line.split()[0] for line in r.out.splitlines()]
    assert r.returncode == 0 and names == ["perf", "strace", "none"]


@pytest.mark.root
def test_readme_demo_puts_sched_yield_first(tmp_path: Path, state_dir: Path) -> None:
    """The README's compare, shortened (4 runs each, the least that can call a change)."""
    if engines.PerfEngine().missing():
        pytest.fail(f"perf cannot run here: {engines.PerfEngine().missing()}")
    py = sys.executable
    r = bb("trace", "compare", "-q", "--runs", "4", "--format", "json", "--",
           py, str(DEMO / "futex_wait.py"), "--rounds", "600", "--",
           py, str(DEMO / "spin_wait.py"), "--rounds", "600", timeout=150)
    assert r.returncode == 0, r.err
    data = json.loads(r.out)
    top = [row["key"] for row in data["changed"][:3]]
    assert "syscall:sched_yield:calls" in top or "syscall:sched_yield:time_s" in top, top
    yields = next(x for x in data["changed"] if x["key"] == "syscall:sched_yield:calls")
    assert max(yields["a"]) == 0 and min(yields["b"]) > 0
    every = {x["key"]: x for x in data["changed"] + data["apart"] + data["noise"]}
    switches = every["rusage:nivcsw"]  # every wake of the worker preempts the spinner
    # (on a quiet machine B is 5-10x A; other load preempts both, so only the direction
    # is asserted here)
    assert switches["median_b"] > switches["median_a"], switches
