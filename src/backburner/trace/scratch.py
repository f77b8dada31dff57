"""Scratch directories for the tracers' output (perf.data, strace's files): private, under
the work root, journaled, and in memory when we may mount.

A directory made with mkdtemp in /tmp or /dev/shm outlives a SIGKILL, and `restore` does
not know it. Made through the undo core it goes like every other change: when the `with`
block ends, on an error, ^C or SIGTERM, and by `backburner restore` after a SIGKILL. As root
a tmpfs is mounted on it (journaled too): a recording must not be written to a disk that is
being measured (for `bench --trace`, the device under test; for `trace record`, the disk the
command itself may use), and the work root is on a disk.
"""

from __future__ import annotations

from contextlib import ExitStack

from .. import system

#: Only we may enter it; nothing in it runs or is a device.
TMPFS_OPTIONS = "mode=0700,nosuid,nodev,noexec"


def private_dir(stack: ExitStack, prefix: str) -> str:
    """A new directory only we can enter, `work_root()/PREFIX*`, on its own tmpfs as root;
    both undone (unmounted, then removed with what is left in it) when `stack` closes."""
    tx = stack.enter_context(system.Transaction("trace"))
    path: str = tx.apply(system.PrivateDir(str(system.work_root()), prefix))
    if system.is_root():
        tx.apply(system.Mount("tmpfs", path, "tmpfs", TMPFS_OPTIONS))
    return path
