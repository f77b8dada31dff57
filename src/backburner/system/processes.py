"""Processes: priorities of running processes we did not start (`run --pid`, `govern`)
and of those born of them, and daemons we start and own."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .. import spawn
from ..base.errors import NotFoundError, SystemStateError
from ..kernel import priorities, procfs
from ..policy import grammar, live
from .cgroups import CgroupMove
from .change import Change


@dataclass
class Priorities(Change):
    """New IO class / CPU policy for every thread of a running process tree we did not start
    (`run --pid`, `govern`). The old values of each thread are journaled, so undo (and
    `restore` after a crash) puts back those of threads that still live; threads born since
    get what their process had before."""

    kind: ClassVar[str] = "priorities"
    makes: ClassVar[bool] = False
    pid: int
    io: str | None = None
    cpu: str | None = None

    def describe(self) -> str:
        sets = ", ".join(f"{k} {v}" for k, v in (("io", self.io), ("cpu", self.cpu)) if v)
        return f"priorities of PID {self.pid} and its tree ({sets or 'nothing'})"

    def _policy(self) -> Any:
        return grammar.Policy("journaled",
                               io=priorities.IOPrio.parse(self.io) if self.io else None,
                               cpu=priorities.CPUPolicy.parse(self.cpu) if self.cpu else None)

    def read(self) -> dict[str, Any]:
        return {str(tid): snap for tid, snap in live.snapshot_tree(self.pid).items()}

    def apply(self) -> list[int]:
        return live.apply_to_tree(self.pid, self._policy())

    def saved(self, old: Any, result: Any) -> dict[str, Any]:
        """Every thread's journaled snapshot, by thread id (text, as in the journal)."""
        return dict(old or {})

    def undo(self, old: Any, result: Any) -> str | None:
        saved = {int(t): snap for t, snap in (old or {}).items()}
        if not saved:
            return None
        live.restore_tree(self.pid, saved)
        if procfs.start_time(self.pid) is not None and not live.is_same_process(
                self.pid, saved):
            return (f"left PID {self.pid} alone: the process it was has exited and the PID "
                    "now belongs to another one")
        return None


@dataclass
class Inherited(Change):
    """A process born of a governed one (fork): it inherited the new priorities and cgroups
    from its parent, so its "old" values are not what it has but what the governed ancestor
    had before (`old`: io, policy, nice; `moves`: our cgroup -> the group it came from).
    apply() only closes the race of a fork during the ancestor's change; undo() puts the
    ancestor's old values on it if it still lives, even after its parent has exited."""

    kind: ClassVar[str] = "inherited"
    makes: ClassVar[bool] = False
    pid: int
    io: str | None = None
    cpu: str | None = None
    old: dict[str, int] = field(default_factory=dict)
    moves: dict[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        return f"priorities and cgroups PID {self.pid} inherited from a governed parent"

    def read(self) -> dict[str, Any]:
        start = procfs.start_time(self.pid)
        if start is None:
            raise SystemStateError(f"process {self.pid} is gone")
        return {"start": start}

    def apply(self) -> None:
        if self.io or self.cpu:
            Priorities(self.pid, self.io, self.cpu).apply()

    def undo(self, old: Any, result: Any) -> str | None:
        start = (old or {}).get("start")
        if start is None or procfs.start_time(self.pid) != start:
            return None  # gone, or the PID is someone else's now
        if self.old:
            live.restore_tree(self.pid, {self.pid: {**self.old, "start": start}})
        notes = [CgroupMove(self.pid, path).undo({"start": start, "from": origin}, None)
                 for path, origin in self.moves.items()]
        return "; ".join(n for n in notes if n) or None


@dataclass
class PrioritiesFirst(Priorities):
    """`Priorities` for `govern`'s reaction to a program that has just started (exec). At
    exec a process has one thread: its old values are all that is read and journaled before
    it is changed, at once. Then the CPU is yielded to the program (the exec that woke us
    may have run on this CPU, and the program is still loading), and only then is the rest
    of its tree (threads and children born since) read, journaled as a partial result and
    changed. One of those that already shows the new values was born after the change and
    copied them: the undo gives it what the process had before, as for any thread born
    later. Measured: the tree walk before the first change put the change at ~0.3 ms after
    the exec event on a cold daemon (benchmarks/govern_timeline.py)."""

    kind: ClassVar[str] = "priorities-first"
    _POLICIES: ClassVar[dict[tuple[str | None, str | None], Any]] = {}

    def spec(self) -> dict[str, Any]:
        return {"pid": self.pid, "io": self.io, "cpu": self.cpu}

    def _policy(self) -> Any:
        key = (self.io, self.cpu)
        found = self._POLICIES.get(key)
        if found is None:
            found = self._POLICIES[key] = super()._policy()
        return found

    def read(self) -> dict[str, Any]:
        snap = priorities.snapshot_thread(self.pid)
        if snap is None:
            raise NotFoundError(f"no process with PID {self.pid}",
                                "check the PID with `ps -p PID`")
        self.__dict__["_leader_old"] = snap
        return {str(self.pid): snap}

    def apply_with(self, record: Callable[[Any], None]) -> Any:
        policy = self._policy()
        try:
            if policy.io is not None:
                priorities.ioprio_set(self.pid, policy.io)
            if policy.cpu is not None:
                priorities.set_cpu(self.pid, policy.cpu)
        except OSError:
            pass  # ended meanwhile; anything else is raised by the walk below
        os.sched_yield()
        old = self.__dict__.pop("_leader_old", None)
        new = priorities.snapshot_thread(self.pid)
        rest = {str(tid): snap for tid, snap in live.snapshot_tree(self.pid).items()
                if tid != self.pid and not _copied(snap, old, new)}
        record({"old": rest, "done": []})  # before any of them changes
        return {"old": rest, "done": live.apply_to_tree(self.pid, policy)}

    def saved(self, old: Any, result: Any) -> dict[str, Any]:
        merged = dict(old or {})
        if isinstance(result, dict):
            merged.update(result.get("old") or {})
        return merged

    def undo(self, old: Any, result: Any) -> str | None:
        if isinstance(result, dict):
            return super().undo(self.saved(old, result), result)
        # stopped before the rest of the tree was journaled (a crash, or a failure): only
        # the process's own thread and what shows our change are ours to put back
        leader = (old or {}).get(str(self.pid))
        if not leader or procfs.start_time(self.pid) != leader["start"]:
            return None  # gone, or its PID is another process's now
        policy = self._policy()
        for _proc, tid in live.tree_threads(self.pid):
            snap = priorities.snapshot_thread(tid)
            if tid == self.pid or (snap is not None and live.has_policy(snap, policy)):
                priorities.restore_thread(tid, leader)
        return None


def _copied(snap: dict[str, int], old: dict[str, int] | None,
            new: dict[str, int] | None) -> bool:
    """A thread whose every value is the process's own thread's, before or after the
    change: born of it around the change (one born half-way copies some of each). Any
    other value (a child that was nice before the exec, a realtime thread) is its own."""
    if old is None or new is None:
        return False
    return all(snap[k] in (old[k], new[k]) for k in ("io", "policy", "nice"))


@dataclass
class Daemon(Change):
    """A background process we start and own (e.g. a FUSE server). Undo stops it."""

    kind: ClassVar[str] = "daemon"
    makes: ClassVar[bool] = True  # a process we start: none can be there before
    argv: list[str]
    ready_path: str = ""  # wait for this path to exist (e.g. the served file), if given
    ready_timeout: float = 10.0

    def describe(self) -> str:
        return f"daemon {' '.join(self.argv)}"

    def apply(self) -> dict[str, int]:
        return self.apply_with(lambda _partial: None)

    def apply_with(self, record: Callable[[Any], None]) -> dict[str, int]:
        child = spawn.launch(self.argv, new_group=True, stdin=subprocess.DEVNULL, detached=True)
        start = procfs.start_time(child.pid)
        result = {"pid": child.pid, "start": start or 0}
        _DAEMONS[child.pid] = child
        record(result)  # journaled before the wait: a SIGKILL now still finds the daemon
        deadline = time.monotonic() + self.ready_timeout
        while self.ready_path and not os.path.exists(self.ready_path):
            if child.poll() is not None or time.monotonic() > deadline:
                out = child.poll() or child.stop(1.0)
                raise SystemStateError(
                    f"{self.argv[0]} did not become ready ({out.describe()})")
            time.sleep(0.01)
        return result

    def undo(self, old: Any, result: Any) -> None:
        if not result:
            return
        pid = result["pid"]
        child = _DAEMONS.pop(pid, None)
        if child is not None:
            child.stop(5.0, group=True)
            return
        spawn.terminate(pid, result["start"])


_DAEMONS: dict[int, Any] = {}


@dataclass
class Started(Change):
    """A process of ours, started by `spawn` and stopped by its owner (a bench load), put
    in the journal so that `restore` after a SIGKILL stops it where its death signal did
    not: a fio found with that SIGTERM blocked and pending, waiting on a futex for good,
    kept its testbed's filesystem busy. Undo: SIGTERM, then SIGKILL, only while the PID
    is still that process (gone already: nothing to do)."""

    kind: ClassVar[str] = "started"
    makes: ClassVar[bool] = True  # a process we started: known by its PID and start time
    pid: int
    start: int

    def describe(self) -> str:
        return f"process {self.pid} (ours, running)"

    def apply(self) -> None:
        return None  # started by its owner; this only journals it

    def undo(self, old: Any, result: Any) -> None:
        spawn.terminate(self.pid, self.start)
