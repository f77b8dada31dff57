"""Children of the rig (debootstrap, mkfs, QEMU) die with the test process, even by SIGKILL."""

from __future__ import annotations

import ctypes
import os
import signal
from collections.abc import Callable

_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)  # loaded before any fork: no dlopen in the child


def dies_with_us() -> Callable[[], None]:
    """A preexec_fn: the child gets SIGKILL when this process dies, however it dies.

    The parent-death signal follows the thread that forked: start children from the main
    thread (pytest's), not from a helper thread that may end first."""
    parent = os.getpid()

    def setup() -> None:
        if _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")
        if os.getppid() != parent:  # the parent died before prctl took effect
            os.kill(os.getpid(), signal.SIGKILL)

    return setup
