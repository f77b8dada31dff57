"""tracefs, where the kernel's tracepoints are read: for govern's exec filter and bench's
counters, the mount there is or one of our own, journaled like every other mount; for
perf, a mount of its own in a mount namespace of its own."""

from __future__ import annotations

import errno
import os
from contextlib import ExitStack

from ..base.errors import UnavailableError
from ..kernel import procfs, syscalls
from .files import PrivateDir
from .mounts import Mount
from .paths import require_root, work_root
from .transaction import Transaction

#: Our own mounts' directory prefix (a PrivateDir under the work root).
PRIVATE_PREFIX = "tracefs-"
#: Where perf reads tracefs, and the only way to choose it: perf takes this path when a
#: tracefs is mounted there, else the first tracefs in /proc/mounts (which may be another
#: run's, unmounted under it), else mounts one here itself and leaves it mounted. perf 6.1
#: was measured ignoring both PERF_TRACEFS_ENVIRONMENT and `perf --debugfs-dir`.
PERF_TRACEFS = "/sys/kernel/tracing"


def tracefs_mount() -> str | None:
    """Where tracefs is mounted now, other than another backburner run's private mount (that
    run unmounts it when it ends, perhaps while we read it)."""
    return next((m.mountpoint for m in procfs.mounts() if m.fstype == "tracefs"
                 and not os.path.basename(m.mountpoint).startswith(PRIVATE_PREFIX)), None)


def ensure_tracefs(stack: ExitStack) -> str:
    """A tracefs mount for reading tracepoints ourselves (govern's exec filter, bench's
    counters): the system's, else one of our own on a private directory under the work
    root, journaled, unmounted and removed when `stack` closes or by `restore` (never
    /sys/kernel/tracing, which other tools may expect to find in the state they left it).
    perf does not use it: see `perf_namespace`."""
    found = tracefs_mount()
    if found:
        return found
    require_root("mounting tracefs")
    tx = stack.enter_context(Transaction("tracefs"))
    target = tx.apply(PrivateDir(str(work_root()), PRIVATE_PREFIX))
    tx.apply(Mount("tracefs", target, "tracefs", "nosuid,nodev,noexec"))
    return str(target)


def perf_namespace() -> None:
    """Pre-exec hook of every perf we start (recording or reading back): the child gets a
    mount namespace of its own, every mount in it a slave (the host's mounts still reach
    it; none of its own reaches the host), and a tracefs of its own on PERF_TRACEFS there,
    over whatever the host has mounted there (the system's tracefs, or the one a perf run
    by hand left behind: detached in this namespace only). perf then reads the events'
    formats, at the end of a recording too, from a mount no other run can take away
    (another run's mount, unmounted under a recording, left its data unreadable:
    "incompatible file format"), and never mounts one on the host. The mount goes with the
    namespace when perf ends: nothing is journaled because nothing of the host's changes.

    The namespace holds a copy of every mount the host had when perf started: where the
    host's mounts are private (no systemd), one the host unmounts meanwhile stays alive in
    perf's copy until its mount point is removed (the kernel then drops the copies too), as
    a testbed's teardown does before it detaches the loop device. Needs root
    (CAP_SYS_ADMIN), as perf's tracepoints do; UnavailableError names what failed."""
    try:
        syscalls.unshare(syscalls.CLONE_NEWNS)
        syscalls.mount(None, "/", None, syscalls.MS_REC | syscalls.MS_SLAVE)
        for _ in range(_MAX_STACKED):
            try:
                syscalls.mount("tracefs", PERF_TRACEFS, "tracefs",
                               syscalls.MS_NOSUID | syscalls.MS_NODEV | syscalls.MS_NOEXEC)
                return
            except OSError as err:
                if err.errno != errno.EBUSY:  # EBUSY: a tracefs is on top there already
                    raise
                syscalls.umount2(PERF_TRACEFS, syscalls.MNT_DETACH)
        raise OSError(errno.EBUSY, f"more than {_MAX_STACKED} tracefs mounts are stacked "
                                   f"on {PERF_TRACEFS}")
    except OSError as err:
        raise UnavailableError(f"perf's own tracefs could not be mounted: {err.strerror}") from None


#: How many tracefs mounts stacked on PERF_TRACEFS `perf_namespace` detaches at most.
_MAX_STACKED = 8
