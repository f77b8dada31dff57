"""readahead/freshness: a pack's file checked by its recorded inode (no directory read) or by
path, and a file renamed since still found as the recorded one.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers import bb

from backburner import system
from backburner.extents import fiemap
from backburner.readahead import freshness, record
from backburner.readahead.byinode import ByInode
from backburner.readahead.pack import Entry, FileState, Pack

from .conftest import PAGE, Bed, resident
from .test_replay import device_cached, pack_path_of

# it reads which device pages are cached, which other workers' cache drops and reads change
# meanwhile (it failed once beside them): run alone
pytestmark = pytest.mark.alone


def test_files_are_checked_by_inode_without_reading_their_directories(
        bed: Bed, tmp_path: Path) -> None:
    """As root a replay opens each file by its recorded inode: the check reads no
    directory (the directories then join the data's sweep, from the device entry); by
    path it reads them. A file renamed since is still the recorded file (its inode, size
    and mtime) and is read."""
    many = bed.mnt / "many"
    many.mkdir()
    for i in range(400):  # a directory of 20 KiB: pages of its own in the middle
        (many / (f"{i:04d}" + "-" * 40)).write_bytes(b"x")
    target = many / ("0399" + "-" * 40)
    st = os.stat(target)
    fsid = int(os.statvfs(target).f_fsid) & ((1 << 64) - 1)
    pack = Pack((Entry(os.fsencode(target), FileState(st.st_dev, fsid, st.st_ino, st.st_size,
                                                      st.st_mtime_ns), ((0, PAGE),)),))
    fd = os.open(many, os.O_RDONLY | os.O_DIRECTORY)
    try:
        pages = sorted({p // PAGE * PAGE for e in fiemap(fd, sync=True)
                        for p in range(e.physical, e.physical + e.length, 1024)})
    finally:
        os.close(fd)
    inner = [(p, PAGE) for p in pages[1:-1]]
    assert len(inner) >= 2

    def settle() -> None:
        os.sync()
        assert record._settled(str(bed.mnt))  # the journal lets go of the new blocks
        system.drop_caches()
        assert not device_cached(bed.loop, inner)

    settle()
    by_inode = ByInode()
    try:
        assert [v for _, v, _ in freshness.check_files(pack, by_inode)] == ["ok"]
    finally:
        by_inode.close()
    by_inode_read = [device_cached(bed.loop, [(p, PAGE)]) for p in pages]
    assert not any(by_inode_read[1:-1]), by_inode_read  # no path looked up
    settle()
    assert [v for _, v, _ in freshness.check_files(pack)] == ["ok"]
    by_path_read = [device_cached(bed.loop, [(p, PAGE)]) for p in pages]
    assert sum(by_path_read) > sum(by_inode_read), (by_path_read, by_inode_read)
    os.rename(target, many / "renamed")
    settle()
    res = bb("readahead", "replay", "--wait", str(pack_path_of(pack, tmp_path)))
    assert res.returncode == 0, res.err
    assert res.out.startswith("replayed 1 file, ")
    assert resident(os.fsencode(many / "renamed")) != []
