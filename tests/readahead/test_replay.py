"""replay on a real loop-mounted ext4: exactly the recorded pages become resident (checked
with mincore, independently), changed and missing files are skipped with counts, a pack
whose files all changed reads nothing and says so, the order and IO class follow the
device's rotational flag, the budget cuts in access order, and the deadline holds even on
a device slow enough to take minutes (a slowdisk FUSE file), in the foreground and in the
background."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest
from helpers import bb, wait_for

from backburner import system
from backburner.base.quantities import human_size
from backburner.extents import physical_runs
from backburner.kernel import pagecache, procfs
from backburner.readahead import packfile, replay
from backburner.readahead.byinode import ByInode, cut
from backburner.readahead.pack import Entry, FileState, Pack
from backburner.slowdisk import device as slowdisk

from .conftest import PAGE, Bed, resident, write_tree

# another worker's cache drop (every cold bench trial drops the page cache machine-wide)
# evicts the pages a replay just read before the check sees them: run alone
pytestmark = [pytest.mark.root, pytest.mark.alone]
FILES = ["a/one.txt", "big.bin", "b c/three\nfile", "lib/mod.py"]


def _record(bed: Bed, tmp_path: Path, name: str = "app.pack", *extra: str) -> Path:
    out = tmp_path / name
    script = ("cat a/one.txt > /dev/null; dd if=big.bin of=/dev/null bs=4096 skip=100 count=3 "
              "2>/dev/null; cat 'b c'/three* lib/mod.py > /dev/null")
    res = bb("readahead", "record", "-o", str(out), "--mount", str(bed.mnt), "--drop-caches",
             "--read-ahead-kb", "0", *extra, "--", "sh", "-c", script, cwd=bed.mnt)
    assert res.returncode == 0, res.err
    pack = packfile.load(out)
    assert [e.path for e in files_of(pack)] == [bed.path(f) for f in FILES], res.err
    assert [e.path for e in pack.entries if e.device] == [os.fsencode(bed.loop)]
    return out


def files_of(pack: Pack) -> list[Entry]:
    return [e for e in pack.entries if not e.device]


def device_cached(dev: str, ranges) -> bool:
    """Every page of the ranges is in the device's page cache (cachestat counts them)."""
    fd = os.open(dev, os.O_RDONLY)
    try:
        return all(pagecache.cachestat(fd, off, ln).cached == ln // PAGE for off, ln in ranges)
    finally:
        os.close(fd)


def test_replay_brings_exactly_the_recorded_pages_in(bed: Bed, tmp_path: Path) -> None:
    pack_path = _record(bed, tmp_path)
    pack = packfile.load(pack_path)
    meta = pack.entries[0]  # the inode tables and directories the start read, first
    assert meta.device and meta.ranges
    system.drop_caches()
    assert all(resident(bed.path(f)) == [] for f in FILES)
    res = bb("readahead", "replay", "--wait", str(pack_path))
    assert res.returncode == 0, res.err
    assert res.out.startswith("replayed 4 files, ")
    assert f"(metadata {human_size(meta.bytes)})" in res.out  # read through the device
    # (part of it never leaves the cache while the filesystem is mounted: superblock,
    # bitmaps, the root directory; what drop_caches does release is read back)
    assert "physical order" in res.out and "be:4" in res.out  # a loop device is rotational
    for e in files_of(pack):
        assert resident(e.path) == list(e.ranges), e.path
    assert device_cached(bed.loop, meta.ranges)
    assert resident(bed.path("unread.txt")) == []
    assert resident(bed.path("a/two.txt")) == []


def test_changed_and_missing_files_are_skipped(bed: Bed, tmp_path: Path) -> None:
    pack_path = _record(bed, tmp_path)
    with open(bed.path("a/one.txt"), "ab") as f:
        f.write(b"an update")
    os.unlink(bed.path("lib/mod.py"))  # its inode is gone too
    system.drop_caches()
    res = bb("readahead", "replay", "--wait", str(pack_path))
    assert res.returncode == 0, res.err
    assert res.out.startswith("replayed 2 files, ")
    assert "skipped 1 changed, 1 missing" in res.out
    assert resident(bed.path("a/one.txt")) == []
    assert resident(bed.path("big.bin")) == [(100 * PAGE, 3 * PAGE)]
    shown = bb("readahead", "show", str(pack_path))
    assert "1 changed, 1 missing" in shown.out, shown.out


def pack_path_of(pack: Pack, tmp_path: Path) -> Path:
    out = tmp_path / "again.pack"
    packfile.save(out, pack)
    return out


def test_cut_splits_ranges_at_spans() -> None:
    inside, outside = cut([(0, 100), (150, 10), (300, 50)], [(50, 160), (320, 330)])
    assert inside == [(50, 50), (150, 10), (320, 10)]
    assert outside == [(0, 50), (300, 20), (330, 20)]


def test_show_verify_catches_content_that_kept_its_identity(bed: Bed, tmp_path: Path) -> None:
    """A rewrite in place with the size and mtime put back matches by identity; only the
    digest of the recorded bytes tells. Bytes outside the recorded ranges do not count."""
    pack_path = _record(bed, tmp_path, "hashed.pack", "--hash")
    assert all(e.digest is not None for e in files_of(packfile.load(pack_path)))
    plain = bb("readahead", "show", "--verify", str(_record(bed, tmp_path)))
    assert "verified  no digests to check (record with --hash" in plain.out, plain.out
    clean = bb("readahead", "show", "--verify", str(pack_path))
    assert clean.returncode == 0, clean.err
    assert "verified  4 digests: 0 with other bytes now" in clean.out, clean.out
    assert "0 changed, 0 missing" in clean.out

    def rewrite(rel: str, offset: int) -> None:
        path = bed.path(rel)
        st = os.stat(path)
        with open(path, "r+b") as f:
            f.seek(offset)
            old = f.read(1)
            f.seek(offset)
            f.write(bytes([old[0] ^ 0xFF]))
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))

    rewrite("a/one.txt", 5000)  # inside the recorded (whole-file) range
    rewrite("big.bin", 0)  # only pages 100-102 were read: outside
    shown = bb("readahead", "show", str(pack_path))
    assert "0 changed, 0 missing" in shown.out, shown.out  # identity alone cannot tell
    verified = bb("readahead", "show", "--verify", "--files", str(pack_path))
    assert verified.returncode == 0, verified.err
    assert "verified  4 digests: 1 with other bytes now" in verified.out, verified.out
    assert "1 changed, 0 missing" in verified.out
    status = {line.split()[-1]: line.split()[0] for line in verified.out.splitlines()
              if line.startswith(("ok ", "changed "))}
    assert status[os.fsdecode(bed.path("a/one.txt"))] == "changed", verified.out
    assert status[os.fsdecode(bed.path("big.bin"))] == "ok", verified.out


def test_a_pack_whose_files_all_changed_reads_nothing(bed: Bed, tmp_path: Path) -> None:
    pack_path = _record(bed, tmp_path)
    for f in FILES:
        data = open(bed.path(f), "rb").read()
        os.unlink(bed.path(f))
        with open(bed.path(f), "wb") as out:  # same name and bytes, another inode
            out.write(data)
    res = bb("readahead", "replay", "--wait", str(pack_path))
    assert res.returncode == 0, res.err
    assert res.out.startswith("replay read nothing: all 4 files of the pack changed")


def test_order_and_priority_follow_the_device(bed: Bed, tmp_path: Path) -> None:
    pack = packfile.load(_record(bed, tmp_path))
    rotational = f"/sys/block/{os.path.basename(bed.loop)}/queue/rotational"
    with system.Transaction("test-flash") as tx:
        tx.apply(system.SysfsValue(rotational, "0"))
        system.drop_caches()
        flash = replay.replay(pack)
    assert [(d.order, d.io, d.rotational) for d in flash.devices] == [("access", "idle",
                                                                        False)]
    with system.Transaction("test-disk") as tx:
        tx.apply(system.SysfsValue(rotational, "1"))
        system.drop_caches()
        disk = replay.replay(pack)
    assert [(d.order, d.io, d.rotational) for d in disk.devices] == [("physical", "be:4",
                                                                       True)]
    assert flash.bytes == disk.bytes == sum(e.bytes for e in pack.entries)
    assert flash.metadata_bytes == disk.metadata_bytes == pack.entries[0].bytes
    # the sweep is ascending: its pieces, placed independently, come in device order
    opened = replay._open_all(pack, replay.ReplayReport(len(pack.entries)), None)
    try:
        pieces = replay.plan(opened, replay.ReplayOptions(order="physical"))[0].pieces
        places = [p.logical if opened[p.file].entry.device else
                  physical_runs(os.fsdecode(opened[p.file].entry.path),
                                [(p.logical, p.length)])[0].physical for p in pieces]
    finally:
        for f in opened:
            os.close(f.fd)
    assert places == sorted(places) and len(places) >= 5


def test_the_files_are_checked_and_queued_while_the_metadata_is_read(
        bed: Bed, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No idle device between the stages: the files' check (a stat each) and their reads
    are issued before the replay waits for the metadata (the order of the calls)."""
    pack = packfile.load(_record(bed, tmp_path))
    calls: list[str] = []

    def kind(fd: int) -> str:
        return "meta" if stat.S_ISBLK(os.fstat(fd).st_mode) else "file"

    real_queue, real_preadv, real_check = replay._queue, os.preadv, replay.check_files

    def queue(fd: int, offset: int, length: int) -> None:
        calls.append(f"queue {kind(fd)}")
        real_queue(fd, offset, length)

    def preadv(fd: int, bufs: list, offset: int) -> int:
        calls.append(f"wait {kind(fd)}")
        return real_preadv(fd, bufs, offset)

    def check(p: Pack, by_inode: ByInode | None = None) -> list:
        calls.append("check files")
        return real_check(p, by_inode)

    monkeypatch.setattr(replay, "_queue", queue)
    monkeypatch.setattr(replay.os, "preadv", preadv)
    monkeypatch.setattr(replay, "check_files", check)
    system.drop_caches()
    report = replay.replay(pack)
    assert report.files == 4 and report.metadata_bytes
    first = {c: calls.index(c) for c in dict.fromkeys(calls)}
    assert first["queue meta"] < first["check files"] < first["queue file"] < first["wait meta"]
    assert first["wait meta"] < first["wait file"]


def test_the_worker_closes_what_it_was_given_even_when_stopped_before_it_ran(
        bed: Bed, tmp_path: Path) -> None:
    pack = packfile.load(_record(bed, tmp_path))
    opened = replay._open_all(pack, replay.ReplayReport(len(pack.entries)), None)
    worker = replay._Worker(opened, list, replay.ReplayOptions())
    worker.stop.set()  # the deadline came before the thread got going
    worker.thread.start()
    worker.thread.join(5)
    for f in opened:
        with pytest.raises(OSError):
            os.fstat(f.fd)


def test_the_report_is_final_when_replay_returns(bed: Bed, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A deadline during the files' check: replay returns at the deadline, and the worker,
    which goes on checking, no longer writes to the report it returned."""
    pack = packfile.load(_record(bed, tmp_path))
    os.unlink(bed.path(FILES[0]))  # one missing file, counted only by a complete check
    real_check = replay.check_files

    def slow_check(p: Pack, by_inode: ByInode | None = None) -> list:
        time.sleep(0.6)
        return real_check(p, by_inode)

    monkeypatch.setattr(replay, "check_files", slow_check)
    t0 = time.monotonic()
    report = replay.replay(pack, replay.ReplayOptions(deadline_s=0.2))
    assert time.monotonic() - t0 < 0.5 and report.stopped == "deadline"
    before = (report.missing, report.changed, report.files, report.bytes, report.stopped)
    time.sleep(0.8)
    assert (report.missing, report.changed, report.files, report.bytes,
            report.stopped) == before == (0, 0, 0, report.bytes, "deadline")


def test_the_budget_keeps_what_was_read_first(bed: Bed, tmp_path: Path) -> None:
    pack_path = _record(bed, tmp_path)
    meta = packfile.load(pack_path).entries[0].bytes  # metadata comes first, then the files
    system.drop_caches()
    budget = meta + 16 * 1024
    res = bb("readahead", "replay", "--wait", "--budget", str(budget), str(pack_path))
    assert res.returncode == 0, res.err
    assert f"cut at the budget of {human_size(budget)}" in res.out
    assert resident(bed.path("a/one.txt")) == [(0, 3 * PAGE)]  # the first file, whole
    assert resident(bed.path("big.bin")) == [(100 * PAGE, 2 * PAGE)]  # then 6384 bytes


@pytest.fixture
def slow_file(tmp_path: Path, state_dir: Path):
    """A file that takes minutes to read: the image a flat:40 slowdisk serves over FUSE
    (40 ms per request, whatever its size)."""
    with system.Transaction("test-slow") as tx:
        blank = slowdisk.serve_blank(tx, "flat:40", 256 << 20)
        yield blank.served


def _slow_pack(path: str, tmp_path: Path) -> Path:
    st = os.stat(path)
    entry = Entry(os.fsencode(path), FileState(st.st_dev, 0, st.st_ino, st.st_size,
                                               st.st_mtime_ns), ((0, 256 << 20),))
    out = tmp_path / "slow.pack"
    packfile.save(out, Pack((entry,)))
    return out


def test_the_deadline_holds_in_the_foreground(slow_file: str, tmp_path: Path) -> None:
    pack_path = _slow_pack(slow_file, tmp_path)
    t0 = time.monotonic()
    res = bb("readahead", "replay", "--wait", "--deadline", "1", str(pack_path))
    took = time.monotonic() - t0
    assert res.returncode == 0, res.err
    assert "stopped at the deadline" in res.out
    assert took < 1 + 4  # interpreter start and exit included, on a busy machine


def test_a_background_replay_returns_at_once_and_ends_by_its_deadline(
        slow_file: str, tmp_path: Path) -> None:
    pack_path = _slow_pack(slow_file, tmp_path)
    t0 = time.monotonic()
    res = bb("readahead", "replay", "--deadline", "2", str(pack_path))
    assert res.returncode == 0, res.err
    assert time.monotonic() - t0 < 4
    pid = int(res.out.split("(PID ")[1].split(",")[0])
    assert procfs.start_time(pid) is not None  # still replaying
    wait_for(lambda: procfs.start_time(pid) is None, timeout=10, what="the background replay")


def _recorded_image(tmp_path: Path) -> tuple[Path, Path, str, Path]:
    """A pack recorded on an image mounted at tmp/mnt: (pack, mount point it was recorded
    at, the loop device it was on, the image, kept after its transaction ended)."""
    image, mnt = tmp_path / "disk.img", tmp_path / "mnt"
    mnt.mkdir()
    with system.Transaction("test-first") as tx:
        tx.apply(system.MadeFile(str(image), 64 << 20))
        first = tx.apply(system.LoopDevice(str(image)))
        tx.apply(system.Filesystem(first, str(image), "ext4", ["-q", "-F"]))
        tx.apply(system.Mount(first, str(mnt), "ext4"))
        write_tree(mnt)
        os.sync()
        pack_path = _record(Bed(mnt, first, image), tmp_path)
        kept = tmp_path / "kept.img"
        os.link(image, kept)  # MadeFile's undo removes disk.img, not this name
    return pack_path, mnt, first, kept


def test_an_image_under_another_loop_device_still_matches(tmp_path: Path,
                                                           state_dir: Path) -> None:
    """Recorded through one loop device, replayed through another: files match by
    filesystem id, and the metadata is read from the device the image is on now."""
    pack_path, mnt, first, image_kept = _recorded_image(tmp_path)
    (tmp_path / "spacer").write_bytes(b"\0" * 4096)
    with system.Transaction("test-second") as tx:
        tx.apply(system.LoopDevice(str(tmp_path / "spacer")))  # takes the first free number
        second = tx.apply(system.LoopDevice(str(image_kept)))
        tx.apply(system.Mount(second, str(mnt), "ext4"))
        assert second != first
        pack = packfile.load(pack_path)
        assert os.stat(mnt / "big.bin").st_dev != files_of(pack)[1].state.dev
        res = bb("readahead", "replay", "--wait", str(pack_path))
        assert res.returncode == 0, res.err
        assert res.out.startswith("replayed 4 files, ") and "(metadata " in res.out, res.out
        assert f"on {second}" in res.out
        for e in files_of(pack):
            assert resident(e.path) == list(e.ranges), e.path


def test_a_copy_of_the_image_mounted_elsewhere_replays_with_rebase(
        tmp_path: Path, state_dir: Path) -> None:
    """How a bench uses a pack: recorded on an image mounted at one place, replayed as a
    preparation step on a copy of that image the bench mounted somewhere else. As root
    the files are found by inode on the copy (the same filesystem id, the same inodes);
    by path (--rebase, or without root) they are found where the copy is mounted."""
    pack_path, mnt, _, copy = _recorded_image(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with system.Transaction("test-copy") as tx:
        loop = tx.apply(system.LoopDevice(str(copy)))
        tx.apply(system.Mount(loop, str(elsewhere), "ext4"))
        system.drop_caches()
        res = bb("readahead", "replay", "--wait", str(pack_path))
        assert res.returncode == 0 and res.out.startswith("replayed 4 files, "), res.out
        system.drop_caches()
        res = bb("readahead", "replay", "--wait", "--rebase", str(mnt), str(elsewhere),
                 str(pack_path))
        assert res.returncode == 0, res.err
        assert res.out.startswith("replayed 4 files, "), res.out
        for e in files_of(packfile.load(pack_path)):
            moved = os.fsencode(elsewhere) + e.path[len(os.fsencode(mnt)):]
            assert resident(moved) == list(e.ranges), moved
