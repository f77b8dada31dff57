"""A child of ours, from its start to its reaping: waited for on its pidfd, signalled, stopped
with its whole tree; and the register of live children that `stop_all` empties when the
work they belong to ends. Reaped only here, with wait4, so its rusage is its own."""

from __future__ import annotations

import logging
import os
import re
import select
import signal
import subprocess
import time
from collections.abc import Callable

from ..base import interrupts
from ..base.errors import SystemStateError
from ..kernel import procfs
from .outcome import Outcome, decode

log = logging.getLogger(__name__)

#: How long a killed process in uninterruptible IO is waited for (see `Child.stop_tree`).
IO_DRAIN_S = 300.0


def _own_rss_kb() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024
    except OSError:
        return 0


#: Children that are ours to stop when the work they belong to ends (see `stop_all`).
_LIVE: dict[int, Child] = {}
#: How many children have been launched: a transaction stops only those launched after it
#: opened (`launched()` then), so closing a nested one cannot kill an outer one's load.
_launched = 0


def launched() -> int:
    """The launch count now; pass it to `stop_all(since=...)` later."""
    return _launched


class Child:
    """A launched process. Reaped only through `wait`/`poll` so that wait4's rusage is ours."""

    def __init__(self, popen: subprocess.Popen[bytes] | Forked, started_ns: int, started_at: float,
                 *, detached: bool = False, own_group: bool = False):
        self.popen = popen
        self.pid = popen.pid
        self.started_ns = started_ns
        self.started_at = started_at
        self.launcher_rss_kb = _own_rss_kb()
        self.outcome: Outcome | None = None
        self.detached = detached
        self.own_group = own_group
        self._pidfd: int | None = None
        try:
            self._pidfd = os.pidfd_open(self.pid)
        except OSError:  # pragma: no cover - kernels before 5.3
            self._pidfd = None
        global _launched
        _launched += 1
        self.seq = _launched
        if not detached:
            _LIVE[self.pid] = self

    def _reap(self, flags: int) -> Outcome | None:
        """Reap the child (``flags``: 0 to wait, WNOHANG not to). A signal that interrupts a
        wait finds the child unreaped; one that lands once wait4 has returned is raised only
        after the outcome is kept: between the two, a ^C used to lose the status, and the
        stop that followed it failed on a child already gone (found by the fault injection)."""
        if self.outcome is not None:
            return self.outcome
        if not flags & os.WNOHANG:
            self._until_ended()
        with interrupts.deferred():
            return self._collect()

    def _until_ended(self) -> None:
        try:
            os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOWAIT)
        except ChildProcessError:
            pass  # _collect says so

    def _collect(self) -> Outcome | None:
        try:
            pid, status, ru = os.wait4(self.pid, os.WNOHANG)
        except ChildProcessError:
            raise SystemStateError(f"process {self.pid} was reaped by someone else") from None
        if pid == 0:
            return None
        ended = time.monotonic_ns()
        self.outcome = decode(pid, status, ru, self.started_ns, ended, self.started_at,
                              self.launcher_rss_kb)
        self.popen.returncode = self.outcome.exit_code if self.outcome.exit_code is not None \
            else -(self.outcome.signal or 0)
        self._close()
        return self.outcome

    def _close(self) -> None:
        _LIVE.pop(self.pid, None)
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None

    def poll(self) -> Outcome | None:
        return self._reap(os.WNOHANG)

    def wait(self, timeout: float | None = None) -> Outcome | None:
        """Block until the child ends (None on timeout). Sleeps on the pidfd, never polls."""
        if self.outcome is not None:
            return self.outcome
        if timeout is None:
            return self._reap(0)
        deadline = time.monotonic() + timeout
        while True:
            done = self.poll()
            if done is not None:
                return done
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            if self._pidfd is not None:
                select.select([self._pidfd], [], [], left)
            else:  # pragma: no cover
                time.sleep(min(left, 0.01))

    def signal(self, sig: int) -> None:
        if self.outcome is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def signal_group(self, sig: int) -> None:
        """Signal the child's whole process group (it must have been started with new_group)."""
        if self.outcome is None:
            try:
                os.killpg(self.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass

    def stop(self, grace: float = 5.0, group: bool = False) -> Outcome:
        """SIGTERM, wait up to `grace` seconds, then SIGKILL; always reaps."""
        send = self.signal_group if group else self.signal
        send(signal.SIGTERM)
        out = self.wait(grace)
        if out is None:
            send(signal.SIGKILL)
            out = self.wait()
        assert out is not None
        if group:  # stragglers that ignored SIGTERM in the group
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        return out

    def tree(self) -> dict[int, int]:
        """(pid -> start time) of the child's process group and all its descendants, which
        includes those that left the group with setsid() (fio's job processes do)."""
        found = set(procfs.descendants_of(self.pid))
        if self.own_group:
            found |= set(procfs.group_members(self.pid))
        return {pid: start for pid in found
                if pid != self.pid and (start := procfs.start_time(pid)) is not None}

    def stop_tree(self, grace: float = 10.0, verify_s: float = 5.0,
                  io_drain_s: float = IO_DRAIN_S) -> Outcome:
        """SIGTERM the child's group (a load's own clean-up runs), then make sure by PID and
        start time that nothing of its tree survives: SIGKILL what is left, and raise
        SystemStateError naming survivors that would not die.

        A killed process in uninterruptible IO (state D: an fsync or syncfs of a package
        manager on a slow disk) dies when its IO returns, which on a simulated 5400 rpm disk
        with a hundred megabytes dirty takes far longer than `verify_s`; so does one still
        running in the kernel with the kill pending, or already exiting (seen: a flatpak
        install on the simulated disk stayed in state R past `verify_s`). While every
        survivor is so on its way out the wait goes on, up to `io_drain_s`."""
        tracked = self.tree()
        send = self.signal_group if self.own_group else self.signal
        send(signal.SIGTERM)
        deadline = time.monotonic() + grace
        out = None
        while out is None and time.monotonic() < deadline:
            tracked.update(self.tree())  # children forked while it shuts down
            out = self.wait(min(0.05, max(deadline - time.monotonic(), 0)))
        if out is None:
            tracked.update(self.tree())
            send(signal.SIGKILL)
            out = self.wait()
        assert out is not None
        group = self.pid if self.own_group else None
        left = _survivors(group, tracked)
        start = time.monotonic()
        deadline, said = start + verify_s, False
        while left and (time.monotonic() < deadline or (
                time.monotonic() < start + io_drain_s and _dying(left))):
            if time.monotonic() >= deadline and not said:
                log.info("waiting for %d killed process(es) to finish dying", len(left))
                said = True
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.02)
            left = _survivors(group, tracked)
        if left:
            states = ", ".join(f"{pid} ({procfs.state_of(pid) or '?'})" for pid in left)
            raise SystemStateError(f"processes {states} of {self.popen.args!r} survived "
                                   "stopping")
        return out

    def wait_ready(self, timeout: float, line: re.Pattern[str] | None = None,
                   path: str | None = None,
                   shown: Callable[[], int | None] | None = None) -> int | None:
        """Wait until a line of the child's stdout matches `line`, `path` exists or
        `shown()` gives the time something else saw it ready (a window); the monotonic
        time (ns) it happened, or None at timeout or when the child exits first."""
        deadline = time.monotonic() + timeout
        pipe = self.popen.stdout
        buf = b""
        while time.monotonic() < deadline:
            if path and os.path.exists(path):
                return time.monotonic_ns()
            if shown is not None and (at := shown()) is not None:
                return at
            if pipe is None:
                if self.poll() is not None:
                    return None
                time.sleep(0.005)
                continue
            readable, _, _ = select.select([pipe], [], [], 0.005)
            if not readable:
                continue
            chunk = os.read(pipe.fileno(), 65536)
            if not chunk:
                pipe = None
                continue
            buf += chunk
            now = time.monotonic_ns()
            lines = buf.split(b"\n")
            if line and any(line.search(ln.decode(errors="replace")) for ln in lines):
                return now
            buf = lines[-1]
        return None


def _dying(pids: list[int]) -> bool:
    """Every one of `pids` is on its way out after the SIGKILL (`procfs.on_its_way_out`)."""
    return all(procfs.on_its_way_out(pid) for pid in pids)


def _survivors(pgid: int | None, tracked: dict[int, int]) -> list[int]:
    left = set(procfs.group_members(pgid)) if pgid is not None else set()
    left |= {pid for pid, start in tracked.items() if procfs.start_time(pid) == start}
    return sorted(left)


def terminate(pid: int, start: int, grace: float = 5.0, kill_wait: float = 10.0) -> None:
    """Stop a process that is not our child (a load or daemon whose starter died) and every
    process below it or in its group: SIGTERM to it (its own clean-up runs), then SIGKILL
    to whatever of the tree is left, each only while a PID still has the start time it had
    when found (never a recycled PID). The tree is read before the first signal and again
    while anything of it lives: once a process dies its orphans are reparented and can no
    longer be found below it. fio's job processes call setsid() and wait on a semaphore for
    their main process's go; a main process killed before it gave it leaves them waiting for
    good, holding the testbed's filesystem (seen after `restore`). Survivors all on their
    way out (uninterruptible IO on a slow disk) are waited for up to IO_DRAIN_S; others,
    or longer, raise SystemStateError (the journal entry stays for a later `restore`)."""
    if procfs.start_time(pid) != start:
        return
    tree = {pid: start, **_below(pid, start)}
    signal_process(pid, start, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and procfs.start_time(pid) == start:
        tree.update(_below(pid, start))
        time.sleep(0.02)
    begun = time.monotonic()
    while left := _alive(tree):
        waited = time.monotonic() - begun
        if waited >= kill_wait and (waited >= IO_DRAIN_S or not _dying(left)):
            raise SystemStateError(f"{len(left)} process(es) of PID {pid} would not die: "
                                   f"{', '.join(map(str, left))}")
        for p in left:
            tree.update(_below(p, tree[p]))  # forked since it was found
        for p in _alive(tree):
            signal_process(p, tree[p], signal.SIGKILL)
        time.sleep(0.02)


def _below(pid: int, start: int) -> dict[int, int]:
    """(pid -> start time) of the live processes below `pid` and in its process group,
    nothing if `pid` is no longer the process that started at `start`."""
    found = {p: s for p in {*procfs.descendants_of(pid), *procfs.group_members(pid)}
             if p != pid and (s := procfs.start_time(p)) is not None}
    return found if procfs.start_time(pid) == start else {}


def _alive(tree: dict[int, int]) -> list[int]:
    return sorted(p for p, s in tree.items() if procfs.start_time(p) == s)


def signal_process(pid: int, start: int, sig: int) -> bool:
    """Send `sig` to a process that is not our child (a tracer's launcher) only if `pid`
    is still the process that started at `start` (never a recycled PID: the signal goes
    through a pidfd opened before the check). False when it is gone."""
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return False
    try:
        if procfs.start_time(pid) != start:
            return False
        signal.pidfd_send_signal(fd, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False
    finally:
        os.close(fd)


def stop_all(grace: float = 5.0, since: int = 0) -> None:
    """Stop every child that is still ours (not detached) and was launched after `since`,
    with its whole tree: called before a transaction undoes its changes, so that no helper
    keeps writing into a filesystem that is about to be unmounted (it would then write onto
    the disk beneath)."""
    for child in list(_LIVE.values()):
        if child.seq <= since:
            continue
        if child.outcome is None:
            try:
                child.stop_tree(grace)
            except SystemStateError as err:
                log.warning("%s", err)
        _LIVE.pop(child.pid, None)


class Forked:
    """What `Child` needs of a Popen, for a child that is a fork of us running a function
    (`fork_call`), not a program."""

    def __init__(self, pid: int, name: str) -> None:
        self.pid = pid
        self.args = [name]
        self.returncode: int | None = None
        self.stdout = None
