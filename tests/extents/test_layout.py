"""extents on real filesystems (ext4, xfs, btrfs on loop devices): FIEMAP paging, runs
against filefrag and against the device's own bytes, flags, partitions, bad files."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from backburner.base.errors import DataError, NotFoundError, UnavailableError, UsageError
from backburner.extents import fiemap, layout_of, physical_runs, runs, tables, verify
from backburner.extents.fiemap import open_regular

from .beds import (
    Bed,
    read_device,
    stale_data_then_fallocate,
    write_fragmented,
    write_random,
)

pytestmark = [pytest.mark.root, pytest.mark.timeout(120)]
MiB = 1 << 20


def filefrag_blocks(path: Path) -> dict[int, int]:
    """An independent oracle: file block -> device block, parsed from `filefrag -v`."""
    out = subprocess.run(["filefrag", "-v", "-b4096", str(path)], capture_output=True,
                         text=True, check=True).stdout
    blocks = {}
    for m in re.finditer(r"^\s*\d+:\s+(\d+)\.\.\s*(\d+):\s+(\d+)\.\.\s*(\d+):", out, re.M):
        lo, hi, plo = int(m[1]), int(m[2]), int(m[3])
        for i in range(hi - lo + 1):
            blocks[lo + i] = plo + i
    return blocks


def our_blocks(lay) -> dict[int, int]:
    out = {}
    for r in lay.runs:
        for off in range(0, r.length, 4096):
            out[(r.logical + off) // 4096] = (r.physical + off) // 4096
    return out


def assert_device_holds_the_file(lay, data: bytes) -> None:
    """Read each run straight from the device (plain reads, not our reader)."""
    for r in lay.runs:
        if r.kind == "data":
            assert read_device(lay.device.path, r.physical, r.length) == \
                data[r.logical:r.end], f"run at file byte {r.logical}"


@pytest.mark.parametrize("fstype", ["ext4", "xfs", "btrfs"])
def test_fragmented_file(make_bed, fstype: str) -> None:
    bed: Bed = make_bed(fstype)
    f = bed.path("frag")
    data = write_fragmented(bed, f, 4 * MiB, seed=1)
    lay = layout_of(f)
    assert lay.totals.runs >= 8, lay.runs  # fragmented on purpose
    assert lay.totals.jumps == lay.totals.runs - 1
    assert sum(r.length for r in lay.runs) == len(data)
    assert our_blocks(lay) == filefrag_blocks(f)
    assert_device_holds_the_file(lay, data)
    res = verify(f)
    assert res.mismatch is None and res.checked_bytes == len(data)
    assert res.checked_runs == lay.totals.runs


def test_paging_through_many_extents(make_bed) -> None:
    """Every other block written: one extent each; small pages give the same answer."""
    bed: Bed = make_bed("ext4")
    f = bed.path("sparse")
    with open(f, "wb") as fh:
        for i in range(0, 400, 2):
            fh.seek(i * 4096)
            fh.write(os.urandom(4096))
    whole = fiemap(f)
    assert len(whole) == 200
    for batch in (1, 3, 7, 199, 200):
        assert fiemap(f, batch=batch) == whole
    part = fiemap(f, start=10 * 4096, length=4 * 4096)  # LAST marks the range's end
    assert [e._replace(flags=e.flags & ~runs.LAST) for e in part] == whole[5:7]
    lay = layout_of(f)
    assert (lay.totals.runs, lay.totals.holes) == (200, 200 - 1)
    rs = physical_runs(f, [(4096 * 4, 4096 * 3), (0, 4096)])
    assert [(r.logical, r.length) for r in rs] == [(4096 * 4, 4096), (4096 * 6, 4096),
                                                   (0, 4096)]
    assert rs[0].physical == whole[2].physical


def test_unwritten_over_stale_data(make_bed) -> None:
    """The first installer bug: allocated-but-unwritten space read from the device is not
    the zeros the filesystem returns."""
    bed: Bed = make_bed("ext4")
    f = bed.path("fa")
    stale_data_then_fallocate(bed, f, 8 * MiB)
    lay = layout_of(f)
    assert {r.kind for r in lay.runs} == {"unwritten"}
    assert lay.totals.unwritten_bytes == 8 * MiB
    ok = verify(f)
    assert ok.mismatch is None and ok.checked_bytes == 0 and ok.skipped == {"unwritten": 8 * MiB}
    bad = verify(f, include_unwritten=True)
    assert bad.mismatch is not None
    off = bad.mismatch.file_offset
    run = next(r for r in lay.runs if r.logical <= off < r.end)
    assert bad.mismatch.device_offset == run.physical + off - run.logical
    assert read_device(lay.device.path, bad.mismatch.device_offset, 1) != b"\0"
    head = read_device(lay.device.path, run.physical, off - run.logical)
    assert head == bytes(len(head))  # everything before the reported byte was zeros


@pytest.mark.parametrize("fstype", ["ext4", "xfs"])
def test_appended_after_fallocate_keeps_kinds_apart(make_bed, fstype: str) -> None:
    """Written and unwritten space contiguous on the device must stay separate runs (the
    second installer bug mishandled adjacent runs)."""
    bed: Bed = make_bed(fstype)
    f = bed.path("grow")
    fd = os.open(f, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.posix_fallocate(fd, 0, 4 * MiB)
        os.pwrite(fd, os.urandom(MiB), 0)  # the first MiB written, the rest unwritten
        os.pwrite(fd, os.urandom(MiB), 4 * MiB)  # and appended past the fallocated end
        os.fsync(fd)
    finally:
        os.close(fd)
    lay = layout_of(f)
    kinds = [(r.logical, r.length, r.kind) for r in lay.runs]
    assert kinds[0] == (0, MiB, "data") and kinds[1] == (MiB, 3 * MiB, "unwritten"), kinds
    assert lay.runs[1].physical == lay.runs[0].physical_end  # contiguous, kept apart
    assert kinds[-1][2] == "data" and lay.runs[-1].end == 5 * MiB
    assert verify(f).mismatch is None


def test_delayed_allocation_is_synced_first(make_bed) -> None:
    """Buffered writes not yet written back have no place (ext4: delalloc); FIEMAP_FLAG_SYNC
    gives them one before we look, and without it a map is refused."""
    bed: Bed = make_bed("ext4")
    f = bed.path("fresh")
    with open(f, "wb") as fh:
        fh.write(os.urandom(MiB))  # no fsync
    early = layout_of(f, sync=False)
    assert all(r.flags & runs.DELALLOC for r in early.runs), early.runs
    with pytest.raises(DataError, match=r"\(not-allocated\).*not allocated yet"):
        tables.dm_targets(early.runs, early.file.size)
    synced = layout_of(f)
    assert [r.kind for r in synced.runs] == ["data"]
    assert tables.dm_targets(synced.runs, synced.file.size)


def test_partition_offsets(make_bed) -> None:
    bed: Bed = make_bed("ext4", 64 * MiB, partition_at=2048)
    f = bed.path("img")
    data = write_random(f, MiB, seed=3)
    lay = layout_of(f)
    dev = lay.device
    assert (dev.path, dev.disk, dev.start) == (bed.device, bed.loop, 2048 * 512)
    assert dev.is_partition and dev.size == 64 * MiB - 2048 * 512
    for r in lay.runs:  # the same bytes at partition offset x and disk offset start + x
        assert read_device(bed.loop, dev.start + r.physical, r.length) == data[r.logical:r.end]
    assert_device_holds_the_file(lay, data)
    assert verify(f).mismatch is None


def test_xfs_reflink_is_shared(make_bed) -> None:
    bed: Bed = make_bed("xfs")
    a, b = bed.path("a"), bed.path("b")
    write_random(a, MiB, seed=4)
    subprocess.run(["cp", "--reflink=always", str(a), str(b)], check=True)
    lay = layout_of(b)
    assert lay.totals.shared_bytes == MiB
    assert all(r.flags & runs.SHARED for r in lay.runs)


def test_btrfs_addresses_are_translated(make_bed) -> None:
    """btrfs FIEMAP answers in its logical address space; after translation through the
    chunk tree the device holds the file's bytes there."""
    bed: Bed = make_bed("btrfs")
    f = bed.path("data")
    data = write_random(f, 12 * MiB, seed=5)  # more than the first data chunk (mapped 1:1)
    raw = {e.physical for e in fiemap(f)}
    lay = layout_of(f)
    assert any(r.physical not in raw for r in lay.runs)  # really translated somewhere
    assert_device_holds_the_file(lay, data)
    assert verify(f).mismatch is None
    clone = bed.path("clone")
    subprocess.run(["cp", "--reflink=always", str(f), str(clone)], check=True)
    assert layout_of(clone).totals.shared_bytes == 12 * MiB


def test_btrfs_compressed_is_encoded(make_bed) -> None:
    bed: Bed = make_bed("btrfs", mount_options="compress-force=zstd")
    f = bed.path("zeros-ish")
    f.write_bytes(b"backburner " * 200_000)
    lay = layout_of(f)
    assert lay.totals.unmappable_bytes == lay.file.size
    assert {r.kind for r in lay.runs} == {"unmappable"}
    assert all(r.flags & runs.ENCODED for r in lay.runs)


def test_not_a_regular_file(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    for path, what in ((tmp_path, "a directory"), (tmp_path / "fifo", "a FIFO"),
                       (Path("/dev/null"), "a character device")):
        with pytest.raises(UsageError, match=what):
            layout_of(path)
    with pytest.raises(NotFoundError):
        layout_of(tmp_path / "missing")


def test_no_fiemap_here() -> None:
    """procfs files are regular files whose filesystem has no FIEMAP (like tmpfs, FUSE)."""
    with pytest.raises(UnavailableError, match="does not report extents"):
        fiemap("/proc/version")


def test_open_regular_does_not_block_on_a_fifo_swapped_in(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "p")
    with pytest.raises(UsageError), open_regular(tmp_path / "p"):
        pass
