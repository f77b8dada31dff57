"""record on a real loop-mounted ext4: a cold start of cat and python recorded exactly
(files, order, page ranges), the exit status of a failing or killed program mirrored with
the pack still written, read-ahead lowered and put back, --system with backburner's own
reads left out, the metadata entry."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import BB, bb, one_line_error, wait_for

from backburner import system
from backburner.kernel import procfs
from backburner.readahead import packfile
from backburner.readahead.pack import Pack

from .conftest import PAGE, Bed

PY = sys.executable


def _read_ahead(bed: Bed) -> str:
    name = os.path.basename(bed.loop)
    return Path(f"/sys/block/{name}/queue/read_ahead_kb").read_text().strip()


def _record_cold(bed: Bed, tmp_path: Path, *argv: str) -> tuple[Any, Pack]:
    """`readahead record` of argv (run in the bed) from a cold cache, read-ahead 0: its
    result and the pack."""
    pack_path = tmp_path / "app.pack"
    system.drop_caches()
    res = bb("readahead", "record", "-o", str(pack_path), "--mount", str(bed.mnt),
             "--read-ahead-kb", "0", "--", *argv, cwd=bed.mnt)
    assert res.returncode == 0, res.err
    pack = packfile.load(pack_path)
    return res, pack


@pytest.mark.root
def test_a_cold_start_is_recorded_exactly(bed: Bed, tmp_path: Path) -> None:
    reader = tmp_path / "reader.py"  # on /, which is not watched
    reader.write_text(
        "import os, sys\n"
        "sys.path.insert(0, 'lib')\n"
        "fd = os.open(b'b c/\\xff\\xfenot-utf8', os.O_RDONLY)\n"
        "os.pread(fd, 100, 4096)\n"
        "fd = os.open('big.bin', os.O_RDONLY)\n"
        "os.pread(fd, 8192, 409600)\n"
        "import mod\n")
    script = (f"cat a/one.txt > /dev/null; cat 'b c'/three* > /dev/null; {PY} -B {reader}")
    res, pack = _record_cold(bed, tmp_path, "sh", "-c", script)
    got = [(e.path, e.ranges) for e in pack.entries]
    assert got == [
        (bed.path("a/one.txt"), ((0, 3 * PAGE),)),
        (bed.path("b c/three\nfile"), ((0, 2 * PAGE),)),
        (bed.path(b"b c/\xff\xfenot-utf8"), ((PAGE, PAGE),)),
        (bed.path("big.bin"), ((409600, 2 * PAGE),)),
        (bed.path("lib/mod.py"), ((0, 5 * PAGE),)),
    ]
    st = os.stat(bed.path("big.bin"))
    big = pack.entries[3].state
    assert (big.dev, big.inode, big.size, big.mtime_ns) == (st.st_dev, st.st_ino, st.st_size,
                                                            st.st_mtime_ns)
    assert big.fsid != 0
    assert "recorded 5 files" in res.err


@pytest.mark.root
def test_a_failing_program_still_writes_the_pack_and_its_status(bed: Bed,
                                                                tmp_path: Path) -> None:
    pack_path = tmp_path / "fail.pack"
    res = bb("readahead", "record", "-o", str(pack_path), "--mount", str(bed.mnt), "--",
             "sh", "-c", "cat a/two.txt > /dev/null; exit 7", cwd=bed.mnt)
    assert res.returncode == 7
    assert [e.path for e in packfile.load(pack_path).entries] == [bed.path("a/two.txt")]
    assert "exited with status 7" in res.err

    killed = tmp_path / "killed.pack"
    res = bb("readahead", "record", "-o", str(killed), "--mount", str(bed.mnt), "--",
             "sh", "-c", "cat a/one.txt > /dev/null; kill -KILL $$", cwd=bed.mnt)
    assert res.returncode == -signal.SIGKILL  # we die the way the program died
    assert [e.path for e in packfile.load(killed).entries] == [bed.path("a/one.txt")]


@pytest.mark.root
def test_read_ahead_is_lowered_while_recording_and_put_back(bed: Bed, tmp_path: Path) -> None:
    before = _read_ahead(bed)
    assert before != "4"
    sysfs = f"/sys/block/{os.path.basename(bed.loop)}/queue/read_ahead_kb"
    res = bb("readahead", "record", "-o", str(tmp_path / "p.pack"), "--mount", str(bed.mnt),
             "--read-ahead-kb", "4", "--", "cat", sysfs)
    assert res.returncode == 0, res.err
    assert res.out.strip() == "4"
    assert _read_ahead(bed) == before
    res = bb("readahead", "record", "-o", str(tmp_path / "q.pack"), "--mount", str(bed.mnt),
             "--keep-read-ahead", "--", "cat", sysfs)
    assert res.out.strip() == before


@pytest.mark.root
def test_system_mode_records_others_but_not_backburner(bed: Bed, tmp_path: Path) -> None:
    old = tmp_path / "old.pack"
    assert bb("readahead", "record", "-o", str(old), "--mount", str(bed.mnt), "--",
              "cat", "unread.txt", cwd=bed.mnt).returncode == 0
    older = tmp_path / "older.pack"
    assert bb("readahead", "record", "-o", str(older), "--mount", str(bed.mnt), "--",
              "cat", "lib/mod.py", cwd=bed.mnt).returncode == 0
    out = tmp_path / "boot.pack"
    rec = subprocess.Popen([*BB, "readahead", "record", "--system", "--seconds", "60",
                            "--mount", str(bed.mnt), "-o", str(out)],
                           stderr=subprocess.PIPE, text=True)
    try:
        assert "recording what is read on" in rec.stderr.readline()
        subprocess.run(["cat", bed.path("a/two.txt")], stdout=subprocess.DEVNULL, check=True)
        replayed = bb("readahead", "replay", "--wait", str(old))  # backburner: left out
        assert replayed.returncode == 0, replayed.err
        started = bb("readahead", "replay", str(older))  # in the background: left out too
        pid = int(started.out.split("(PID ")[1].split(",")[0])
        wait_for(lambda: procfs.start_time(pid) is None, what="the background replay")
        t0 = time.monotonic()
        rec.send_signal(signal.SIGTERM)  # ends it early; the pack is still written
        rest = rec.communicate(timeout=30)[1]
    finally:
        if rec.poll() is None:
            rec.kill()
            rec.wait()
    assert rec.returncode == 0, rest
    assert time.monotonic() - t0 < 30
    pack = packfile.load(out)
    assert [e.path for e in pack.entries if not e.device] == [bed.path("a/two.txt")]
    assert [e.path for e in pack.entries if e.device] == [os.fsencode(bed.loop)]


@pytest.mark.root
def test_bad_record_commands(tmp_path: Path, state_dir: Path) -> None:
    pack = str(tmp_path / "x.pack")
    for args, status in ((["-o", pack], 64), (["-o", pack, "--system"], 64),
                         (["-o", pack, "--system", "--seconds", "1", "--", "true"], 64),
                         (["-o", pack, "--seconds", "1", "--", "true"], 64),
                         (["-o", str(tmp_path / "no" / "x.pack"), "--", "true"], 66),
                         (["-o", pack, "--mount", str(tmp_path / "nothing"), "--", "true"], 66),
                         (["-o", pack, "--", str(tmp_path / "no-such-program")], 127)):
        res = bb("readahead", "record", *args)
        assert res.returncode == status, (args, res.err)
        one_line_error(res)
    assert not os.path.exists(pack)


@pytest.mark.root
def test_pages_faulted_after_the_close_count_and_deleted_files_do_not(
        bed: Bed, tmp_path: Path) -> None:
    """A command's files are named and their pages looked at when it is done, from the
    first descriptor of each, held: a page read through a mapping after the file was
    closed (what the dynamic loader does with every library) is still in the pack, and a
    file the program made and deleted is not."""
    reader = tmp_path / "mapper.py"  # on /, which is not watched
    reader.write_text(
        "import mmap, os\n"
        "fd = os.open('big.bin', os.O_RDONLY)\n"
        "m = mmap.mmap(fd, 0, prot=mmap.PROT_READ)\n"
        "os.close(fd)\n"
        "m[409600]\n"
        "with open('scratch.txt', 'w') as f:\n"
        "    f.write('x' * 5000)\n"
        "open('scratch.txt').read()\n"
        "os.unlink('scratch.txt')\n")
    _, pack = _record_cold(bed, tmp_path, PY, "-B", str(reader))
    got = [(e.path, e.ranges) for e in pack.entries]
    assert got == [(bed.path("big.bin"), ((409600, PAGE),))], got


@pytest.mark.root
def test_the_metadata_entry_leaves_out_what_a_cache_drop_cannot_evict(bed: Bed,
                                                                      tmp_path: Path) -> None:
    """ext4 keeps its journal's superblock pinned, one block in the middle of the disk: it
    is cached after the drop, the start never read it, and reading it at replay would be
    a seek there and back. The inode table block of the file read is in the entry,
    although the bed was just written (record checkpoints the journal, which would
    otherwise hold that block cached through the drop too)."""
    import re

    from backburner.readahead import cached

    def debugfs(request: str) -> str:
        return subprocess.run(["debugfs", "-R", request, bed.loop], capture_output=True,
                              text=True, check=True).stdout

    bs = os.statvfs(bed.mnt).f_bsize
    journal_sb = int(debugfs("bmap <8> 0").split()[-1]) * bs
    ino = os.stat(bed.path("lib/mod.py")).st_ino
    inode_block = int(re.search(r"located at block (\d+)", debugfs(f"imap <{ino}>"))[1]) * bs
    system.drop_caches()
    fd = os.open(bed.loop, os.O_RDONLY)
    try:
        cached = cached.cached_ranges(fd, os.lseek(fd, 0, os.SEEK_END)) or ()
    finally:
        os.close(fd)
    assert any(o <= journal_sb < o + n for o, n in cached), "precondition: it stays cached"
    out = tmp_path / "meta.pack"
    res = bb("readahead", "record", "-o", str(out), "--mount", str(bed.mnt), "--drop-caches",
             "--", "cat", "lib/mod.py", cwd=bed.mnt)
    assert res.returncode == 0, res.err
    [meta] = [e for e in packfile.load(out).entries if e.device]
    assert not any(o <= journal_sb < o + n for o, n in meta.ranges), meta.ranges
    assert any(o <= inode_block < o + n for o, n in meta.ranges), meta.ranges


@pytest.mark.root
def test_a_stop_right_as_the_recording_starts_still_writes_the_pack(bed: Bed,
                                                                   tmp_path: Path) -> None:
    """`systemctl stop` at the moment the recorder says it records (SIGTERM sent from its
    `ready` notice, the earliest a caller can know): the recording ends, the pack is
    written, status 0 — not killed by the signal with nothing written."""
    out = tmp_path / "early.pack"
    code = ("import os, signal, sys\n"
            "from backburner.base import interrupts\n"
            "from backburner.readahead import record\n"
            "interrupts.install()\n"
            "opts = record.RecordOptions(sys.argv[1], mounts=(sys.argv[2],))\n"
            "record.record_system(60, opts, lambda _w: os.kill(os.getpid(), signal.SIGTERM))\n")
    r = subprocess.run([sys.executable, "-c", code, str(out), str(bed.mnt)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert packfile.load(out).entries is not None


@pytest.mark.root
def test_lookups_record_what_a_start_asks_and_in_which_order(bed: Bed, tmp_path: Path) -> None:
    """--lookups: the directory the start lists, the inodes it stats without opening, the
    names it looks for in vain (the directory searched as their identity), and every
    step in order: the listing before the first file it reads, that file's pages before
    the next's; the start's files only (not strace's), the pack version 2, and the
    command's exit status still its own."""
    script = ("ls -l lib > /dev/null; test -e a/nope || true; cat a/two.txt > /dev/null; "
              "test -e 'b c/gone/deeper'; cat a/one.txt > /dev/null; exit 3")
    pack_path = tmp_path / "lk.pack"
    system.drop_caches()
    res = bb("readahead", "record", "-o", str(pack_path), "--mount", str(bed.mnt),
             "--lookups", "--", "sh", "-c", script, cwd=bed.mnt)
    assert res.returncode == 3, res.err
    assert "1 directory listed" in res.err and "2 names missed" in res.err
    data = pack_path.read_bytes()
    assert int.from_bytes(data[8:10], "little") == 2
    pack = packfile.load(pack_path)
    files = [e.path for e in pack.entries if not e.device]
    assert files == [bed.path("a/two.txt"), bed.path("a/one.txt")]
    kinds = {(lk.kind, lk.path) for lk in pack.lookups}
    from backburner.readahead.pack import LISTED, MISSED, STATTED

    assert (LISTED, bed.path("lib")) in kinds
    assert (STATTED, bed.path("lib/mod.py")) in kinds  # ls -l stats what it lists
    assert (MISSED, bed.path("a/nope")) in kinds and (MISSED, bed.path("b c/gone/deeper")) in kinds
    gone = next(lk for lk in pack.lookups if lk.path == bed.path("b c/gone/deeper"))
    assert gone.state.inode == os.stat(bed.path("b c")).st_ino  # the directory searched
    assert pack.read_ahead_kb == 16 and pack.wall_ns > 0
    order = []
    for st in pack.steps:
        if st.lookup is not None:
            order.append(pack.lookups[st.lookup].path)
        elif not pack.entries[st.what].device:
            order.append(pack.entries[st.what].path)
    first = {p: order.index(p) for p in order}
    assert (first[bed.path("lib")] < first[bed.path("a/nope")] < first[bed.path("a/two.txt")]
            < first[bed.path("b c/gone/deeper")] < first[bed.path("a/one.txt")])
    pages = [st for st in pack.steps if st.lookup is None
             and pack.entries[st.what].path == bed.path("a/one.txt")]
    assert sum(st.pages for st in pages) == 3  # 10,000 bytes
