"""spawn: Outcome decoding and the job's own rusage, wait with a timeout, stop's escalation,
and launch errors named in one line."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import TIMEOUT, plant_modules

from backburner import spawn
from backburner.base.errors import (
    CommandNotExecutable,
    CommandNotFound,
    StartError,
    SystemStateError,
    UnavailableError,
)
from backburner.kernel import procfs

PY = sys.executable
pytestmark = pytest.mark.timeout(60)  # a hang fails fast instead of at 300 s


def _run(argv: list[str], **kw: object) -> spawn.Outcome:
    child = spawn.launch(argv, **kw)
    out = child.wait(TIMEOUT)
    if out is None:
        child.stop(0.1)
        raise AssertionError(f"{argv} did not end")
    return out


def test_outcome_of_exit_code() -> None:
    out = _run(["sh", "-c", "exit 3"])
    assert (out.exit_code, out.signal, out.core_dumped) == (3, None, False)
    assert out.shell_status == 3 and not out.ok
    assert out.describe() == "exited with status 3"
    assert _run(["true"]).ok


def test_outcome_of_signal() -> None:
    out = _run(["sh", "-c", "kill -TERM $$"])
    assert (out.exit_code, out.signal) == (None, signal.SIGTERM)
    assert out.shell_status == 143
    assert out.describe() == "killed by SIGTERM"


def test_rusage_cpu_time_is_the_jobs_own() -> None:
    burn = ("import resource\n"
            "while resource.getrusage(resource.RUSAGE_SELF).ru_utime < 0.2:\n"
            "    for _ in range(20000): pass\n")
    out = _run([PY, "-c", burn])
    assert out.ok
    assert out.user_s > 0.1
    assert out.wall_s >= out.user_s * 0.9
    idle = _run(["sleep", "0.2"])
    assert idle.user_s < 0.1 and idle.wall_s >= 0.2


# ru_maxrss of an exec'd child is at least the RSS of the process it was forked from (Linux
# keeps the pre-exec mm's high-water mark), so measure from a small fresh parent.
RSS = r"""
import sys
import threading
from backburner.kernel import procfs
from backburner import spawn
for code in ("pass", "b = b'x' * (100 << 20)"):
    print(spawn.launch([sys.executable, "-c", code]).wait(30).max_rss_kb)
"""


def test_rusage_max_rss_grows_with_allocation() -> None:
    r = subprocess.run([PY, "-c", RSS], capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    small, big = map(int, r.stdout.split())
    assert big >= 100 * 1024
    assert big - small >= 90 * 1024


def test_wait_timeout_then_outcome() -> None:
    child = spawn.launch(["sleep", "0.4"])
    start = time.monotonic()
    assert child.wait(0.1) is None
    waited = time.monotonic() - start
    assert 0.09 <= waited < 0.4
    assert child.poll() is None
    out = child.wait(TIMEOUT)
    assert out is not None and out.ok
    assert out.wall_s >= 0.4
    assert child.wait(0) is out and child.poll() is out  # reaped once, remembered


IGNORES_TERM = r"""
import signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("ready", flush=True)
time.sleep(30)
"""


def test_stop_escalates_to_sigkill() -> None:
    child = spawn.launch([PY, "-c", IGNORES_TERM], stdout=subprocess.PIPE)
    assert child.popen.stdout is not None
    assert child.popen.stdout.readline() == b"ready\n"
    start = time.monotonic()
    out = child.stop(grace=0.3)
    assert out.signal == signal.SIGKILL
    assert time.monotonic() - start >= 0.29
    child.popen.stdout.close()


@pytest.mark.parametrize(("state", "dying"), [("D", True), ("R", True), ("S", False)])
def test_stop_tree_waits_for_killed_processes_on_their_way_out_only(
        monkeypatch: pytest.MonkeyPatch, state: str, dying: bool) -> None:
    """A survivor on its way out after the SIGKILL (in uninterruptible IO, as a package
    manager's syncfs on a slow disk; or still in the kernel with the kill pending) is
    waited for past `verify_s`, up to `io_drain_s`; any other survivor is an error at
    `verify_s`, named with its state. Survivors are simulated: the kernel's D state cannot
    be made on demand (`procfs.on_its_way_out` is tested on real processes)."""
    from backburner.spawn import child as child_mod

    child = spawn.launch(["sleep", "30"])
    gone_at = time.monotonic() + 0.6
    monkeypatch.setattr(child_mod, "_survivors",
                        lambda _g, _t: [4242] if time.monotonic() < gone_at else [])
    monkeypatch.setattr(procfs, "state_of", lambda pid: state)
    monkeypatch.setattr(procfs, "on_its_way_out", lambda pid: dying)
    start = time.monotonic()
    if dying:
        child.stop_tree(grace=1.0, verify_s=0.1, io_drain_s=5.0)
        assert 0.55 < time.monotonic() - start < 3
    else:
        with pytest.raises(SystemStateError, match=rf"processes 4242 \({state}\) of"):
            child.stop_tree(grace=1.0, verify_s=0.1, io_drain_s=5.0)
        assert time.monotonic() - start < 0.5


def test_stop_is_sigterm_for_a_polite_job() -> None:
    child = spawn.launch(["sleep", "30"])
    start = time.monotonic()
    out = child.stop(grace=10)
    assert out.signal == signal.SIGTERM
    assert time.monotonic() - start < 5


SIGNAL_AFTER_REAP = r'''
import os, signal, sys
from backburner.base import interrupts
from backburner import spawn
interrupts.install()
child = spawn.launch(["sh", "-c", "exit 7"])
os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # ended, not reaped
real = os.wait4

def wait4(pid, flags):  # the signal lands just after the kernel handed over the status
    got = real(pid, flags)
    os.kill(os.getpid(), int(sys.argv[1]))
    return got

os.wait4 = wait4
try:
    child.poll() if sys.argv[2] == "poll" else child.wait()
    print("not interrupted")
except (KeyboardInterrupt, interrupts.Terminated) as why:
    print(type(why).__name__, child.outcome and child.outcome.exit_code, child.stop().exit_code)
'''


@pytest.mark.parametrize(("sig", "how"), [(signal.SIGINT, "poll"), (signal.SIGTERM, "wait")])
def test_a_signal_right_after_the_reap_keeps_the_outcome(sig: int, how: str) -> None:
    """The interrupt is raised, but the status wait4 returned is kept, so the stop that
    unwinding does finds the child ended with 7 instead of failing on a child already gone."""
    res = subprocess.run([PY, "-c", SIGNAL_AFTER_REAP, str(int(sig)), how], capture_output=True,
                         text=True, timeout=TIMEOUT)
    raised = "KeyboardInterrupt" if sig == signal.SIGINT else "Terminated"
    assert res.stdout == f"{raised} 7 7\n", res.stderr


SIGNAL_DURING_TOOL_FORK = r'''
import logging, os, signal
from backburner.base import interrupts
from backburner.kernel import procfs
from backburner import spawn
interrupts.install()
logging.getLogger("x").info("logging's after-fork callbacks are registered")
armed = [True]

def after_fork_in_parent():  # SIGTERM lands while Popen's fork is returning in the parent
    if armed[0]:
        armed[0] = False
        os.kill(os.getpid(), signal.SIGTERM)

os.register_at_fork(after_in_parent=after_fork_in_parent)
try:
    spawn.run_tool(["sleep", "5"])
    print("lost")
except interrupts.Terminated:
    left = [p for p in procfs.children_of(os.getpid())]
    print("raised", left)
'''


def test_a_signal_while_a_tool_forks_is_raised_and_the_tool_stopped() -> None:
    """SIGTERM arriving in Python's after-fork callbacks of run_tool's Popen was printed as
    "Exception ignored" and lost: `govern net` paced on until SIGKILL (3 of 71 in a sweep)."""
    res = subprocess.run([PY, "-c", SIGNAL_DURING_TOOL_FORK], capture_output=True, text=True,
                         timeout=TIMEOUT)
    assert res.stdout == "raised []\n", (res.stdout, res.stderr)
    assert "Exception ignored" not in res.stderr


def test_launch_command_not_found() -> None:
    with pytest.raises(CommandNotFound) as info:
        spawn.launch(["no-such-command-bb-test"])
    assert info.value.exit_status == 127
    assert str(info.value) == "no-such-command-bb-test: command not found"


def test_launch_not_executable(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.write_text("exit 0\n")
    for target in (str(plain), str(tmp_path)):
        with pytest.raises(CommandNotExecutable) as info:
            spawn.launch([target])
        assert info.value.exit_status == 126
        assert "cannot execute" in str(info.value)


def test_launch_names_a_failure_before_exec(tmp_path: Path) -> None:
    missing = str(tmp_path / "no-cgroup" / "cgroup.procs")
    with pytest.raises(SystemStateError) as info:
        spawn.launch(["true"], cgroup_procs=[missing])
    assert "FileNotFoundError" in str(info.value) and "\n" not in str(info.value)


def test_a_nested_transaction_stops_only_its_own_children(state_dir: Path) -> None:
    """Closing an inner transaction (e.g. mounting tracefs for one trial) must not stop the
    outer one's load; the outer one's end stops both."""
    from backburner import system

    with system.Transaction("outer"):
        load = spawn.launch(["sleep", "60"])
        with system.Transaction("inner"):
            helper = spawn.launch(["sleep", "60"])
        assert helper.poll() is not None  # the inner one's child is stopped with it
        assert load.poll() is None  # the outer one's is still running
    assert load.poll() is not None


def test_fork_call_runs_the_function_in_a_fork_and_mirrors_its_value(tmp_path: Path) -> None:
    """The child is a fork (no new interpreter: it sees what we set before it), its value
    is its exit status, and an exception is 70, never our clean-up running twice."""
    marker = tmp_path / "seen"
    loaded = {"here": "before the fork"}

    def work() -> int:
        marker.write_text(loaded["here"])
        return 3

    child = spawn.fork_call(work, name="bb-test")
    out = child.wait(TIMEOUT)
    assert out is not None and out.exit_code == 3
    assert marker.read_text() == "before the fork"

    def boom() -> int:
        raise RuntimeError("in the child")

    out = spawn.fork_call(boom, name="bb-test").wait(TIMEOUT)
    assert out is not None and out.exit_code == 70
    out = spawn.fork_call(lambda: "not a status", name="bb-test").wait(TIMEOUT)  # type: ignore
    assert out is not None and out.exit_code == 70


def test_fork_call_child_holds_none_of_our_descriptors_and_takes_policy_and_name() -> None:
    from backburner.kernel import priorities, procfs
    from backburner.policy import grammar

    rfd, wfd = os.pipe()  # inheritable: a fork keeps it unless the child closes it
    try:
        policy = grammar.Policy("t", io=priorities.IOPrio("idle"),
                                 cpu=priorities.CPUPolicy("idle"))
        child = spawn.fork_call(lambda: (time.sleep(30), 0)[1], name="bb-test-child",
                                policy=policy, new_group=True, detached=True)
        try:
            deadline = time.monotonic() + TIMEOUT
            while procfs.comm_of(child.pid) != "bb-test-child":
                assert time.monotonic() < deadline, "the child never named itself"
                time.sleep(0.01)
            fds = sorted(int(n) for n in os.listdir(f"/proc/{child.pid}/fd"))
            assert fds == [0, 1, 2], fds
            assert os.readlink(f"/proc/{child.pid}/fd/1") == "/dev/null"
            assert priorities.ioprio_get(child.pid) == priorities.IOPrio("idle")
            assert os.sched_getscheduler(child.pid) == os.SCHED_IDLE
            assert os.getpgid(child.pid) == child.pid
        finally:
            child.stop(grace=1, group=True)
    finally:
        os.close(rfd)
        os.close(wfd)


def test_fork_call_that_cannot_fork_is_one_line_and_leaves_signals_as_they_were(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    from backburner.base.errors import StartError

    def no_fork() -> int:
        raise OSError(errno.EAGAIN, "Resource temporarily unavailable")

    before = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    monkeypatch.setattr(os, "fork", no_fork)
    with pytest.raises(StartError, match="^cannot start bb-test: Resource temporarily"):
        spawn.fork_call(lambda: 0, name="bb-test")
    assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == before


ADOPTING = r"""
import sys
import threading
from backburner.kernel import procfs
from backburner import spawn
out = spawn.run_foreground(["sh", "-c", sys.argv[1]], adopt_orphans=True)
print(out.exit_code, flush=True)
"""


def _children(pid: int) -> list[tuple[int, str]]:
    """(pid, state) of every process whose parent is pid, zombies included."""
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append((int(entry), fields[0]))
    return found


def test_run_foreground_adopts_the_jobs_orphans_and_reaps_them(tmp_path: Path) -> None:
    """A process whose parent ended goes to us (the subreaper), not to whatever is above
    (a tracer that takes its SIGCHLD for the end of its workload), and is reaped as it
    ends: no zombie piles up while the job runs."""
    ppid = tmp_path / "ppid"
    ready = tmp_path / "ready"
    job = (f"(sh -c 'sleep 0.2; cut -d\" \" -f4 /proc/$$/stat > {ppid}' &); "
           f"touch {ready}; sleep 1.5; exit 3")
    with subprocess.Popen([PY, "-c", ADOPTING, job], stdout=subprocess.PIPE,
                          text=True) as proc:
        deadline = time.monotonic() + TIMEOUT
        while not (ppid.exists() and ppid.read_text().strip()) and \
                time.monotonic() < deadline:
            time.sleep(0.01)
        assert int(ppid.read_text()) == proc.pid  # the orphan was ours
        time.sleep(0.3)  # it has ended; the job still runs
        assert [state for _, state in _children(proc.pid)] == ["S"]  # the job alone
        out, _ = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 0 and out == "3\n"


def test_signal_process_only_reaches_the_process_it_was_meant_for() -> None:
    child = spawn.launch([PY, "-c", "import time; time.sleep(30)"])
    try:
        start = procfs.start_time(child.pid)
        assert start is not None
        assert not spawn.signal_process(child.pid, start + 1, signal.SIGTERM)  # another
        assert child.wait(0.2) is None
        assert spawn.signal_process(child.pid, start, signal.SIGTERM)
        out = child.wait(TIMEOUT)
        assert out is not None and out.signal == signal.SIGTERM
        assert not spawn.signal_process(child.pid, start, signal.SIGTERM)  # gone
    finally:
        child.stop(0.1)


def test_a_child_joins_its_groups_holding_none_of_our_sockets(tmp_path: Path) -> None:
    """Joining a net_cls group (cgroup v1) gives the joining task's sockets the group's
    class id: the child must not hold ours when it joins (the pacer's echo socket would
    become the job's), only those it is passed. Its "cgroup.procs" here is a FIFO, so the
    child waits in its open while we look at its descriptors."""
    fifo = tmp_path / "cgroup.procs"
    os.mkfifo(fifo)
    started: dict[str, spawn.Child] = {}
    with socket.socket() as mine, socket.socket() as passed:
        worker = threading.Thread(target=lambda: started.setdefault("child", spawn.launch(
            ["true"], cgroup_procs=[str(fifo)], pass_fds=[passed.fileno()])))
        others = set(procfs.descendants_of(os.getpid()))  # earlier tests' stragglers
        worker.start()
        held = _held_while_joining(os.getpid(), others)
        with open(fifo) as f:  # lets the child write its pid and go on
            written = f.read()
        worker.join(TIMEOUT)
        assert started["child"].wait(TIMEOUT) is not None
        ino = {name: f"socket:[{os.fstat(s.fileno()).st_ino}]"
               for name, s in (("mine", mine), ("passed", passed))}
        assert ino["mine"] not in held and ino["passed"] in held, (ino, held)
        assert written.strip().isdigit()


def _held_while_joining(parent: int, others: set[int]) -> set[str]:
    """What our new child (a descendant of `parent` not among `others`) holds once it
    sleeps in the FIFO's open (nothing else in its pre-exec hook sleeps)."""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        for pid in set(procfs.descendants_of(parent)) - others:
            try:
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
                if state == "S":
                    fds = Path(f"/proc/{pid}/fd")
                    return {os.readlink(fds / fd) for fd in os.listdir(fds)}
            except OSError:
                continue
        time.sleep(0.01)
    raise AssertionError("the child never waited in the FIFO's open")


# --- our own helper interpreters never import from the caller's directory --------------------

SRC = Path(spawn.__file__).parent.parent
def _helper_modules() -> set[str]:
    """Every module src/ starts as a helper: the first argument of each python_module call
    (a call whose module is not a literal would escape this list, so none may exist)."""
    import ast

    found: set[str] = set()
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute | ast.Name) \
                    and getattr(node.func, "attr", getattr(node.func, "id", "")) == "python_module":
                first = node.args[0] if node.args else None
                assert isinstance(first, ast.Constant), f"{path}:{node.lineno}: not a literal"
                found.add(first.value)
    return found


def test_the_scan_finds_every_helper_entry_point() -> None:
    assert {"backburner", "backburner.trace.shim", "backburner.slowdisk.daemon",
            "backburner.net.server", "backburner.net.client", "backburner.net.tcpopts",
            "backburner.bench.installer", "backburner.bench.copier"} <= _helper_modules()


def test_python_module_is_isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    argv = spawn.python_module("backburner.x", "a")
    assert argv == [sys.executable, "-I", "-m", "backburner.x", "a"]
    monkeypatch.chdir(tmp_path)
    out = subprocess.run([*argv[:2], "-c", "import sys; print(sys.path)"],
                         capture_output=True, text=True, check=True)
    assert str(tmp_path) not in out.stdout and "''" not in out.stdout


@pytest.mark.parametrize("module", sorted(_helper_modules()))
@pytest.mark.parametrize("cwd_given", [False, True], ids=["our-cwd", "cwd-given"])
def test_no_helper_imports_a_module_planted_in_the_callers_directory(
        module: str, cwd_given: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each entry point, started as its caller starts it from a directory a local user
    filled with modules: none of them is imported (with `cwd` given, -I alone keeps them out)."""
    planted, marker = tmp_path / "planted", tmp_path / "imported"
    plant_modules(planted, marker)
    monkeypatch.chdir(planted)
    monkeypatch.setenv("PYTHONPATH", str(planted))  # ignored too
    child = spawn.launch(spawn.python_module(module, "--no-such-option-of-ours"),
                         cwd=str(planted) if cwd_given else None, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if child.wait(TIMEOUT) is None:
        child.stop(0.1)
    assert not marker.exists(), marker.read_text()


def test_the_planted_modules_are_imported_without_isolation(tmp_path: Path) -> None:
    """The negative control: plain `python -m` from that directory imports them."""
    planted, marker = tmp_path / "planted", tmp_path / "imported"
    plant_modules(planted, marker)
    subprocess.run([PY, "-m", "backburner.net.client"], cwd=planted, timeout=TIMEOUT,
                   capture_output=True, check=False)
    assert "backburner/__init__.py" in marker.read_text()


def _printed(argv: list[str]) -> list[str]:
    child = spawn.launch(argv, stdout=subprocess.PIPE)
    assert child.popen.stdout is not None
    out = child.popen.stdout.read().decode().split()
    assert child.wait(TIMEOUT) is not None
    return out


def test_a_helper_starts_from_the_root_with_our_environment_the_users_command_does_not(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NOT_FOR_HELPERS", "x")
    monkeypatch.setenv("BACKBURNER_STATE_DIR", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    show = 'pwd; echo "${NOT_FOR_HELPERS:-unset}" "$BACKBURNER_STATE_DIR"'
    # the trace shim runs its command with the cwd and environment it was given itself
    shim = spawn.python_module("backburner.trace.shim", str(tmp_path / "result.json"), "--",
                               "sh", "-c", show)
    assert _printed(shim) == ["/", "unset", str(tmp_path)]
    assert _printed(["sh", "-c", show]) == [str(tmp_path), "x", str(tmp_path)]
    assert _printed([PY, "-c", f"import subprocess; subprocess.run(['sh', '-c', {show!r}])"]) \
        == [str(tmp_path), "x", str(tmp_path)]


def test_a_tool_that_prints_bytes_that_are_not_utf8_is_read_not_a_traceback() -> None:
    """`ip link show dev $'d\\xff0'` echoes the name: run_tool's strict decoding raised
    UnicodeDecodeError out of `run --net-dev`."""
    res = spawn.run_tool(["sh", "-c", r"printf 'd\377\376 out'; printf 'no d\377 here' >&2"])
    assert res.status == 0 and res.stdout == "d\ufffd\ufffd out"
    assert res.stderr == "no d\ufffd here"


def test_a_tools_pre_exec_hook_runs_in_the_tool_not_in_us(tmp_path: Path) -> None:
    """`before_exec` (perf's own tracefs) runs in the child just before exec."""
    here = os.getcwd()
    res = spawn.run_tool(["pwd"], before_exec=lambda: os.chdir(tmp_path))
    assert res.status == 0 and res.stdout == f"{tmp_path}\n" and os.getcwd() == here


KILL_ADOPTED = """
import os, time
from backburner import spawn
from backburner.kernel import procfs
out = spawn.run_foreground(["sh", "-c", "(sleep 30 & sleep 30) & sleep 30 & exit 3"],
                           adopt_orphans=True)
time.sleep(0.2)  # the subshell has handed its sleeps to us
left = len(procfs.descendants_of(os.getpid()))
spawn.kill_adopted()
print(out.exit_code, left, procfs.descendants_of(os.getpid()))
"""


def test_what_a_job_left_running_is_killed_generation_by_generation() -> None:
    """`trace`'s launcher: strace waits for every process it traces, so what the job left
    (here three sleeps, two of them grandchildren) must end with the job."""
    res = subprocess.run([PY, "-c", KILL_ADOPTED], capture_output=True, text=True,
                         timeout=TIMEOUT)
    assert res.stdout == "3 3 []\n", (res.stdout, res.stderr)


def _refuse(err: BaseException) -> Callable[[], None]:
    def hook() -> None:
        raise err
    return hook


def test_a_tools_failing_pre_exec_hook_is_named_in_one_error() -> None:
    """Ours as ours (perf's tracefs that cannot be mounted: UnavailableError, 69); any
    other as the tool that could not be set up, with what the hook said."""
    with pytest.raises(UnavailableError, match="^no tracefs here$"):
        spawn.run_tool(["true"], before_exec=_refuse(UnavailableError("no tracefs here")))
    with pytest.raises(StartError, match="^true: could not be set up before it started: "
                                         "OSError: bad hook$"):
        spawn.run_tool(["true"], before_exec=_refuse(OSError("bad hook")))


@pytest.mark.root
def test_a_private_tmp_shows_the_hosts_and_keeps_what_the_child_writes(
        tmp_path: Path, outside_tmp: Path) -> None:
    given = tmp_path / "given"
    given.write_text("host\n")
    new = Path("/tmp", f"backburner-test-{os.getpid()}-new")
    private = spawn.prepare_private_tmp(str(outside_tmp / "tmp"))
    script = (f'cat {given} && echo child >> {given} && echo made > {new} '
              '&& grep -c " /tmp " /proc/self/mountinfo')
    child = spawn.launch(["sh", "-c", script], stdout=subprocess.PIPE, private_tmp=private)
    assert child.popen.stdout is not None
    out = child.popen.stdout.read().decode()
    outcome = child.wait(TIMEOUT)
    assert outcome is not None and outcome.exit_code == 0, out
    before = Path("/proc/self/mountinfo").read_text().count(" /tmp ")
    assert out.split() == ["host", str(before + 1)]  # read through it; one more mount there
    assert given.read_text() == "host\n" and not new.exists()  # the host's /tmp as it was
    upper = Path(private, spawn.TMP_UPPER)
    assert (upper / new.name).read_text() == "made\n"
    assert (upper / given.relative_to("/tmp")).read_text() == "host\nchild\n"
    ours = Path("/proc/self/mountinfo").read_text()
    assert "overlay" not in [ln.split(" - ")[1].split()[0] for ln in ours.splitlines()
                             if ln.split()[4] == "/tmp"]  # it reached no one else


def test_a_private_tmp_refuses_a_path_mount_options_cannot_carry(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="cannot hold"):
        spawn.prepare_private_tmp(str(tmp_path / "a,b"))
    assert not (tmp_path / "a,b").exists()
    with pytest.raises(ValueError, match="no private_tmp"):
        spawn.launch(["true"], chroot=str(tmp_path), private_tmp=str(tmp_path))
