"""The only place that creates processes.

Priorities are applied in the child before exec; the parent waits with wait4(2) so every
job's own rusage comes back with its raw wait status (`Outcome`). `run_foreground` adds
what `backburner run` needs on top: signal forwarding and an exact mirror of the job's end.
"""

from __future__ import annotations

import ctypes
import errno
import logging
import os
import re
import resource
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass

from . import interrupts, priority, procfs
from .errors import (
    CommandNotExecutable,
    CommandNotFound,
    NotRootError,
    StartError,
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


def _own_rss_kb() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024
    except OSError:
        return 0


#: Children that are ours to stop when the work they belong to ends (see `stop_all`).
_LIVE: dict[int, Child] = {}
#: How many children have been launched: a transaction stops only those launched after it
#: opened (`launched()` then), so closing a nested one cannot kill an outer one's load.
_launched = 0


def launched() -> int:
    """The launch count now; pass it to `stop_all(since=...)` later."""
    return _launched


class Child:
    """A launched process. Reaped only through `wait`/`poll` so that wait4's rusage is ours."""

    def __init__(self, popen: subprocess.Popen[bytes] | Forked, started_ns: int, started_at: float,
                 *, detached: bool = False, own_group: bool = False):
        self.popen = popen
        self.pid = popen.pid
        self.started_ns = started_ns
        self.started_at = started_at
        self.launcher_rss_kb = _own_rss_kb()
        self.outcome: Outcome | None = None
        self.detached = detached
        self.own_group = own_group
        self._pidfd: int | None = None
        try:
            self._pidfd = os.pidfd_open(self.pid)
        except OSError:  # pragma: no cover - kernels before 5.3
            self._pidfd = None
        global _launched
        _launched += 1
        self.seq = _launched
        if not detached:
            _LIVE[self.pid] = self

    def _reap(self, flags: int) -> Outcome | None:
        """Reap the child (``flags``: 0 to wait, WNOHANG not to). A signal that interrupts a
        wait finds the child unreaped; one that lands once wait4 has returned is raised only
        after the outcome is kept: between the two, a ^C used to lose the status, and the
        stop that followed it failed on a child already gone (found by the fault injection)."""
        if self.outcome is not None:
            return self.outcome
        if not flags & os.WNOHANG:
            self._until_ended()
        with interrupts.deferred():
            return self._collect()

    def _until_ended(self) -> None:
        try:
            os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOWAIT)
        except ChildProcessError:
            pass  # _collect says so

    def _collect(self) -> Outcome | None:
        try:
            pid, status, ru = os.wait4(self.pid, os.WNOHANG)
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
        _LIVE.pop(self.pid, None)
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

    def tree(self) -> dict[int, int]:
        """(pid -> start time) of the child's process group and all its descendants, which
        includes those that left the group with setsid() (fio's job processes do)."""
        found = set(procfs.descendants_of(self.pid))
        if self.own_group:
            found |= set(procfs.group_members(self.pid))
        return {pid: start for pid in found
                if pid != self.pid and (start := procfs.start_time(pid)) is not None}

    def stop_tree(self, grace: float = 10.0, verify_s: float = 5.0) -> Outcome:
        """SIGTERM the child's group (a load's own clean-up runs), then make sure by PID and
        start time that nothing of its tree survives: SIGKILL what is left, and raise
        SystemStateError naming survivors that would not die."""
        tracked = self.tree()
        send = self.signal_group if self.own_group else self.signal
        send(signal.SIGTERM)
        deadline = time.monotonic() + grace
        out = None
        while out is None and time.monotonic() < deadline:
            tracked.update(self.tree())  # children forked while it shuts down
            out = self.wait(min(0.05, max(deadline - time.monotonic(), 0)))
        if out is None:
            tracked.update(self.tree())
            send(signal.SIGKILL)
            out = self.wait()
        assert out is not None
        group = self.pid if self.own_group else None
        left = _survivors(group, tracked)
        deadline = time.monotonic() + verify_s
        while left and time.monotonic() < deadline:
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.02)
            left = _survivors(group, tracked)
        if left:
            raise SystemStateError(f"processes {left} of {self.popen.args!r} survived stopping")
        return out

    def wait_ready(self, timeout: float, line: re.Pattern[str] | None = None,
                   path: str | None = None) -> int | None:
        """Wait until a line of the child's stdout matches `line` or `path` exists; the
        monotonic time (ns) it happened, or None at timeout or when the child exits first."""
        deadline = time.monotonic() + timeout
        pipe = self.popen.stdout
        buf = b""
        while time.monotonic() < deadline:
            if path and os.path.exists(path):
                return time.monotonic_ns()
            if pipe is None:
                if self.poll() is not None:
                    return None
                time.sleep(0.005)
                continue
            readable, _, _ = select.select([pipe], [], [], 0.005)
            if not readable:
                continue
            chunk = os.read(pipe.fileno(), 65536)
            if not chunk:
                pipe = None
                continue
            buf += chunk
            now = time.monotonic_ns()
            lines = buf.split(b"\n")
            if line and any(line.search(ln.decode(errors="replace")) for ln in lines):
                return now
            buf = lines[-1]
        return None


def _survivors(pgid: int | None, tracked: dict[int, int]) -> list[int]:
    left = set(procfs.group_members(pgid)) if pgid is not None else set()
    left |= {pid for pid, start in tracked.items() if procfs.start_time(pid) == start}
    return sorted(left)


def terminate(pid: int, start: int, grace: float = 5.0) -> None:
    """Stop a process that is not our child (a daemon whose starter died): SIGTERM, then
    SIGKILL, each only while `pid` still has `start` as its start time (never a recycled
    PID)."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 2.0)):
        if procfs.start_time(pid) != start:
            return
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if procfs.start_time(pid) != start:
                return
            time.sleep(0.02)


def stop_all(grace: float = 5.0, since: int = 0) -> None:
    """Stop every child that is still ours (not detached) and was launched after `since`,
    with its whole tree: called before a transaction undoes its changes, so that no helper
    keeps writing into a filesystem that is about to be unmounted (it would then write onto
    the disk beneath)."""
    for child in list(_LIVE.values()):
        if child.seq <= since:
            continue
        if child.outcome is None:
            try:
                child.stop_tree(grace)
            except SystemStateError as err:
                log.warning("%s", err)
        _LIVE.pop(child.pid, None)


_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_libc = ctypes.CDLL(None, use_errno=True)  # loaded here: no dlopen between fork and exec


def _child_setup(policy: priority.Policy | None, cgroup_procs: Sequence[str],
                 errpipe: int, die_with: int | None, chroot: str | None,
                 death_signal: int = signal.SIGTERM) -> Callable[[], None]:
    """Build the pre-exec hook. Errors go through `errpipe` so the parent can name them."""

    def setup() -> None:
        try:
            interrupts.reset_in_child()
            signal.pthread_sigmask(signal.SIG_SETMASK, [])
            if die_with is not None:
                # SIGTERM (by default) when we die, even by SIGKILL: a load's clean-up runs
                if _libc.prctl(_PR_SET_PDEATHSIG, death_signal, 0, 0, 0) != 0:
                    raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")
                if os.getppid() != die_with:  # we died before prctl took effect
                    os.kill(os.getpid(), death_signal)
            for procs in cgroup_procs:
                with open(procs, "w") as f:
                    f.write(str(os.getpid()))
            if policy is not None:
                priority.apply_to_self(policy)
            if chroot is not None:
                os.chroot(chroot)
                os.chdir("/")
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
    die_with_parent: bool = False,
    death_signal: int = signal.SIGTERM,
    chroot: str | None = None,
    detached: bool = False,
) -> Child:
    """Start argv with `policy` applied before exec. stdio is inherited unless given.

    ``die_with_parent``: the child gets ``death_signal`` (SIGTERM) when we die (even by
    SIGKILL), for helpers that must never outlive the command that started them.
    ``chroot``: run it inside that root (a testbed). ``detached``: a daemon that is handed
    over and may outlive us; all other children are stopped, with their trees, by
    `stop_all`.

    Raises CommandNotFound (127) / CommandNotExecutable (126) with a one-line message.
    """
    if not argv:
        raise CommandNotFound("no command given", "put the command after --")
    rfd, wfd = os.pipe2(os.O_CLOEXEC)
    # A pre-exec hook forces fork() instead of vfork(): ~1.5 ms more per launch, which is
    # harness overhead in every trial. Use one only when something must happen in the child.
    needs_hook = (policy is not None or bool(cgroup_procs) or die_with_parent
                  or chroot is not None or bool(signal.pthread_sigmask(signal.SIG_BLOCK, [])))
    die_with = os.getpid() if die_with_parent else None
    hook = (_child_setup(policy, cgroup_procs, wfd, die_with, chroot, death_signal)
            if needs_hook else None)
    with interrupts.deferred():  # a signal after fork must find the child registered
        return _start(argv, hook, rfd, wfd, stdin=stdin, stdout=stdout, stderr=stderr,
                      env=env, cwd=cwd, pass_fds=pass_fds, new_group=new_group,
                      detached=detached)


def _start(argv: Sequence[str], hook: Callable[[], None] | None, rfd: int, wfd: int, *,
           stdin: int | None, stdout: int | None, stderr: int | None,
           env: Mapping[str, str] | None, cwd: str | None, pass_fds: Sequence[int],
           new_group: bool, detached: bool) -> Child:
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
        raise StartError(f"{argv[0]}: cannot start: {err.strerror}") from None
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
    return Child(popen, started_ns, started_at, detached=detached, own_group=new_group)


class Forked:
    """What `Child` needs of a Popen, for a child that is a fork of us running a function
    (`fork_call`), not a program."""

    def __init__(self, pid: int, name: str) -> None:
        self.pid = pid
        self.args = [name]
        self.returncode: int | None = None
        self.stdout = None


_PR_SET_NAME = 15
_FORK_HELD = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def fork_call(fn: Callable[[], int], *, name: str, policy: priority.Policy | None = None,
              new_group: bool = False, detached: bool = False) -> Child:
    """Run `fn()` in a fork of this process, without exec: for work whose code is loaded
    here already. A background readahead replay started as a new interpreter costs a start
    of its own (an interpreter and its modules, read cold) at the very moment it is meant to help
    one: measured on a fast device, +13-26% to the start it ran beside, against -28% when
    forked (bench/readahead_slowdisk.py).

    The child holds none of our descriptors (its stdio is /dev/null: a caller reading our
    output is not kept waiting, and no lock or pipe of ours lives on in it), takes
    `policy`, is named `name` (its comm, for ps and for a recorder telling it apart), and
    exits with fn's value (70 if fn raised). It never runs our clean-up: os._exit."""
    with interrupts.deferred():  # a signal after fork must find the child registered
        started_at = time.time()
        started_ns = time.monotonic_ns()
        # blocked across the fork: one landing before the child has reset our handlers
        # would be deferred there into nothing; blocked, it waits for the default action
        old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, _FORK_HELD)
        try:
            try:
                pid = os.fork()
            except OSError as err:  # EAGAIN, ENOMEM: one line, like a failed launch
                raise StartError(f"cannot start {name}: {err.strerror}") from None
            if pid == 0:  # pragma: no cover - the child; its effects are what tests check
                _forked_child(fn, name, policy, new_group)
            if new_group:
                try:
                    os.setpgid(pid, pid)  # at once, for a killpg before the child runs
                except OSError:
                    pass  # the child did it first (or has already ended)
            log.debug("forked %s as %d", name, pid)
            return Child(Forked(pid, name), started_ns, started_at, detached=detached,
                         own_group=new_group)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)


def _forked_child(fn: Callable[[], int], name: str, policy: priority.Policy | None,
                  new_group: bool) -> None:
    code: object = 70
    try:
        interrupts.reset_in_child()
        signal.pthread_sigmask(signal.SIG_SETMASK, [])  # a signal held since the fork: now
        if new_group:
            os.setpgid(0, 0)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        os.closerange(3, soft if 0 < soft < 1 << 20 else 1 << 20)
        _libc.prctl(_PR_SET_NAME, name.encode()[:15], 0, 0, 0)
        if policy is not None:
            priority.apply_to_self(policy)
        code = fn()
    except BaseException:  # noqa: BLE001, S110 - nowhere to report: the status says it
        code = 70
    finally:
        try:
            os._exit(code if isinstance(code, int) and 0 <= code <= 255 else 70)
        finally:  # never return into the parent's code, whatever happened above
            os._exit(70)


def run_helper(argv: Sequence[str], *, cwd: str | None = None, stdout: int | None = None,
               stderr: int | None = None) -> Outcome:
    """Run a helper to completion (fio laying out files, an archive being made): in its own
    group, dying with us, and stopped with its whole tree if we are interrupted meanwhile."""
    child = launch(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr,
                   new_group=True, die_with_parent=True)
    try:
        out = child.wait()
    except BaseException:
        child.stop_tree(grace=2.0)
        raise
    assert out is not None
    return out


def run_foreground(argv: Sequence[str], *, policy: priority.Policy | None = None,
                   cgroup_procs: Sequence[str] = (), adopt_orphans: bool = False) -> Outcome:
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
        if adopt_orphans and _libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            raise StartError(f"cannot adopt the orphans of {argv[0] if argv else '?'}: "
                             f"{os.strerror(ctypes.get_errno())}")
        child = launch(argv, policy=policy, cgroup_procs=cgroup_procs)
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


def signal_process(pid: int, start: int, sig: int) -> bool:
    """Send `sig` to a process that is not our child (a tracer's launcher) only if `pid`
    is still the process that started at `start` (never a recycled PID: the signal goes
    through a pidfd opened before the check). False when it is gone."""
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return False
    try:
        if procfs.start_time(pid) != start:
            return False
        signal.pidfd_send_signal(fd, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False
    finally:
        os.close(fd)


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
             env: Mapping[str, str] | None = None) -> ToolResult:
    """Run a short system tool (losetup, mount, mkfs) to completion, capturing its output.

    The tool dies with us and is killed with its group when we are interrupted (^C,
    SIGTERM) while it runs: no mkfs or fio keeps going after we have given up on it.
    Raises FileNotFoundError when the tool is not installed, like subprocess does. `env`
    adds to (or overrides) our environment.
    """
    parent = os.getpid()

    def die_with_parent() -> None:
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, process_group=0,
                            preexec_fn=die_with_parent,
                            env={**os.environ, **env} if env is not None else None)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid)
        out, err = proc.communicate()
        return ToolResult(None, out, err)
    except BaseException:
        _kill_group(proc.pid)
        proc.wait()
        raise
    return ToolResult(proc.returncode if proc.returncode >= 0 else None, out, err)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
