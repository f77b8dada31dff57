"""The only place that creates processes.

Priorities are applied in the child before exec; the parent waits with wait4(2) so every
job's own rusage comes back with its raw wait status (`Outcome`). `run_foreground` adds
what `backburner run` needs on top: signal forwarding and an exact mirror of the job's end.
"""

from __future__ import annotations

import errno
import logging
import os
import resource
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from . import priority
from .errors import (
    BackburnerError,
    CommandNotExecutable,
    CommandNotFound,
    NotRootError,
    SystemStateError,
)

log = logging.getLogger(__name__)

FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
SI_KERNEL = 0x80  # si_code of signals the kernel generated itself (e.g. the tty's ^C)


@dataclass(frozen=True)
class Outcome:
    """How a child ended, and what it alone consumed (rusage from wait4, not RUSAGE_CHILDREN)."""

    pid: int
    status: int  # raw wait status, as waitpid returned it
    exit_code: int | None
    signal: int | None
    core_dumped: bool
    wall_s: float
    user_s: float
    sys_s: float
    max_rss_kb: int
    in_blocks: int
    out_blocks: int
    started_at: float  # wall-clock epoch seconds, for the record
    # Linux keeps the pre-exec high-water mark in ru_maxrss, and a forked child starts with
    # its parent's RSS: max_rss_kb is only the job's own peak when it exceeds this value.
    launcher_rss_kb: int = 0
    # The rest of wait4's rusage, for `trace` (defaults keep older callers working).
    minflt: int = 0
    majflt: int = 0
    nvcsw: int = 0  # voluntary context switches: the job blocked
    nivcsw: int = 0  # involuntary: the job was preempted while it could have run

    @property
    def max_rss_is_own(self) -> bool:
        return self.max_rss_kb > self.launcher_rss_kb

    @property
    def shell_status(self) -> int:
        """What a shell's $? shows: the exit code, or 128+N for a signal."""
        return self.exit_code if self.exit_code is not None else 128 + (self.signal or 0)

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def describe(self) -> str:
        if self.signal is not None:
            name = signal.Signals(self.signal).name if self.signal in _SIGNUMS else self.signal
            core = " (core dumped)" if self.core_dumped else ""
            return f"killed by {name}{core}"
        return f"exited with status {self.exit_code}"

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


_SIGNUMS = {s.value for s in signal.Signals}


def decode(pid: int, status: int, ru: resource.struct_rusage, started_ns: int, ended_ns: int,
           started_at: float, launcher_rss_kb: int = 0) -> Outcome:
    signaled = os.WIFSIGNALED(status)
    return Outcome(
        pid=pid,
        status=status,
        exit_code=os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
        signal=os.WTERMSIG(status) if signaled else None,
        core_dumped=signaled and os.WCOREDUMP(status),
        wall_s=(ended_ns - started_ns) / 1e9,
        user_s=ru.ru_utime,
        sys_s=ru.ru_stime,
        max_rss_kb=ru.ru_maxrss,
        in_blocks=ru.ru_inblock,
        out_blocks=ru.ru_oublock,
        started_at=started_at,
        launcher_rss_kb=launcher_rss_kb,
        minflt=ru.ru_minflt,
        majflt=ru.ru_majflt,
        nvcsw=ru.ru_nvcsw,
        nivcsw=ru.ru_nivcsw,
    )


def start_time(pid: int) -> int | None:
    """Start time of a live process (field 22 of /proc/PID/stat), which tells it apart from
    a recycled PID; None when it is gone or a zombie (it has released everything, and its
    parent, maybe PID 1, may reap it late)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] in ("Z", "X") else int(fields[19])


def _own_rss_kb() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024
    except OSError:
        return 0


class Child:
    """A launched process. Reaped only through `wait`/`poll` so that wait4's rusage is ours."""

    def __init__(self, popen: subprocess.Popen[bytes], started_ns: int, started_at: float):
        self.popen = popen
        self.pid = popen.pid
        self.started_ns = started_ns
        self.started_at = started_at
        self.launcher_rss_kb = _own_rss_kb()
        self.outcome: Outcome | None = None
        self._pidfd: int | None = None
        try:
            self._pidfd = os.pidfd_open(self.pid)
        except OSError:  # pragma: no cover - kernels before 5.3
            self._pidfd = None

    def _reap(self, flags: int) -> Outcome | None:
        if self.outcome is not None:
            return self.outcome
        try:
            pid, status, ru = os.wait4(self.pid, flags)
        except ChildProcessError:
            raise SystemStateError(f"process {self.pid} was reaped by someone else") from None
        if pid == 0:
            return None
        ended = time.monotonic_ns()
        self.outcome = decode(pid, status, ru, self.started_ns, ended, self.started_at,
                              self.launcher_rss_kb)
        self.popen.returncode = self.outcome.exit_code if self.outcome.exit_code is not None \
            else -(self.outcome.signal or 0)
        self._close()
        return self.outcome

    def _close(self) -> None:
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None

    def poll(self) -> Outcome | None:
        return self._reap(os.WNOHANG)

    def wait(self, timeout: float | None = None) -> Outcome | None:
        """Block until the child ends (None on timeout). Sleeps on the pidfd, never polls."""
        if self.outcome is not None:
            return self.outcome
        if timeout is None:
            return self._reap(0)
        deadline = time.monotonic() + timeout
        while True:
            done = self.poll()
            if done is not None:
                return done
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            if self._pidfd is not None:
                select.select([self._pidfd], [], [], left)
            else:  # pragma: no cover
                time.sleep(min(left, 0.01))

    def signal(self, sig: int) -> None:
        if self.outcome is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def signal_group(self, sig: int) -> None:
        """Signal the child's whole process group (it must have been started with new_group)."""
        if self.outcome is None:
            try:
                os.killpg(self.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass

    def stop(self, grace: float = 5.0, group: bool = False) -> Outcome:
        """SIGTERM, wait up to `grace` seconds, then SIGKILL; always reaps."""
        send = self.signal_group if group else self.signal
        send(signal.SIGTERM)
        out = self.wait(grace)
        if out is None:
            send(signal.SIGKILL)
            out = self.wait()
        assert out is not None
        if group:  # stragglers that ignored SIGTERM in the group
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        return out


def _child_setup(policy: priority.Policy | None, cgroup_procs: Sequence[str],
                 errpipe: int, extra: Callable[[], None] | None) -> Callable[[], None]:
    """Build the pre-exec hook. Errors go through `errpipe` so the parent can name them."""

    def setup() -> None:
        try:
            signal.pthread_sigmask(signal.SIG_SETMASK, [])
            for procs in cgroup_procs:
                with open(procs, "w") as f:
                    f.write(str(os.getpid()))
            if policy is not None:
                priority.apply_to_self(policy)
            if extra is not None:
                extra()
        except BaseException as err:  # noqa: BLE001 - must report anything before exec fails
            os.write(errpipe, f"{type(err).__name__}: {err}".encode()[:1000])
            raise

    return setup


def launch(
    argv: Sequence[str],
    *,
    policy: priority.Policy | None = None,
    cgroup_procs: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    stdin: int | None = None,
    stdout: int | None = None,
    stderr: int | None = None,
    new_group: bool = False,
    pass_fds: Sequence[int] = (),
    extra_setup: Callable[[], None] | None = None,
) -> Child:
    """Start argv with `policy` applied before exec. stdio is inherited unless given.

    Raises CommandNotFound (127) / CommandNotExecutable (126) with a one-line message.
    """
    if not argv:
        raise CommandNotFound("no command given", "put the command after --")
    rfd, wfd = os.pipe2(os.O_CLOEXEC)
    # A pre-exec hook forces fork() instead of vfork(): ~1.5 ms more per launch, which is
    # harness overhead in every trial. Use one only when something must happen in the child.
    needs_hook = (policy is not None or bool(cgroup_procs) or extra_setup is not None
                  or bool(signal.pthread_sigmask(signal.SIG_BLOCK, [])))
    hook = _child_setup(policy, cgroup_procs, wfd, extra_setup) if needs_hook else None
    started_at = time.time()
    started_ns = time.monotonic_ns()
    try:
        popen = subprocess.Popen(  # noqa: S603 - argv is the user's own command
            list(argv),
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            close_fds=True,
            pass_fds=tuple(pass_fds),
            process_group=0 if new_group else None,
            preexec_fn=hook,
        )
    except FileNotFoundError:
        raise CommandNotFound(f"{argv[0]}: command not found") from None
    except PermissionError as err:
        raise CommandNotExecutable(f"{argv[0]}: cannot execute: {err.strerror}") from None
    except OSError as err:
        if err.errno in (errno.ENOEXEC, errno.EISDIR, errno.ELIBBAD):
            raise CommandNotExecutable(f"{argv[0]}: cannot execute: {err.strerror}") from None
        raise BackburnerError(f"{argv[0]}: cannot start: {err.strerror}") from None
    except subprocess.SubprocessError:
        os.close(wfd)
        wfd = -1
        detail = os.read(rfd, 1000).decode(errors="replace") or "unknown error"
        if detail.startswith("PermissionError") and os.geteuid() != 0:
            raise NotRootError(f"starting {argv[0]} with these priorities (a negative nice, "
                               "the realtime classes or a cgroup)") from None
        raise SystemStateError(
            f"could not apply priorities to {argv[0]} before starting it: {detail}",
            "realtime IO/CPU classes, negative nice and cgroups need root",
        ) from None
    finally:
        # The child's pre-exec hook writes here only on failure; it runs before Popen closes
        # fds, and O_CLOEXEC keeps the pipe out of the job itself.
        if wfd >= 0:
            os.close(wfd)
        os.close(rfd)
    log.debug("launched %s as %d", argv, popen.pid)
    return Child(popen, started_ns, started_at)


def run_foreground(argv: Sequence[str], *, policy: priority.Policy | None = None,
                   cgroup_procs: Sequence[str] = ()) -> Outcome:
    """Run a job with stdio and environment passed through; forward signals sent to us.

    Signals are blocked before the fork (the child unblocks them before exec), then taken
    with sigwaitinfo: no race with SIGCHLD and no handler running arbitrary code. A ^C from
    the terminal reaches the job directly (same process group), so signals the kernel sent
    (SI_KERNEL) are not forwarded again; a `kill` from another process (SI_USER) is.
    """
    watched = {*FORWARDED_SIGNALS, signal.SIGCHLD}
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, watched)
    try:
        child = launch(argv, policy=policy, cgroup_procs=cgroup_procs)
        while True:
            done = child.poll()
            if done is not None:
                return done
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


def run_tool(argv: Sequence[str], timeout: float = 120.0) -> ToolResult:
    """Run a short system tool (losetup, mount, mkfs) to completion, capturing its output.

    Raises FileNotFoundError when the tool is not installed, like subprocess does.
    """
    proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        return ToolResult(None, out, err)
    return ToolResult(proc.returncode if proc.returncode >= 0 else None, out, err)
