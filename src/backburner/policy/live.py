"""A policy on live threads: the child's own, between fork and exec (`apply_to_self`, called
by `spawn`, so the job never runs an instruction at the old priority), and every thread of
a running process tree (`apply_to_tree`, for `run --pid` and `govern`), with the tree's
old values saved and put back (`snapshot_tree`, `restore_tree`).

Only `system.Priorities` changes a tree it did not start (with the old values journaled
first); `spawn` applies a policy to its own child.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..base.errors import NotFoundError, NotRootError, SystemStateError
from ..kernel import procfs
from ..kernel.priorities import ioprio_set, restore_thread, set_cpu, snapshot_thread
from .grammar import Policy


def apply_to_self(policy: Policy) -> None:
    """Called in the child between fork and exec (async-signal-safe enough: no locks held)."""
    if policy.io is not None:
        ioprio_set(0, policy.io)
    if policy.cpu is not None:
        set_cpu(0, policy.cpu)


def tree_threads(pid: int) -> list[tuple[int, int]]:
    """(process, thread) pairs of pid and all its descendants."""
    return [(proc, tid) for proc in [pid, *procfs.descendants_of(pid)]
            for tid in procfs.threads_of(proc)]


def apply_to_tree(pid: int, policy: Policy) -> list[int]:
    """Re-prioritise every thread of pid and of its descendants; returns the thread ids done.

    Only `system.Priorities` calls this (with the old values journaled first)."""
    if not Path(f"/proc/{pid}").exists():
        raise NotFoundError(f"no process with PID {pid}", "check the PID with `ps -p PID`")
    done: list[int] = []
    for _proc, tid in tree_threads(pid):
        try:
            if policy.io is not None:
                ioprio_set(tid, policy.io)
            if policy.cpu is not None:
                set_cpu(tid, policy.cpu)
        except ProcessLookupError:
            continue  # the thread ended while we walked: nothing left to change
        except PermissionError as err:
            if os.geteuid() != 0:
                raise NotRootError(
                    f"changing the priorities of PID {pid} (another user's process, "
                    "or a higher priority)") from None
            raise SystemStateError(
                f"not allowed to change priorities of thread {tid}: {err.strerror}"
            ) from None
        except OSError as err:
            if err.errno == 3:  # ESRCH from the raw syscall
                continue
            raise SystemStateError(f"changing thread {tid}: {err}") from None
        done.append(tid)
    return done


def has_policy(snap: dict[str, int], policy: Policy) -> bool:
    """Whether a thread's snapshot already shows what `policy` sets (a thread born after
    its creator was changed copies the new values)."""
    if policy.io is not None and snap["io"] != policy.io.value:
        return False
    cpu = policy.cpu
    if cpu is None:
        return True
    kind = {os.SCHED_IDLE: "idle", os.SCHED_BATCH: "batch",
            os.SCHED_OTHER: "normal"}.get(snap["policy"])  # realtime: never ours
    return kind == cpu.kind and (cpu.kind == "idle" or cpu.nice is None
                                 or snap["nice"] == cpu.nice)


def snapshot_tree(pid: int) -> dict[int, dict[str, int]]:
    """Every thread's snapshot, keyed by thread id (a process's own id = its main thread)."""
    out = {}
    for _proc, tid in tree_threads(pid):
        snap = snapshot_thread(tid)
        if snap is not None:
            out[tid] = snap
    return out


def restore_tree(pid: int, saved: dict[int, dict[str, int]]) -> int:
    """Put back saved snapshots on the threads of pid's tree that still live. A thread born
    after the snapshot gets what its process's main thread had (else what pid had). Returns
    the number of threads restored.

    Only what is provably the journaled process is touched: when pid now has another start
    time (it exited, and a new process got its PID) nobody's tree is walked; only journaled
    threads that still live with their journaled start time (children that outlived it)
    are put back."""
    fallback = saved.get(pid)
    if not is_same_process(pid, saved):
        return sum(1 for tid, snap in saved.items()
                   if procfs.start_time(tid) == snap["start"] and restore_thread(tid, snap))
    restored = 0
    for proc, tid in tree_threads(pid):
        snap = saved.get(tid)
        if snap is None or procfs.start_time(tid) != snap["start"]:
            snap = saved.get(proc) or fallback
        if snap is not None and restore_thread(tid, snap):
            restored += 1
    return restored


def is_same_process(pid: int, saved: dict[int, dict[str, int]]) -> bool:
    """Whether pid is still the process whose snapshot `saved` holds (same start time)."""
    snap = saved.get(pid)
    return snap is not None and procfs.start_time(pid) == snap["start"]
