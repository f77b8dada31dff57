"""`backburner run` through the real CLI: exit status mirrored exactly, signals forwarded,
stdio and environment passed through, errors as one line with a distinct status."""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import (
    BB,
    FORWARDED,
    RUN_EXIT_CODES,
    SEGFAULT,
    TIMEOUT,
    TRAP_JOB,
    Result,
    bb,
    one_line_error,
    raw_status,
    run_shell_statuses,
    run_signal_deaths,
    wait_for,
)

import backburner
from backburner.base import errors
from backburner.kernel import priorities

PY = sys.executable
RUN_OWN = 125  # run's own failures, as nice, env, chroot and timeout report theirs
pytestmark = pytest.mark.timeout(60)  # a hang fails fast instead of at 300 s


# --- exit status --------------------------------------------------------------------------


@pytest.mark.parametrize("code", RUN_EXIT_CODES)
def test_exit_code_mirrored(state_dir: Path, code: int) -> None:
    r = bb("run", "--", "sh", "-c", f"exit {code}")
    assert r.returncode == code
    assert r.stderr == b""


@pytest.mark.parametrize("job, sig", run_signal_deaths(PY))
def test_signal_death_mirrored(state_dir: Path, job: list[str], sig: int) -> None:
    r = bb("run", "--", *job)
    assert r.returncode == -sig  # backburner itself died of the signal (WIFSIGNALED)


@pytest.mark.parametrize("job, shown", run_shell_statuses(PY))
def test_shell_sees_128_plus_signal(state_dir: Path, job: list[str], shown: int) -> None:
    script = '"$@"; echo "status=$?"'
    r = subprocess.run(["sh", "-c", script, "sh", *BB, "run", "--", *job],
                       capture_output=True, timeout=TIMEOUT)
    assert r.stdout.decode().split() == [f"status={shown}"]


def test_exit_139_on_purpose_is_an_exit_not_a_signal(state_dir: Path) -> None:
    with subprocess.Popen([*BB, "run", "--", "sh", "-c", "exit 139"]) as proc:
        status = raw_status(proc)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 139
    assert not os.WIFSIGNALED(status)


def test_no_core_dump_of_backburner_itself(state_dir: Path, tmp_path: Path) -> None:
    """backburner may dump core (RLIMIT_CORE unlimited); the job may not. After the job's
    segfault, backburner dies of SIGSEGV too, but without a core of its own."""

    def allow_core() -> None:
        resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))

    job = "import ctypes, resource; resource.setrlimit(resource.RLIMIT_CORE, (0, 0)); " + SEGFAULT
    with subprocess.Popen([*BB, "run", "--", PY, "-c", job], cwd=tmp_path,
                          preexec_fn=allow_core) as proc:
        status = raw_status(proc)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGSEGV
    assert not os.WCOREDUMP(status)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("core")]


def test_command_not_found_127(state_dir: Path) -> None:
    r = bb("run", "--", "no-such-command-bb-test")
    assert r.returncode == 127
    assert "no-such-command-bb-test: command not found" in one_line_error(r)


def test_not_executable_126(state_dir: Path, tmp_path: Path) -> None:
    plain = tmp_path / "plain-file"
    plain.write_text("#!/bin/sh\nexit 0\n")
    plain.chmod(0o644)
    for target in (plain, tmp_path):  # a file without the x bit; a directory
        r = bb("run", "--", str(target))
        assert r.returncode == 126, (target, r.err)
        assert "cannot execute" in one_line_error(r)


# --- signals sent to backburner reach the job -------------------------------------------

@pytest.mark.parametrize("sig", FORWARDED, ids=lambda s: s.name)
def test_signal_forwarded_to_job(state_dir: Path, tmp_path: Path, sig: signal.Signals) -> None:
    out = tmp_path / "got"
    with subprocess.Popen([*BB, "run", "--", PY, "-c", TRAP_JOB, str(out)]) as proc:
        wait_for(Path(f"{out}.ready").exists, what="the job's traps")
        os.kill(proc.pid, sig)
        proc.wait(timeout=TIMEOUT)
    assert out.read_text() == sig.name
    assert proc.returncode == 40 + sig


# --- stdio and environment --------------------------------------------------------------

ECHO_JOB = r"""
import os, sys
data = sys.stdin.buffer.read()
sys.stdout.buffer.write(data[::-1])
sys.stderr.buffer.write(b"E:" + os.environb[b"BB_TEST_VAR"])
"""


def test_stdio_and_environment_pass_through(state_dir: Path) -> None:
    data = bytes(range(256)) * 64 + b"\x00\r\n\xff"
    var = "value with spaces, \u00fcnicode and $dollar"
    env = {**os.environ, "BB_TEST_VAR": var}
    r = bb("run", "--", PY, "-c", ECHO_JOB, input=data, env=env)
    assert r.returncode == 0
    assert r.stdout == data[::-1]
    assert r.stderr == b"E:" + var.encode()


# --- errors: one line, distinct status, nothing changed ----------------------------------


def _nothing_changed(result: Result, state_dir: Path, marker: Path) -> None:
    assert not marker.exists(), "the job ran"
    journals = state_dir / "journal"
    assert not (journals.is_dir() and list(journals.iterdir()))
    for ctrl in ("blkio", "cpu"):
        assert not Path(f"/sys/fs/cgroup/{ctrl}/backburner/run-{result.pid}").exists()


@pytest.mark.parametrize(
    "options, words",
    [
        (["--io", "bogus"], "unknown IO class"),
        (["--io", "idle:3"], "takes no level"),
        (["--io", "be:9"], "unknown IO class"),
        (["--cpu", "fast"], "unknown CPU policy"),
        (["--cpu", "nice:40"], "out of range"),
        (["--io-weight", "0"], "IO weight 0 out of range"),
        (["--io-weight", "1001"], "IO weight 1001 out of range"),
        (["--cpu-weight", "10001"], "CPU weight 10001 out of range"),
        (["--policy", "nosuch"], "unknown policy"),
        (["--no-cgroup", "--io-weight", "10"], "an IO weight needs a cgroup"),
        (["--no-cgroup", "--policy", "cpu-weight=50"], "a CPU weight needs a cgroup"),
        (["--no-cgroup", "--policy", "background", "--io-weight", "20", "--cpu-weight", "30"],
         "an IO weight and a CPU weight need a cgroup"),
        (["--policy", "flush-behind"], "flush-behind writes the job's files at its IO class"),
        (["--policy", "io=idle,flush-behind=yes"], "use on or off"),
        (["--pid", "1", "--policy", "io=idle,flush-behind"], "not of --pid"),
        (["--policy", "io=idle,throttle"], "'throttle' in 'io=idle,throttle' is not kept by "
         "a process or unit: a running backburner carries it out"),
    ],
)
def test_usage_errors_125(state_dir: Path, tmp_path: Path, options: list[str],
                          words: str) -> None:
    marker = tmp_path / "ran"
    r = bb("run", *options, "--", "touch", str(marker))
    assert r.returncode == RUN_OWN == 125
    assert words in one_line_error(r)
    _nothing_changed(r, state_dir, marker)


@pytest.mark.parametrize("args", [["--bogus"], ["--io"], ["--io-weight", "5", "--nope"]],
                         ids=["unknown option", "missing value", "unknown after a good one"])
def test_a_bad_option_is_one_line_and_125(state_dir: Path, tmp_path: Path,
                                          args: list[str]) -> None:
    marker = tmp_path / "ran"
    r = bb("run", *args, "--", "touch", str(marker))
    assert r.returncode == RUN_OWN and r.stdout == b""
    one_line_error(r)
    _nothing_changed(r, state_dir, marker)


def test_a_job_that_exits_64_is_not_runs_usage_error(state_dir: Path) -> None:
    """The job's 64 comes through as 64 and silent; run's own usage error is 125 and says
    so: a script can tell them apart."""
    job = bb("run", "--", "sh", "-c", "exit 64")
    own = bb("run", "--no-such-option", "--", "sh", "-c", "exit 64")
    assert (job.returncode, job.stderr) == (64, b"")
    assert own.returncode == RUN_OWN and "unrecognized arguments" in one_line_error(own)


def test_the_other_commands_keep_their_sysexits() -> None:
    assert bb("policies", "--bogus").returncode == errors.UsageError.exit_status == 64
    assert bb("restore", "--pid", "x").returncode == 64
    assert bb("--bogus").returncode == 64


def test_run_help_documents_the_statuses() -> None:
    r = bb("run", "--help")
    assert r.returncode == 0
    text = " ".join(r.out.split())
    for words in ("125 backburner run itself failed", "126 COMMAND was found but cannot",
                  "127 COMMAND was not found", "the job's exit status, exactly"):
        assert words in text


def _free_pid() -> int:
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    return next(p for p in range(pid_max - 1, 1, -1) if not Path(f"/proc/{p}").exists())


def test_pid_that_does_not_exist_125(state_dir: Path, tmp_path: Path) -> None:
    pid = _free_pid()
    r = bb("run", "--pid", str(pid), "--io", "idle", "--cpu", "idle")
    assert r.returncode == RUN_OWN
    assert f"no process with PID {pid}" in one_line_error(r)
    _nothing_changed(r, state_dir, tmp_path / "ran")


@pytest.mark.root
def test_run_pid_with_a_weight_and_no_cgroup_is_refused(state_dir: Path) -> None:
    """`--no-cgroup --io-weight 10` used to say "N threads re-prioritised" and change nothing."""
    with subprocess.Popen(["sleep", "30"]) as target:
        try:
            r = bb("run", "--pid", str(target.pid), "--no-cgroup", "--io-weight", "10")
            assert r.returncode == RUN_OWN
            assert "an IO weight needs a cgroup" in one_line_error(r)
            _nothing_changed(r, state_dir, state_dir / "ran")
            r = bb("run", "--pid", str(target.pid), "--no-cgroup", "--policy", "background")
            assert r.returncode == 0, r.err  # the policy's IO class and CPU policy only
            assert "applying io idle; cpu idle\n" in r.err and "weight" not in r.err
            assert "cgroup" not in r.err.splitlines()[-1]
            assert priorities.ioprio_get(target.pid).klass == "idle"
            assert os.sched_getscheduler(target.pid) == os.SCHED_IDLE
        finally:
            target.kill()


def test_run_with_a_policy_and_no_cgroup_says_what_it_applies(state_dir: Path) -> None:
    r = bb("run", "-v", "--no-cgroup", "--policy", "background", "--", "true")
    assert r.returncode == 0, r.err
    assert "applying io idle; cpu idle\n" in r.err and "weight" not in r.err


def _python_for_nobody(env: dict[str, str]) -> str:
    """A python >= 3.11 the nobody user can execute (a venv under /root may not be)."""
    for cand in (sys.executable, shutil.which("python3") or "", "/usr/bin/python3"):
        if cand and subprocess.run(
            [*AS_NOBODY, cand, "-c", "import sys, backburner; assert sys.version_info >= (3, 11)"],
            env=env, cwd="/", capture_output=True, timeout=TIMEOUT,
        ).returncode == 0:
            return cand
    pytest.fail("no python that the nobody user can run with backburner importable")


# Not root (euid 65534), but allowed to read and enter any folder, so the test works wherever
# CI put the clone and its venv (under /root, mode 0700, say): it still cannot write state.
AS_NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
             "--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search"]


@pytest.mark.root
def test_not_root_125(tmp_path: Path) -> None:
    shared = Path(os.environ.get("TMPDIR", "/tmp")) / f"bb-nobody-{os.getpid()}"
    shared.mkdir(mode=0o777)
    try:
        shared.chmod(0o1777)
        state = shared / "state"
        marker = shared / "ran"
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
               "PYTHONPATH": str(Path(backburner.__file__).resolve().parents[1]),
               "BACKBURNER_STATE_DIR": str(state)}
        python = _python_for_nobody(env)
        with subprocess.Popen(
            [*AS_NOBODY, python, "-m", "backburner", "run", "--policy", "background", "--",
             "touch", str(marker)],
            env=env, cwd="/", stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        ) as proc:
            out, err = proc.communicate(timeout=TIMEOUT)
        r = Result(proc.pid, proc.returncode, out, err)
        assert r.returncode == RUN_OWN  # not 77: that could be the job's
        assert "needs root" in one_line_error(r)
        _nothing_changed(r, state, marker)
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def test_exit_statuses_distinct() -> None:
    """One status per kind of failure; only "needs root" and "access denied" (a database's
    credentials) share 77, EX_NOPERM, on purpose."""
    by_status: dict[int, list[str]] = {}
    for name, status in errors.EXIT_STATUSES.items():
        by_status.setdefault(status, []).append(name)
    shared = {s: sorted(n) for s, n in by_status.items() if len(n) > 1}
    assert shared == {77: ["AccessError", "NotRootError"]}
    assert {errors.UsageError.exit_status, errors.NotFoundError.exit_status,
            errors.UnavailableError.exit_status, errors.NotRootError.exit_status} == {
        64, 66, 69, 77}


COUNTER = r"""
import signal, sys, time
seen = []
signal.signal(signal.SIGINT, lambda s, f: seen.append(s))
print("ready", flush=True)
deadline = time.monotonic() + 3
while time.monotonic() < deadline and len(seen) < 2:
    time.sleep(0.05)
print(f"sigints={len(seen)}", flush=True)
sys.exit(7)
"""


def test_terminal_ctrl_c_reaches_the_job_once(state_dir: Path) -> None:
    """A ^C typed on a terminal goes to the whole foreground process group: the job gets it
    from the kernel directly, so backburner must not forward it a second time."""
    import pty
    import select
    import termios

    master, slave = pty.openpty()
    attrs = termios.tcgetattr(slave)
    attrs[3] |= termios.ISIG  # ^C on this terminal raises SIGINT in its foreground group
    termios.tcsetattr(slave, termios.TCSANOW, attrs)

    def own_terminal() -> None:
        os.setsid()
        import fcntl

        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen([*BB, "run", "--", PY, "-c", COUNTER], stdin=slave, stdout=slave,
                            stderr=slave, preexec_fn=own_terminal, close_fds=True)
    os.close(slave)
    out = b""
    try:
        while b"ready" not in out:
            ready, _, _ = select.select([master], [], [], TIMEOUT)
            assert ready, out
            out += os.read(master, 1024)
        os.write(master, b"\x03")
        while b"\n" not in out.partition(b"sigints=")[2]:
            ready, _, _ = select.select([master], [], [], TIMEOUT)
            assert ready, out
            try:
                out += os.read(master, 1024)
            except OSError:
                break
        assert proc.wait(timeout=TIMEOUT) == 7
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    assert b"sigints=1" in out, out


def test_a_run_without_net_loads_no_network_policy() -> None:
    """`run` without --net imports none of the network policy (`net/`: its attribution,
    pacer and classes): every `run` would pay for it, in the suite and in the emulated
    guest."""
    code = "import sys, backburner.run.job; print(' '.join(sorted(sys.modules)))"
    done = subprocess.run([PY, "-I", "-c", code], cwd="/", capture_output=True, text=True,
                          timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr
    modules = done.stdout.split()
    assert "backburner.run.job" in modules
    assert [m for m in modules if m.startswith("backburner.net.")] == []
