"""tracefs, where the kernel's tracepoints are read (perf's, govern's exec filter): the
mount there is, or one of our own, journaled like every other mount."""

from __future__ import annotations

import os
from contextlib import ExitStack

from ..kernel import procfs
from .files import PrivateDir
from .mounts import Mount
from .paths import require_root, work_root
from .transaction import Transaction

#: Our own mounts' directory prefix (a PrivateDir under the work root).
PRIVATE_PREFIX = "tracefs-"
#: perf's own override of where tracefs is (tools/lib/api/fs: PERF_<FS>_ENVIRONMENT);
#: without it perf takes the first tracefs in /proc/mounts, which may be another run's.
PERF_TRACEFS_ENV = "PERF_TRACEFS_ENVIRONMENT"


def tracefs_mount() -> str | None:
    """Where tracefs is mounted now, other than another backburner run's private mount (that
    run unmounts it when it ends, under our perf: its data then read back as "incompatible
    file format", seen with two recordings at once)."""
    return next((m.mountpoint for m in procfs.mounts() if m.fstype == "tracefs"
                 and not os.path.basename(m.mountpoint).startswith(PRIVATE_PREFIX)), None)


def ensure_tracefs(stack: ExitStack) -> str:
    """A tracefs mount (for perf's tracepoints, govern's exec filter): the system's, else
    one of our own on a private directory under the work root, journaled, unmounted and
    removed when `stack` closes or by `restore` (never /sys/kernel/tracing, which other
    tools may expect to find in the state they left it). Every perf we start meanwhile is
    pointed at it."""
    found = tracefs_mount()
    if not found:
        require_root("mounting tracefs")
        tx = stack.enter_context(Transaction("tracefs"))
        target = tx.apply(PrivateDir(str(work_root()), PRIVATE_PREFIX))
        tx.apply(Mount("tracefs", target, "tracefs", "nosuid,nodev,noexec"))
        found = str(target)
    before = os.environ.get(PERF_TRACEFS_ENV)
    os.environ[PERF_TRACEFS_ENV] = found
    stack.callback(_put_back_env, before)  # before the mount goes (callbacks run last first)
    return found


def _put_back_env(value: str | None) -> None:
    if value is None:
        os.environ.pop(PERF_TRACEFS_ENV, None)
    else:
        os.environ[PERF_TRACEFS_ENV] = value
