"""^C, SIGTERM and SIGHUP as exceptions, so that `with` blocks unwind and undo; and the
few steps that must not be cut in half by one.

Starting a child is such a step: a signal that lands after fork but before the child is
registered would leave a process nobody stops (found by the fault injection: a load kept
reading from a filesystem being unmounted). Inside `deferred()` a signal is noted and
raised when the block ends, by which time the child is registered. That holds for the main
thread, where Python runs handlers and the undo runs: a helper thread (the network pacer)
starts only short tools, through `spawn.run_tool`, which kills its own tool if its thread
is interrupted, and registers no child for the main thread's undo to stop."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_seen: int | None = None  # the first interrupting signal received
_pending: int | None = None  # one that arrived inside deferred(), not raised yet
_depth = 0
_settled = False  # the command's outcome is decided: signals are noted, not raised


class Terminated(BaseException):
    """SIGTERM/SIGHUP as an exception (^C is KeyboardInterrupt)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise(signum: int) -> None:
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Terminated(signum)


def _handler(signum: int, _frame: Any) -> None:
    global _seen, _pending
    if _seen is None:
        _seen = signum
    if _settled:
        return
    if _depth:
        if _pending is None:
            _pending = signum
        return
    _raise(signum)


def install() -> None:
    """Our handlers for SIGTERM, SIGHUP and (unless it is ignored: started in the
    background by a shell) SIGINT."""
    global _settled
    _settled = False
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _handler)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _handler)


def reset_in_child() -> None:
    """In a forked child before exec: our handlers back to the default action (what exec
    would do), so that a signal there is never deferred into nothing."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) is _handler:
            signal.signal(sig, signal.SIG_DFL)


def seen() -> int | None:
    """The interrupting signal that has arrived, if any: an exception raised while it was
    being delivered may not be the one it began as (a C extension's initialisation
    interrupted by ^C surfaces as an ImportError)."""
    return _seen


@contextmanager
def deferred() -> Iterator[None]:
    """Hold an arriving signal until the block is done, then raise it. Only the main
    thread's blocks hold: Python runs handlers there alone, so another thread's block (the
    network pacer starting `tc`) cannot be cut by one, and must not end by raising the
    main thread's signal in a thread that would die of it while the main thread goes on."""
    global _depth, _pending
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if not _depth and _pending is not None:
            signum, _pending = _pending, None
            _raise(signum)


#: What ends a command: held while something must not be cut in half (an undo, a journal
#: line and the change it describes, a loop device and its journal entry).
TERMINATING = frozenset({signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT})


@contextmanager
def held(signals: frozenset[int] | set[int] = TERMINATING) -> Iterator[None]:
    """Block `signals` for the block (they stay pending, delivered when it ends): unlike
    `deferred`, this also holds them from C code and threads that would not run our
    handler in time, and a second ^C cannot cut an undo in half."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def settle() -> None:
    """The command's outcome is decided (its status chosen, its changes committed): a
    terminating signal from here on is noted, never raised, so it cannot turn a success
    into "interrupted; system state restored" (which `apply` said after committing)."""
    global _settled
    _settled = True


def finished() -> None:
    """The program is about to exit with its status: terminating signals are held to the
    end. Without this, one landing while the interpreter shuts down (its handlers back to
    the default action) killed a program that had already succeeded: "terminated" after a
    slowdisk was set up and announced. Only the program's entry calls it: a process that
    goes on (a test calling the CLI) must keep its signals."""
    signal.pthread_sigmask(signal.SIG_BLOCK, TERMINATING)
