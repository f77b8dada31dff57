"""kernel.fanotify: the event layout read back in the host's byte order, and a mark on
a real filesystem reporting an open with a descriptor on the file."""

from __future__ import annotations

import os
import select
from pathlib import Path

import pytest

from backburner.base.errors import UnavailableError
from backburner.kernel import fanotify


def _event(mask: int, fd: int, pid: int, version: int = fanotify.FANOTIFY_METADATA_VERSION
           ) -> bytes:
    return fanotify.EVENT.pack(fanotify.EVENT.size, version, 0, fanotify.EVENT.size, mask,
                               fd, pid)


def test_events_are_read_one_after_another() -> None:
    buf = _event(fanotify.FAN_OPEN, 7, 100) + _event(fanotify.FAN_Q_OVERFLOW, -1, 0)
    assert fanotify.parse_events(buf) == [fanotify.Event(fanotify.FAN_OPEN, 7, 100),
                                          fanotify.Event(fanotify.FAN_Q_OVERFLOW, -1, 0)]
    assert fanotify.EVENT.size == 24  # struct fanotify_event_metadata


def test_an_unknown_layout_version_is_refused_not_misread() -> None:
    with pytest.raises(UnavailableError, match="version 4"):
        fanotify.parse_events(_event(fanotify.FAN_OPEN, 7, 100, version=4))


@pytest.mark.root
def test_a_marked_filesystem_reports_an_open_with_the_file(tmp_path: Path) -> None:
    target = tmp_path / "watched"
    target.write_bytes(b"x")
    fd = fanotify.fanotify_init(fanotify.FAN_CLASS_NOTIF | fanotify.FAN_CLOEXEC
                                | fanotify.FAN_NONBLOCK, os.O_RDONLY | os.O_CLOEXEC)
    try:
        fanotify.fanotify_mark(fd, fanotify.FAN_MARK_ADD | fanotify.FAN_MARK_MOUNT,
                               fanotify.FAN_OPEN, str(tmp_path))
        with open(target, "rb"):
            pass
        found = []
        while select.select([fd], [], [], 5)[0] and not found:
            for ev in fanotify.parse_events(os.read(fd, 4096)):
                try:
                    if os.readlink(f"/proc/self/fd/{ev.fd}") == str(target):
                        found.append(ev)
                finally:
                    os.close(ev.fd)
        assert found and found[0].pid == os.getpid() and found[0].mask & fanotify.FAN_OPEN
        with pytest.raises(OSError):
            fanotify.fanotify_mark(fd, fanotify.FAN_MARK_ADD, fanotify.FAN_OPEN,
                                   str(tmp_path / "missing"))
    finally:
        os.close(fd)
