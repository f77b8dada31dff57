"""The one record `backburner status` needs that no other state holds: a `run` job.

`run --pid` and `govern` journal every change they make to processes they did not start
(their journals are what `status` reads); `apply` leaves its files. A job that `run`
starts gets its priorities in the child, before exec, and nothing of it is journaled
(there is nothing to undo: the job ends with them, and its group is the transaction's).
So `run` writes a small record while the job runs — `<state dir>/jobs/run-PID-START.json`,
naming the `backburner run` process (the job is its child), the command and what was set —
and removes it when the job has ended. A record whose process is gone (a SIGKILL) is
ignored by readers and removed by the next `run`. The record is bookkeeping of
backburner's own, like govern's status file, not a change to the machine: failing to
write it never stops the job.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import system
from ..base.errors import BackburnerError
from ..files import safepath
from ..kernel import procfs

log = logging.getLogger(__name__)

FORMAT = 1


def folder() -> Path:
    return system.state_dir() / "jobs"


@dataclass(frozen=True)
class JobRecord:
    """A `run` job as its record says it: the `backburner run` process (`pid`, `start`),
    the command, what was set (the policy's settings) and since when."""

    pid: int
    start: int
    argv: list[str]
    sets: dict[str, str]
    since: float
    groups: list[str]  # cgroup directories (or the scope unit) made for the job, if any

    @property
    def alive(self) -> bool:
        return procfs.start_time(self.pid) == self.start


def _path(pid: int, start: int) -> Path:
    return folder() / f"run-{pid}-{start}.json"


def write(record: JobRecord) -> Path | None:
    """Write the record whole (a private temp file linked into place); None, with a debug
    line, when the state directory cannot take it."""
    try:
        where = safepath.private_dir(folder(), "state directory")
        _prune(where)
        path = _path(record.pid, record.start)
        tmp = where / f".{path.name}.tmp"
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        fd = safepath.create_new(tmp)
        try:
            os.write(fd, json.dumps({"format": FORMAT, **vars(record)}).encode() + b"\n")
        finally:
            os.close(fd)
        os.replace(tmp, path)
        return path
    except (OSError, BackburnerError) as err:
        log.debug("no status record for this job: %s", err)
        return None


def remove(path: Path | None) -> None:
    if path is not None:
        try:
            os.unlink(path)
        except OSError:
            pass


def _prune(where: Path) -> None:
    """Records of `run` processes that are gone (killed before they could remove theirs)."""
    for rec in _read_all(where):
        if not rec.alive:
            remove(_path(rec.pid, rec.start))


def _read_all(where: Path) -> list[JobRecord]:
    out = []
    for path in sorted(where.glob("run-*.json")):
        try:
            safepath.check_file(path, "job record")
            data: dict[str, Any] = json.loads(path.read_text())
            if data.pop("format", None) != FORMAT:
                continue
            out.append(JobRecord(**data))
        except (OSError, ValueError, TypeError, BackburnerError) as err:
            log.debug("skipping %s: %s", path, err)
    return out


def read() -> list[JobRecord]:
    """The records of `run` jobs still running (their `backburner run` process lives)."""
    where = folder()
    try:
        safepath.check_chain(where, "state directory")
    except BackburnerError as err:
        log.debug("no job records: %s", err)
        return []
    if not where.is_dir():
        return []
    return [rec for rec in _read_all(where) if rec.alive]


@contextmanager
def running_job(argv: Sequence[str], sets: dict[str, str],
                groups: Sequence[str] = ()) -> Iterator[None]:
    """The record of this `backburner run` process's job, for as long as the block runs."""
    me = os.getpid()
    start = procfs.start_time(me)
    path = None
    if start is not None:
        path = write(JobRecord(me, start, list(argv), dict(sets), time.time(), list(groups)))
    try:
        yield
    finally:
        remove(path)
