"""Starting a program: `launch` execs argv with its priorities, cgroups and death signal
applied in the child before exec, and names a failure to start in one line (127, 126)."""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence

from ..base import interrupts
from ..base.errors import (
    BackburnerError,
    CommandNotExecutable,
    CommandNotFound,
    NotRootError,
    StartError,
    SystemStateError,
)
from ..kernel import syscalls
from ..policy import grammar, live
from .child import Child

log = logging.getLogger(__name__)

#: What our own helper interpreters keep of our environment: where the tools are, the
#: language of their messages, and backburner's own settings (the state directory).
#: Nothing else: they run as root, and every other variable is the caller's to set.
_HELPER_ENV = ("PATH", "LANG", "LANGUAGE", "TZ", "TERM", "NO_COLOR", "DBUS_SYSTEM_BUS_ADDRESS")
_HELPER_ENV_PREFIXES = ("LC_", "BACKBURNER_")


def python_module(module: str, *args: str) -> list[str]:
    """argv that runs one of our own modules (``python -m backburner.x``) isolated.

    `-I` keeps the caller's directory, PYTHON* variables and user site-packages off
    sys.path: `python -m` alone puts the working directory first, so a `backburner/` or
    `json.py` planted where root runs a command would be imported as root. `launch` also
    starts such a helper from `/` with an environment of our choosing (`helper_env`)."""
    return [sys.executable, "-I", "-m", module, *args]


def helper_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a helper interpreter of ours gets: `_HELPER_ENV` and `extra`."""
    env = {k: v for k, v in os.environ.items()
           if k in _HELPER_ENV or k.startswith(_HELPER_ENV_PREFIXES)}
    return {**env, **(extra or {})}


def _ours(argv: Sequence[str]) -> bool:
    """True when argv runs one of our own modules as `python_module` builds it. (The
    user's commands may start this interpreter too: they are theirs, and keep ours.)"""
    return (len(argv) > 3 and argv[0] == sys.executable and list(argv[1:3]) == ["-I", "-m"]
            and (argv[3] == "backburner" or argv[3].startswith("backburner.")))


def _close_exec_sockets() -> None:
    """Close the sockets this child would lose at exec anyway, before it joins its groups.
    Joining a group of cgroup v1's net_cls gives every socket in the joining task's
    descriptor table the group's class id, and a child still holds its parent's until
    exec: the parent's own sockets (the network pacer's echoes) would become the job's."""
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd < 3:
            continue
        try:
            if stat.S_ISSOCK(os.fstat(fd).st_mode) and \
                    fcntl.fcntl(fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC:
                os.close(fd)
        except OSError:
            pass  # the listing's own descriptor, gone with it


def _child_setup(policy: grammar.Policy | None, cgroup_procs: Sequence[str],
                 errpipe: int, die_with: int | None, chroot: str | None,
                 death_signal: int = signal.SIGTERM,
                 before_exec: Callable[[], None] | None = None,
                 netns_fd: int | None = None,
                 private_tmp: str | None = None) -> Callable[[], None]:
    """Build the pre-exec hook. Errors go through `errpipe` so the parent can name them."""

    def setup() -> None:
        try:
            interrupts.reset_in_child()
            signal.pthread_sigmask(signal.SIG_SETMASK, [])
            if die_with is not None:
                # SIGTERM (by default) when we die, even by SIGKILL: a load's clean-up runs
                syscalls.prctl(syscalls.PR_SET_PDEATHSIG, death_signal)
                if os.getppid() != die_with:  # we died before prctl took effect
                    os.kill(os.getpid(), death_signal)
            if cgroup_procs:
                _close_exec_sockets()
            for procs in cgroup_procs:
                with open(procs, "w") as f:
                    f.write(str(os.getpid()))
            if policy is not None:
                live.apply_to_self(policy)
            if netns_fd is not None:
                syscalls.setns(netns_fd, syscalls.CLONE_NEWNET)
            if before_exec is not None:  # e.g. ask systemd for a scope of our own
                before_exec()
            if private_tmp is not None:
                _overlay_tmp(private_tmp)
            if chroot is not None:
                os.chroot(chroot)
                os.chdir("/")
        except BaseException as err:  # noqa: BLE001 - must report anything before exec fails
            os.write(errpipe, f"{type(err).__name__}: {err}".encode()[:1000])
            raise

    return setup


#: What `private_tmp` holds: the overlay's upper layer (what the child wrote) and work dir.
TMP_UPPER, TMP_WORK = "upper", "work"
#: The shared directory a `private_tmp` is laid over.
SHARED_TMP = "/tmp"


def _overlay_tmp(directory: str) -> None:
    """In a mount namespace of the child's own, with every mount private (nothing it mounts
    reaches the host's), /tmp becomes an overlay: the host's /tmp read through it, what the
    child and its descendants write there kept in `directory`."""
    syscalls.unshare(syscalls.CLONE_NEWNS)
    syscalls.mount(None, "/", None, syscalls.MS_REC | syscalls.MS_PRIVATE)
    options = (f"lowerdir={SHARED_TMP},upperdir={os.path.join(directory, TMP_UPPER)},"
               f"workdir={os.path.join(directory, TMP_WORK)}")
    syscalls.mount("overlay", SHARED_TMP, "overlay", syscalls.MS_NOSUID | syscalls.MS_NODEV,
                   options)


def prepare_private_tmp(directory: str) -> str:
    """Make `directory` (a new one, in a directory of ours) ready to be a child's
    `private_tmp`; returns it. Its path goes into mount options, so it must hold none of
    their separators."""
    if any(ch in directory for ch in ",:\\"):
        raise ValueError(f"{directory!r}: a private /tmp's path cannot hold , : or \\")
    os.mkdir(directory, 0o700)
    for name in (TMP_UPPER, TMP_WORK):
        os.mkdir(os.path.join(directory, name), 0o700)
    os.chmod(os.path.join(directory, TMP_UPPER), 0o1777)  # /tmp's own mode, seen through
    return directory


def launch(
    argv: Sequence[str],
    *,
    policy: grammar.Policy | None = None,
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
    before_exec: Callable[[], None] | None = None,
    netns: str | None = None,
    private_tmp: str | None = None,
) -> Child:
    """Start argv with `policy` applied before exec. stdio is inherited unless given.

    ``die_with_parent``: the child gets ``death_signal`` (SIGTERM) when we die (even by
    SIGKILL), for helpers that must never outlive the command that started them.
    ``chroot``: run it inside that root (a testbed). ``detached``: a daemon that is handed
    over and may outlive us; all other children are stopped, with their trees, by
    `stop_all`. ``before_exec``: run in the child after its priorities are set, before
    exec (`run` asks systemd there for a scope of the child's own, as systemd-run does);
    a BackburnerError it raises is raised again here, as it was. ``netns``: a network
    namespace's file (/run/netns/NAME) the child joins before exec (a testbed's client);
    only the network namespace changes, so the child sees the same files and cgroups.
    ``private_tmp``: a directory made by `prepare_private_tmp`; the child sees the host's
    /tmp, but what it and its descendants write there stays in that directory (a program
    that ignores TMPDIR, such as LibreOffice's IPC socket, leaves nothing in the host's).
    Our own interpreter (`python_module`) starts from `/` and with `helper_env()` unless
    `cwd` and `env` are given; the user's commands keep ours.

    Raises CommandNotFound (127) / CommandNotExecutable (126) with a one-line message.
    """
    if not argv:
        raise CommandNotFound("no command given", "put the command after --")
    if _ours(argv):
        cwd = "/" if cwd is None else cwd
        env = helper_env() if env is None else env
    rfd, wfd = os.pipe2(os.O_CLOEXEC)
    # A pre-exec hook forces fork() instead of vfork(): ~1.5 ms more per launch, which is
    # harness overhead in every trial. Use one only when something must happen in the child.
    needs_hook = (policy is not None or bool(cgroup_procs) or die_with_parent
                  or chroot is not None or before_exec is not None or netns is not None
                  or private_tmp is not None
                  or bool(signal.pthread_sigmask(signal.SIG_BLOCK, [])))
    die_with = os.getpid() if die_with_parent else None
    ns_fd = os.open(netns, os.O_RDONLY | os.O_CLOEXEC) if netns is not None else None
    if private_tmp is not None and chroot is not None:
        raise ValueError("a chrooted child has the testbed's /tmp: no private_tmp")
    hook = (_child_setup(policy, cgroup_procs, wfd, die_with, chroot, death_signal,
                         before_exec, ns_fd, private_tmp) if needs_hook else None)
    try:
        with interrupts.deferred():  # a signal after fork must find the child registered
            return _start(argv, hook, rfd, wfd, stdin=stdin, stdout=stdout, stderr=stderr,
                          env=env, cwd=cwd, pass_fds=pass_fds, new_group=new_group,
                          detached=detached)
    finally:
        if ns_fd is not None:
            os.close(ns_fd)


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
        ours = our_error(detail)
        if ours is not None:
            raise ours from None
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



def our_error(detail: str) -> BackburnerError | None:
    """One of our errors, as the child's pre-exec hook reported it ("UnavailableError: ...")."""
    name, _, message = detail.partition(": ")
    cls = next((c for c in _error_classes() if c.__name__ == name), None)
    return cls(message) if cls is not None and message else None


def _error_classes() -> list[type[BackburnerError]]:
    found, todo = [], [BackburnerError]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo += cls.__subclasses__()
    return [c for c in found if c not in (NotRootError,)]
