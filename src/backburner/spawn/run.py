"""Children run to their end while we wait: a helper (stopped with its tree if we are
interrupted), a short system tool with its output captured, and the user's job in the
foreground with signals forwarded and its end mirrored exactly (`die_like`)."""

from __future__ import annotations

import logging
import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ..base import interrupts
from ..base.errors import StartError
from ..kernel import procfs, syscalls
from ..policy import grammar
from .launch import launch, our_error
from .outcome import Outcome

log = logging.getLogger(__name__)

FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
SI_KERNEL = 0x80  # si_code of signals the kernel generated itself (e.g. the tty's ^C)


def run_helper(argv: Sequence[str], *, cwd: str | None = None, stdout: int | None = None,
               stderr: int | None = None, env: Mapping[str, str] | None = None) -> Outcome:
    """Run a helper to completion (fio laying out files, an archive being made): in its own
    group, dying with us, and stopped with its whole tree if we are interrupted meanwhile."""
    child = launch(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr,
                   env=env, new_group=True, die_with_parent=True)
    try:
        out = child.wait()
    except BaseException:
        child.stop_tree(grace=2.0)
        raise
    assert out is not None
    return out


def run_foreground(argv: Sequence[str], *, policy: grammar.Policy | None = None,
                   cgroup_procs: Sequence[str] = (), adopt_orphans: bool = False,
                   before_exec: Callable[[], None] | None = None,
                   netns: str | None = None) -> Outcome:
    """Run a job with stdio and environment passed through; forward signals sent to us.

    Signals are blocked before the fork (the child unblocks them before exec), then taken
    with sigwaitinfo: no race with SIGCHLD and no handler running arbitrary code. A ^C from
    the terminal reaches the job directly (same process group), so signals the kernel sent
    (SI_KERNEL) are not forwarded again; a `kill` from another process (SI_USER) is.

    ``adopt_orphans``: we become the child subreaper of the job's tree, and reap its
    processes whose parents ended before them as they end. Above us, a tracer that is the
    first process of a PID namespace would otherwise inherit them, and perf takes the
    SIGCHLD of any of them for the end of its workload: it stopped recording there.
    """
    watched = {*FORWARDED_SIGNALS, signal.SIGCHLD}
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, watched)
    try:
        if adopt_orphans:
            try:
                syscalls.prctl(syscalls.PR_SET_CHILD_SUBREAPER, 1)
            except OSError as err:
                raise StartError(f"cannot adopt the orphans of {argv[0] if argv else '?'}: "
                                 f"{os.strerror(err.errno)}") from None
        child = launch(argv, policy=policy, cgroup_procs=cgroup_procs, before_exec=before_exec,
                       netns=netns)
        while True:
            done = child.poll()
            if done is not None:
                return done
            if adopt_orphans:
                _reap_adopted(child.pid)
            info = signal.sigwaitinfo(watched)
            if info.si_signo == signal.SIGCHLD:
                continue
            if info.si_code == SI_KERNEL and os.getpgid(child.pid) == os.getpgrp():
                log.debug("signal %d came from the kernel to our group: not forwarded",
                          info.si_signo)
                continue
            child.signal(info.si_signo)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)


def _reap_adopted(job: int) -> None:
    """Reap every ended child that is not `job` (orphans we adopted). Each is looked at
    first without reaping (WNOWAIT): the job's own status is `Child.poll`'s to take."""
    while True:
        try:
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return
        if info is None or info.si_pid in (0, job):
            return
        try:
            os.waitpid(info.si_pid, 0)
        except ChildProcessError:
            return


def kill_adopted() -> None:
    """SIGKILL and reap whatever is left of a job's tree after `run_foreground(...,
    adopt_orphans=True)` returned: as the subreaper, each leftover is our child by now, or
    becomes one when its parent is killed, generation by generation. What the end of a PID
    namespace does for its processes; only our own children are signalled (never -1)."""
    for _ in range(_ADOPTED_GENERATIONS):
        children = procfs.children_of(os.getpid())
        if not children:
            return
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in children:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass


#: How many generations of leftovers `kill_adopted` follows down.
_ADOPTED_GENERATIONS = 64


def die_like(outcome: Outcome) -> None:
    """End this process the way the job ended, so our parent's waitpid sees the same thing.

    A signal is re-raised on ourselves with its default action (core dumps suppressed: the
    job's own core, if any, is the one that matters); if we survive it, 128+N.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    if outcome.signal is None:
        os._exit(outcome.exit_code or 0)
    sig = outcome.signal
    try:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if sig != signal.SIGKILL:  # SIGKILL cannot be handled: signal() would raise
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {sig})
        os.kill(os.getpid(), sig)
        time.sleep(0.05)  # delivery is immediate for ourselves; this only covers odd cases
    except (OSError, ValueError):
        pass
    os._exit(128 + sig)


@dataclass(frozen=True)
class ToolResult:
    status: int | None  # exit code; None if it timed out or was killed by a signal
    stdout: str
    stderr: str


def run_tool(argv: Sequence[str], timeout: float = 120.0,
             env: Mapping[str, str] | None = None, errors: str = "replace",
             before_exec: Callable[[], None] | None = None) -> ToolResult:
    """Run a short system tool (losetup, mount, mkfs) to completion, capturing its output.

    The tool dies with us and is killed with its group when we are interrupted (^C,
    SIGTERM) while it runs: no mkfs or fio keeps going after we have given up on it.
    Raises FileNotFoundError when the tool is not installed, like subprocess does. `env`
    adds to (or overrides) our environment; `errors` says how to decode its output: by
    default "replace", as tools echo names (a file's, an interface's) that may be any
    bytes, and a message must never end in a UnicodeDecodeError. `before_exec` runs in
    the child just before exec (after the parent-death signal is set).
    """
    parent = os.getpid()

    def die_with_parent() -> None:
        syscalls.prctl(syscalls.PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:
            os._exit(1)
        if before_exec is not None:  # e.g. perf's own tracefs (system.perf_namespace)
            try:
                before_exec()
            except BaseException as err:  # noqa: BLE001 - named to the parent, then raised
                os.write(wfd, f"{type(err).__name__}: {err}".encode()[:1000])
                raise

    rfd, wfd = os.pipe2(os.O_CLOEXEC)
    proc: subprocess.Popen[str] | None = None
    try:
        # A signal while Popen forks is held until it returns: our handler raising inside
        # one of Python's after-fork callbacks (logging's lock) is printed and dropped, so
        # a SIGTERM was lost. Raised when the block ends, it stops the tool below.
        with interrupts.deferred():
            proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    errors=errors, process_group=0, preexec_fn=die_with_parent,
                                    env={**os.environ, **env} if env is not None else None)
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        assert proc is not None
        _kill_group(proc.pid)
        out, err = proc.communicate()
        return ToolResult(None, out, err)
    except subprocess.SubprocessError:  # the pre-exec hook failed: say what it said
        os.close(wfd)
        wfd = -1
        detail = os.read(rfd, 1000).decode(errors="replace") or "unknown error"
        raise our_error(detail) or StartError(
            f"{argv[0]}: could not be set up before it started: {detail}") from None
    except BaseException:
        if proc is not None:
            _kill_group(proc.pid)
            proc.wait()
        raise
    finally:
        for fd in (rfd, wfd):
            if fd >= 0:
                os.close(fd)
    return ToolResult(proc.returncode if proc.returncode >= 0 else None, out, err)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
