"""The daemon's status file: what `govern status` shows (format in docs/guide/govern.md).

`<state dir>/govern/status.json` (root's state dir is /var/lib/backburner, mode 0700; the
file is 0600): rewritten whole and renamed into place, so a reader never sees half of it.
It is rewritten when what is governed or throttled changes, and otherwise with the counters
at most every few seconds, and only when an event arrives (the daemon never wakes up just
to write it). A lock file next to it keeps a second daemon from starting.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from pathlib import Path
from typing import Any

from .. import system
from ..base.errors import BusyError, DataError, NotFoundError, denied
from ..files import safepath
from ..kernel import procfs

FORMAT = 1


def folder() -> Path:
    return system.state_dir() / "govern"


def status_path() -> Path:
    return folder() / "status.json"


def write(data: dict[str, Any]) -> None:
    """Atomically replace the status file (a private temp file renamed over it)."""
    path = status_path()
    tmp = path.with_name(f".status.{os.getpid()}.tmp")
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass
    fd = safepath.create_new(tmp)
    try:
        os.write(fd, json.dumps({"format": FORMAT, **data}, indent=1).encode() + b"\n")
    finally:
        os.close(fd)
    os.replace(tmp, path)


def read() -> dict[str, Any]:
    """The last status written, with `running` telling whether its daemon still lives."""
    path = status_path()
    try:
        safepath.check_chain(path.parent, "state directory")
        text = path.read_text()
    except FileNotFoundError:
        raise NotFoundError("govern has not run here: no status file",
                            f"start it with `backburner govern run` ({path})") from None
    except PermissionError as err:
        raise denied(f"reading the govern status ({path})", err.strerror) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise DataError(f"{path} is not a govern status file: {err}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise DataError(f"{path} is not a govern status file of format {FORMAT}")
    pid, start = data.get("pid"), data.get("start")
    data["running"] = bool(data.get("running")) and isinstance(pid, int) \
        and procfs.start_time(pid) == start
    return data


class Lock:
    """One daemon per state directory: an flock held as long as the daemon lives (the
    kernel drops it when the daemon dies, however it dies)."""

    def __init__(self) -> None:
        self.fd: int | None = None

    def __enter__(self) -> Lock:
        where = safepath.private_dir(folder(), "state directory")
        path = where / "lock"
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise BusyError(f"another govern daemon runs (PID {owner})",
                            "stop it first, or give it another BACKBURNER_STATE_DIR") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self.fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def now() -> float:
    return time.time()
