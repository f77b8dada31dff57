"""tracefs, where the kernel's tracepoints are read (perf's, govern's exec filter): the
mount there is, or one of our own, journaled like every other mount."""

from __future__ import annotations

from contextlib import ExitStack

from ..kernel import procfs
from .files import PrivateDir
from .mounts import Mount
from .paths import require_root, work_root
from .transaction import Transaction


def tracefs_mount() -> str | None:
    """Where tracefs is mounted now, if anywhere (perf finds it through /proc/mounts)."""
    return next((m.mountpoint for m in procfs.mounts() if m.fstype == "tracefs"), None)


def ensure_tracefs(stack: ExitStack) -> str:
    """A tracefs mount (for perf's tracepoints, govern's exec filter): the existing one,
    else one of our own on a private directory under the work root, both journaled,
    unmounted and removed when `stack` closes or by `restore` (never /sys/kernel/tracing,
    which other tools may expect to find in the state they left it)."""
    found = tracefs_mount()
    if found:
        return found
    require_root("mounting tracefs")
    tx = stack.enter_context(Transaction("tracefs"))
    target = tx.apply(PrivateDir(str(work_root()), "tracefs-"))
    tx.apply(Mount("tracefs", target, "tracefs", "nosuid,nodev,noexec"))
    return str(target)
