"""slowdisk/hostqueue.py: the host queue of a drive that takes one command at a time,
in-process on a real image file, when its dispatcher fails."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from backburner.slowdisk.fs import SlowDiskFS
from backburner.slowdisk.image import ImageFile
from backburner.slowdisk.model import Disk, Waiting
from backburner.slowdisk.profiles import DVD

SIZE = 64 << 20
KiB4 = 4096
MARK = b"slowdisk-marker!" * 256  # 4 KiB


def test_a_failing_host_queue_degrades_to_arrival_order(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The DVD's host queue picks in a thread of its own; if it fails, the request it left
    waiting and every later one are still served (a FUSE request that never returns would
    hang the loop device's IO)."""
    image = tmp_path / "disc.img"
    image.write_bytes(MARK + bytes(SIZE - len(MARK)))
    fs = SlowDiskFS(Disk(DVD, SIZE), ImageFile(str(image), False), read_only=True)

    def broken(*_: object) -> list[Waiting]:
        raise RuntimeError("injected")

    monkeypatch.setattr(fs.disk, "next_command", broken)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fs.read("/disk.img", KiB4, 0, 0)),
                              daemon=True)  # a hang fails the test, not pytest's exit
    reader.start()
    reader.join(10)
    assert not reader.is_alive() and got == [MARK[:KiB4]]
    assert fs.read("/disk.img", KiB4, KiB4, 0) == bytes(KiB4)
    assert fs.stats()["requests"] == 2
