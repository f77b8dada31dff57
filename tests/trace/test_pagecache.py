"""trace.pagecache: perf script's lines of the page-cache tracepoint read back (a file's
pages, a block device's own, large folios), and the tracepoint recorded for real."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from backburner import system
from backburner.trace import pagecache

LINES = """\
26302  1462.719899229: dev 0:3 ino 700000 pfn=0x147881 ofs=5102178304 order=0
26220  1462.720080927: dev 254:0 ino 98601f pfn=0x10702e ofs=270336 order=1
26338  1462.864150179: dev 7:2 ino ca07c pfn=0x118c78 ofs=32768 order=2
not a line of the tracepoint
"""


def test_parse_reads_files_pages_and_block_devices_own() -> None:
    got = pagecache.parse(LINES.splitlines())
    assert got == [
        pagecache.PageIn(1462.719899229, 26302, os.makedev(7, 0), 0, 5102178304 // 4096, 1,
                         device=True),
        pagecache.PageIn(1462.720080927, 26220, os.makedev(254, 0), 0x98601F, 66, 2),
        pagecache.PageIn(1462.864150179, 26338, os.makedev(7, 2), 0xCA07C, 8, 4),
    ]


@pytest.mark.root
@pytest.mark.skipif(pagecache.missing() is not None, reason="needs perf as root")
def test_the_tracepoint_sees_a_cold_read_in_order(tmp_path: Path, state_dir: Path) -> None:
    """Two files of a fresh ext4 read cold, one after the other: their pages, in that
    order, from the reading process."""
    image, mnt = tmp_path / "fs.img", tmp_path / "mnt"
    mnt.mkdir()
    with system.Transaction("test-pages") as tx:
        tx.apply(system.MadeFile(str(image), 32 << 20))
        loop = tx.apply(system.LoopDevice(str(image)))
        tx.apply(system.Filesystem(loop, str(image), "ext4", ["-q", "-F"]))
        tx.apply(system.Mount(loop, str(mnt), "ext4"))
        (mnt / "a").write_bytes(os.urandom(40960))
        (mnt / "b").write_bytes(os.urandom(8192))
        os.sync()
        dev = os.stat(mnt).st_dev
        system.drop_caches()
        order = pagecache.PageOrder([dev])
        order.start()
        try:
            pid = os.fork()
            if pid == 0:
                (mnt / "b").read_bytes()
                (mnt / "a").read_bytes()
                os._exit(0)
            os.waitpid(pid, 0)
        finally:
            got = order.stop()
        mine = [p for p in got if p.pid == pid]
        inos = [p.ino for p in mine if not p.device]
        b, a = os.stat(mnt / "b").st_ino, os.stat(mnt / "a").st_ino
        assert inos and inos[0] == b and a in inos and inos.index(a) > inos.index(b)
        assert sum(p.pages for p in mine if p.ino == a) >= 10
        assert all(p.dev == dev for p in mine if not p.device)
