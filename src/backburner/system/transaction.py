"""Transactions: changes journaled before they are applied and undone in reverse order
when the transaction ends (normally, on an exception, ^C or SIGTERM); `restore` replays the
journals of runs that died; a daemon's long-lived transaction retires changes as the
processes they concern exit."""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .. import spawn
from ..base import interrupts
from ..base.errors import BackburnerError, SystemStateError, UnsafePathError
from ..files import safepath
from ..kernel import procfs
from .change import Change
from .journal import (
    BY_HAND,
    Entry,
    Journal,
    VolatileJournal,
    journal_entries,
    journal_time,
    stale_journals,
)
from .paths import journal_dir, trusted_dir

log = logging.getLogger(__name__)


class Transaction:
    """``with Transaction("bench") as tx: tx.apply(SysfsValue(...))`` — undone at exit."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.entries: list[Entry] = []
        self.journal: Journal | None = None
        self._seq = 0
        self._launched_before = 0
        self.handed_over = False

    def __enter__(self) -> Transaction:
        self._launched_before = spawn.launched()
        jdir = trusted_dir(journal_dir(), "state directory")
        pid = os.getpid()
        path = jdir / f"{self.label}-{pid}-{time.time_ns()}.jsonl"
        self.journal = Journal(path)
        self.journal.append({"event": "begin", "label": self.label, "pid": pid,
                             "start": procfs.start_time(pid), "time": time.time()})
        return self

    def apply(self, change: Change) -> Any:
        assert self.journal is not None, "use Transaction as a context manager"
        old = change.read()
        self._seq += 1
        entry = Entry(self._seq, change, old)
        self.journal.append({"event": "intent", "seq": entry.seq, "kind": change.kind,
                             "spec": change.spec(), "old": old})
        self.entries.append(entry)  # undone even if apply fails half-way
        log.debug("apply %s", change.describe())
        journal = self.journal

        def record(partial: Any) -> None:
            entry.result, entry.recorded = partial, True
            journal.append({"event": "applied", "seq": entry.seq, "result": partial})

        try:
            result = change.apply_with(record)
        except Exception:
            # the apply said it failed: what it recorded is all it made (an interrupt
            # is no such word: the change may be done, and is judged as after a crash)
            entry.failed = True
            journal.append({"event": "failed", "seq": entry.seq})
            raise
        record(result)
        return change.returned(entry.result)

    def undo_all(self) -> None:
        """Undo in reverse order with termination signals held, so a second ^C cannot cut it."""
        assert self.journal is not None
        with interrupts.held():
            errors = _errors(_undo_entries(self.entries, self.journal))
            self.entries.clear()
            if not errors:
                self.journal.path.unlink(missing_ok=True)
        if errors:
            raise SystemStateError(
                "could not undo: " + "; ".join(errors), "run `backburner restore` to retry"
            )

    def hand_over(self, pid: int, note: str = "") -> None:
        """Keep the changes after we exit, owned by `pid` (e.g. the daemon that serves them).

        While that process lives the journal is left alone; once it dies the journal is stale
        and `restore_stale` undoes it; `undo_journal` undoes it on request (e.g. `remove`).
        """
        assert self.journal is not None
        self.journal.append({"event": "owner", "pid": pid, "start": procfs.start_time(pid),
                             "note": note, "time": time.time()})
        self.entries.clear()
        self.handed_over = True

    def __exit__(self, *exc: object) -> None:
        if self.handed_over and exc[0] is None:
            return
        # a second ^C while helpers are being stopped (that can take their grace period)
        # must not skip the undo: signals are held from here on, as in undo_all
        with interrupts.held():
            # no helper of ours may keep using what is about to be undone
            spawn.stop_all(since=self._launched_before)
            if self.handed_over:  # failed after handing over: take the changes back
                assert self.journal is not None
                _, self.entries = journal_entries(self.journal)
            self.undo_all()


@dataclass(frozen=True)
class _Undone:
    entry: Entry
    note: str | None = None   # deliberately left in place, and why
    error: str | None = None  # could not be undone

    @property
    def message(self) -> str:
        what = self.entry.change.describe()
        if self.error:
            return f"could not undo {what}: {self.error}"
        return self.note or f"undid {what}"


def _undo_entries(entries: list[Entry], journal: Journal) -> list[_Undone]:
    done = []
    for entry in reversed(entries):
        try:
            note = entry.undo()
            journal.append({"event": "undone", "seq": entry.seq})
            done.append(_Undone(entry, note=note))
        except Exception as err:  # noqa: BLE001 - keep undoing the rest, report all
            done.append(_Undone(entry, error=str(err)))
    return done


def _errors(done: list[_Undone]) -> list[str]:
    return [f"{d.entry.change.describe()}: {d.error}" for d in done if d.error]


#: Change kinds older versions journaled and this one no longer has: never undone from an old
#: journal ("tree" removed a whole folder tree, whatever path its journal line named).


def undo_journal(journal: Journal, report: Callable[[str], None] = lambda _m: None
                 ) -> list[str]:
    """Undo one journal now, whoever owns it (its owner is expected to be told or gone)."""
    return _replay(journal, report)


def restore_stale(report: Callable[[str], None] = lambda _m: None) -> list[str]:
    """Replay every stale journal, newest first (each in reverse order of its changes).

    A journal that cannot be undone does not stop the others; the failures are raised at
    the end (one as it is, several together), and the failed journals stay on disk.
    """
    undone, failed = _restore_stale(report)
    if len(failed) == 1:
        raise failed[0]
    if failed:
        raise SystemStateError("; ".join(str(err) for err in failed),
                               "fix the cause, then `backburner restore`")
    return undone


def _restore_stale(report: Callable[[str], None]) -> tuple[list[str], list[BackburnerError]]:
    undone: list[str] = []
    failed: list[BackburnerError] = []
    stale = list(stale_journals())
    stale.sort(key=lambda j: journal_time(j), reverse=True)
    for journal in stale:
        try:
            undone += _replay(journal, report)
        except BackburnerError as err:
            failed.append(err)
    return undone, failed


def recover(report: Callable[[str], None]) -> None:
    """What a state-changing command does first: restore what crashed runs left, but only
    warn when that fails, one line per journal kept, so one stuck, unreadable or untrusted
    journal does not block every later command. (A state directory that cannot be trusted
    still stops the command: its journals, and the next one, would be in it.)"""
    _, failed = _restore_stale(lambda m: report(f"recovering: {m}"))
    for err in failed:
        report("could not recover an earlier run's changes: " + " ".join(str(err).split()))


def _replay(journal: Journal, report: Callable[[str], None]) -> list[str]:
    try:  # what it says is about to be done as root
        safepath.check_file(journal.path, "journal")
    except UnsafePathError as err:
        raise UnsafePathError(f"{err.message}: nothing in it was undone",
                              f"if nobody else changed it, {err.hint or 'make it safe'}; "
                              f"else {BY_HAND}") from None
    header, entries = journal_entries(journal)
    with interrupts.held():
        done = _undo_entries(entries, journal)
    undone: list[str] = []
    for d in done:
        if d.error:
            continue  # raised below, together
        msg = f"{d.message} (left by {header.get('label')} pid {header.get('pid')})"
        undone.append(msg)
        report(msg)
    errors = _errors(done)
    if errors:
        raise SystemStateError(f"could not restore from {journal.path}: " + "; ".join(errors),
                               "fix the cause, then `backburner restore`")
    journal.path.unlink(missing_ok=True)
    return undone


def commit(tx: Transaction) -> None:
    """Keep what `tx` applied (an `apply` that finished): its journal goes in one unlink,
    so neither the end of the ``with`` block nor a later `restore` undoes it. Before this,
    every change is undone on an error, ^C, SIGTERM, or by `restore` after a crash; after
    it the command has succeeded, and a signal arriving on its way out is held (it exited
    130, "system state restored", with the changes kept)."""
    assert tx.journal is not None, "commit inside the transaction"
    interrupts.settle()
    tx.entries.clear()
    tx.journal.path.unlink(missing_ok=True)


class LiveTransaction(Transaction):
    """A transaction as long-lived as a daemon (`govern`): changes come and go (a governed
    process exits: its entries are retired, since there is nothing left to undo), and the
    journal is compacted when retired lines outweigh live ones, so neither memory nor the
    journal grows with the number of processes ever governed."""

    COMPACT_AFTER = 2000  # retired entries before the journal is rewritten

    def __init__(self, label: str) -> None:
        super().__init__(label)
        self._retired = 0
        self._header: dict[str, Any] = {}

    def __enter__(self) -> LiveTransaction:
        super().__enter__()
        assert self.journal is not None
        self._header = self.journal.events()[0]
        self.journal = VolatileJournal(self.journal.path)
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            super().__exit__(*exc)
        finally:
            if isinstance(self.journal, VolatileJournal):
                self.journal.close()

    def record(self, change: Change) -> Entry:
        """apply() a change and return its entry (old state, result) for a later `retire`.
        If apply fails, what it did is undone at once and the error is raised."""
        self.apply_or_undo(change)
        return self.entries[-1]

    def apply_or_undo(self, change: Change) -> Any:
        try:
            return self.apply(change)
        except Exception:
            entry = next((e for e in reversed(self.entries) if e.change is change), None)
            if entry is not None:
                try:
                    entry.undo()
                finally:
                    self.retire(entry)
            raise

    def undo_one(self, entry: Entry) -> None:
        """Put back one live change now (a unit no governed process needs any more), then
        forget it; an error is raised after the entry is retired (it was tried)."""
        if entry not in self.entries:
            return
        try:
            with interrupts.held():
                note = entry.undo()
        finally:
            self.retire(entry)
        if note:
            log.info("%s", note)

    def retire(self, entry: Entry) -> None:
        """Forget an entry whose change needs no undo any more (its process has exited)."""
        assert self.journal is not None
        try:
            self.entries.remove(entry)
        except ValueError:
            return
        self.journal.append({"event": "undone", "seq": entry.seq})
        self._retired += 1
        if self._retired >= max(self.COMPACT_AFTER, 2 * len(self.entries)):
            self.compact()

    def compact(self) -> None:
        """Rewrite the journal with only the live entries (atomically: a crash leaves the
        old or the new one, both complete)."""
        assert self.journal is not None
        lines = [self._header]
        for e in self.entries:
            lines.append({"event": "intent", "seq": e.seq, "kind": e.change.kind,
                          "spec": e.change.spec(), "old": e.old})
            if e.recorded:
                lines.append({"event": "applied", "seq": e.seq, "result": e.result})
            if e.failed:
                lines.append({"event": "failed", "seq": e.seq})
        tmp = self.journal.path.with_name(f".{self.journal.path.name}.{os.getpid()}.tmp")
        fd = safepath.create_new(tmp)
        try:
            os.write(fd, "".join(json.dumps(ln) + "\n" for ln in lines).encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.journal.path)
        if isinstance(self.journal, VolatileJournal):
            self.journal.close()  # the next line goes to the new file
        self._retired = 0
