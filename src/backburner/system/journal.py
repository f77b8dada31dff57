"""The undo journal: an append-only JSON-lines file per transaction, and how a later run
finds and reads the journals of runs that died."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..base.errors import SystemStateError, UnsafePathError
from ..files import safepath
from ..kernel import procfs
from .change import Change
from .paths import journal_dir

log = logging.getLogger(__name__)


class Journal:
    """An append-only JSON-lines file, fsync'd per line: the undo log of one session."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def append(self, event: dict[str, Any]) -> None:
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW
                     | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, (json.dumps(event) + "\n").encode())
            os.fsync(fd)
        finally:
            os.close(fd)

    def events(self) -> list[dict[str, Any]]:
        out = []
        for line in self.path.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                break  # a torn last line from a crash: everything before it is intact
        return out


@dataclass
class Entry:
    """One change of a transaction: its old state, what its apply recorded (`recorded`:
    whether it recorded anything, None included), and whether its apply failed. Neither
    outcome is known of an entry whose run died during the apply."""

    seq: int
    change: Change
    old: Any
    result: Any = None
    recorded: bool = False
    failed: bool = False

    def undo(self) -> str | None:
        """The undo core's one way to undo a change (see `Change`): the undo of a kind that
        makes an object is not called when the object was there before, nor when its apply
        failed having recorded nothing it made; every other undo is."""
        change = self.change
        if change.makes and change.existed(self.old):
            return f"kept {change.describe()}: it was there before"
        if change.makes and self.failed and not self.recorded:
            return None  # the apply failed before making anything of ours
        return change.undo(self.old, self.result)


_RETIRED_KINDS = {"tree": "removing a folder tree"}
BY_HAND = "read it (JSON lines: each change and the old value), put back by hand what it " \
    "changed, then delete it"


def journal_entries(journal: Journal) -> tuple[dict[str, Any], list[Entry]]:
    """The header and the entries still to undo. A journal this version cannot read (a
    field or kind of a newer version, a retired kind, damage) is a SystemStateError naming
    it, never another exception: recovery must warn about it and go on, not crash."""
    try:
        return _parse_journal(journal)
    except (OSError, TypeError, KeyError, ValueError, AttributeError) as err:
        why = " ".join(f"{type(err).__name__}: {err}".split())[:200]
        raise SystemStateError(f"{journal.path} cannot be read by this backburner ({why})",
                               BY_HAND) from None


def _parse_journal(journal: Journal) -> tuple[dict[str, Any], list[Entry]]:
    events = journal.events()
    if not events and journal.path.stat().st_size:
        raise ValueError("no journal line in it")
    header = dict(events[0]) if events and events[0].get("event") == "begin" else {}
    if events and not header:
        raise ValueError("its first line is not the begin of a transaction")
    entries: dict[int, Entry] = {}
    for ev in events:
        if ev["event"] == "owner":  # handed over: liveness is now the new owner's
            header.update(pid=ev["pid"], start=ev["start"], note=ev.get("note", ""))
        elif ev["event"] == "intent":
            entries[ev["seq"]] = Entry(ev["seq"], _change_of(journal, ev), ev["old"])
        elif ev["event"] == "applied" and ev["seq"] in entries:
            entries[ev["seq"]].result = ev["result"]
            entries[ev["seq"]].recorded = True
        elif ev["event"] == "failed" and ev["seq"] in entries:
            entries[ev["seq"]].failed = True
        elif ev["event"] == "undone":
            entries.pop(ev["seq"], None)
    return header, sorted(entries.values(), key=lambda e: e.seq)


def _change_of(journal: Journal, ev: dict[str, Any]) -> Change:
    kind = ev["kind"]
    cls = Change.registry.get(kind)
    if kind in _RETIRED_KINDS:
        raise SystemStateError(
            f"{journal.path}: change kind {kind!r} ({_RETIRED_KINDS[kind]}) of an older "
            "backburner is no longer undone", BY_HAND)
    if cls is None:
        raise SystemStateError(
            f"{journal.path}: unknown change kind {kind!r}",
            f"it was written by a newer backburner: restore with that version, or {BY_HAND}")
    return cls.from_spec(ev["spec"])


def stale_journals() -> Iterator[Journal]:
    """Journals whose owning process is gone (crashed, killed, or the machine rebooted),
    and those that cannot be trusted or read: their replay refuses them and says why."""
    jdir = journal_dir()
    safepath.check_chain(jdir, "state directory")
    if not jdir.is_dir():
        return
    for path in sorted(jdir.glob("*.jsonl")):
        journal = Journal(path)
        try:
            safepath.check_file(path, "journal")
            header, _ = journal_entries(journal)
        except (SystemStateError, UnsafePathError):
            yield journal
            continue
        pid, start = header.get("pid"), header.get("start")
        if pid and start is not None and procfs.start_time(pid) == start:
            continue  # its owner is alive (possibly us) and will undo itself
        yield journal


@dataclass(frozen=True)
class JournalInfo:
    """A journal as `slowdisk remove` and friends look for it: who owns it, what it did."""

    journal: Journal
    label: str
    owner_pid: int | None
    alive: bool
    note: str
    results: list[Any]


def journals() -> list[JournalInfo]:
    """The journals this version can read and trust (`recover` reports the others)."""
    jdir = journal_dir()
    safepath.check_chain(jdir, "state directory")
    if not jdir.is_dir():
        return []
    out = []
    for path in sorted(jdir.glob("*.jsonl")):
        journal = Journal(path)
        try:
            safepath.check_file(path, "journal")
            header, entries = journal_entries(journal)
        except (SystemStateError, UnsafePathError) as err:
            log.debug("skipping %s: %s", path, err)
            continue
        pid, start = header.get("pid"), header.get("start")
        alive = bool(pid) and start is not None and procfs.start_time(pid) == start
        out.append(JournalInfo(journal, header.get("label", "?"), pid, alive,
                               header.get("note", ""), [e.result for e in entries]))
    return out


def journal_time(journal: Journal) -> float:
    try:
        first = journal.path.open().readline()
        return float(json.loads(first).get("time", 0))
    except (OSError, ValueError):
        return 0.0


class VolatileJournal(Journal):
    """A journal whose lines are written but not fsync'd, for changes that cannot outlive a
    reboot anyway (priorities of running processes, cgroups, freezer states): what must
    survive is the daemon's own death, even by SIGKILL, and the page cache does. An fsync
    per governed process would cost milliseconds exactly when the disk is busy."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.fd: int | None = None  # kept open: a governed process costs one write

    def append(self, event: dict[str, Any]) -> None:
        if self.fd is None:
            self.fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW
                              | os.O_CLOEXEC, 0o600)
        os.write(self.fd, (json.dumps(event) + "\n").encode())

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
