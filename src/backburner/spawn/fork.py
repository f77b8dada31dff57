"""Running a function of ours in a fork, without exec (`fork_call`): for work whose code is
loaded here already, started without the cost of a new interpreter."""

from __future__ import annotations

import logging
import os
import resource
import signal
import time
from collections.abc import Callable

from ..base import interrupts
from ..base.errors import StartError
from ..kernel import syscalls
from ..policy import grammar, live
from .child import Child, Forked

log = logging.getLogger(__name__)

_FORK_HELD = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def fork_call(fn: Callable[[], int], *, name: str, policy: grammar.Policy | None = None,
              new_group: bool = False, detached: bool = False) -> Child:
    """Run `fn()` in a fork of this process, without exec: for work whose code is loaded
    here already. A background readahead replay started as a new interpreter costs a start
    of its own (an interpreter and its modules, read cold) at the very moment it is meant to help
    one: measured on a fast device, +13-26% to the start it ran beside, against -28% when
    forked (benchmarks/readahead_slowdisk.py).

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


def _forked_child(fn: Callable[[], int], name: str, policy: grammar.Policy | None,
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
        if policy is not None:
            live.apply_to_self(policy)
        # named last: a child that answers to its name has its whole set-up in place
        syscalls.prctl(syscalls.PR_SET_NAME, name.encode()[:15])
        code = fn()
    except BaseException:  # noqa: BLE001, S110 - nowhere to report: the status says it
        code = 70
    finally:
        try:
            os._exit(code if isinstance(code, int) and 0 <= code <= 255 else 70)
        finally:  # never return into the parent's code, whatever happened above
            os._exit(70)

