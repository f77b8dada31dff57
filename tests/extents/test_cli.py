"""`backburner extents` as a real subprocess on real filesystems: what it prints, every
exit status, dm tables read back through one loop device per line (no device-mapper here),
losetup arguments used for real, a defragmenter moving a file between save and check, and
bad input answered in one line with nothing changed."""

from __future__ import annotations

import json
import mmap
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import Result, bb, one_line_error

import backburner
from backburner.base import errors
from backburner.extents import layout_of, mapfile

from .beds import (
    Bed,
    fragment_free_space,
    read_device,
    read_through_table,
    stale_data_then_fallocate,
    write_fragmented,
    write_random,
)

pytestmark = [pytest.mark.root, pytest.mark.timeout(120)]
MiB = 1 << 20


def extents(*args: str | Path) -> Result:
    return bb("extents", *map(str, args))


@pytest.fixture
def ext4(make_bed) -> Bed:
    return make_bed("ext4", 64 * MiB)


def test_show_text_and_json(ext4: Bed) -> None:
    f = ext4.path("frag")
    write_fragmented(ext4, f, 2 * MiB, seed=2)
    lay = layout_of(f)
    r = extents("show", f)
    assert r.returncode == 0, r.err
    lines = r.out.splitlines()
    assert lines[0].startswith(f"{f}: 2 MiB (2097152 bytes), ext4 on {ext4.device}")
    assert f"{lay.totals.runs} runs from {lay.totals.extents} extents" in lines[1]
    rows = [ln.split() for ln in lines[4:]]
    assert [(int(x[1]), int(x[2]), int(x[3]), int(x[4])) for x in rows] == \
        [(r.logical, r.length, r.physical, r.physical // 512) for r in lay.runs]
    j = extents("show", "--format", "json", f)
    assert j.returncode == 0, j.err
    assert extents("show", "--json", f).out == j.out  # --json: short for --format json
    doc = json.loads(j.out)
    assert doc["totals"]["runs"] == lay.totals.runs and doc["device"]["path"] == ext4.device
    assert [(s["logical"], s["physical"], s["length"], s["physical_sector"])
            for s in doc["segments"]] == \
        [(r.logical, r.physical, r.length, r.physical // 512) for r in lay.runs]


@pytest.mark.parametrize("fstype", ["ext4", "xfs", "btrfs"])
def test_dm_table_reads_back_the_file(make_bed, fstype: str) -> None:
    bed: Bed = make_bed(fstype)
    f = bed.path("frag")
    data = write_fragmented(bed, f, 2 * MiB, seed=3)
    r = extents("map", f, "--dm-table")
    assert r.returncode == 0, r.err
    assert len(r.out.splitlines()) == layout_of(f).totals.runs > 1
    assert read_through_table(bed, r.out, len(data)) == data


def test_dm_table_with_zeros_on_a_partition(make_bed) -> None:
    """Holes, unwritten space and data, on a partition: offsets are the partition's, and
    the table's zero lines read as the filesystem does."""
    bed: Bed = make_bed("ext4", 64 * MiB, partition_at=4096)
    f = bed.path("mixed")
    fd = os.open(f, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, os.urandom(MiB), 0)
        os.posix_fallocate(fd, 2 * MiB, MiB)  # a hole at 1-2 MiB, unwritten at 2-3 MiB
        os.pwrite(fd, os.urandom(MiB), 3 * MiB)
        os.fsync(fd)
    finally:
        os.close(fd)
    data = f.read_bytes()
    refused = extents("map", f, "--dm-table")
    assert refused.returncode == errors.DataError.exit_status
    msg = one_line_error(refused)
    assert f"file bytes {MiB}+{MiB} (hole), file bytes {2 * MiB}+{MiB} (unwritten)" in msg
    assert refused.out == ""
    r = extents("map", f, "--dm-table", "--zero-unwritten")
    assert r.returncode == 0, r.err
    assert r.out.splitlines()[1] == f"{MiB // 512} {2 * MiB // 512} zero"
    assert all(ln.split()[3] == bed.device for ln in r.out.splitlines() if "linear" in ln)
    assert read_through_table(bed, r.out, len(data)) == data
    show = extents("show", f)
    assert f"a partition starting at byte {4096 * 512} (sector 4096) of {bed.loop}" in show.out


def test_loop_args_used_for_real(ext4: Bed) -> None:
    f = ext4.path("one")
    data = write_random(f, 3 * MiB, seed=4)
    r = extents("map", f, "--loop-args")
    assert r.returncode == 0, r.err
    args = r.out.split()
    assert args[0] == "--offset" and args[2] == "--sizelimit" and args[4] == ext4.device
    loop = ext4.attach(args[4], int(args[1]), int(args[3]))
    assert read_device(loop, 0, len(data) + 1) == data
    frag = ext4.path("frag")
    write_fragmented(ext4, frag, MiB)
    many = extents("map", frag, "--loop-args")
    assert many.returncode == errors.DataError.exit_status
    assert "runs on the device, not one" in one_line_error(many)


def test_shared_and_compressed(make_bed) -> None:
    xfs: Bed = make_bed("xfs")
    a, b = xfs.path("a"), xfs.path("b")
    data = write_random(a, MiB, seed=5)
    subprocess.run(["cp", "--reflink=always", str(a), str(b)], check=True)
    r = extents("map", b, "--dm-table")
    assert r.returncode == errors.DataError.exit_status
    assert "(shared)" in one_line_error(r) and "--allow-shared" in r.err
    ok = extents("map", b, "--dm-table", "--allow-shared")
    assert ok.returncode == 0 and read_through_table(xfs, ok.out, MiB) == data
    btr: Bed = make_bed("btrfs", mount_options="compress-force=zstd")
    c = btr.path("c")
    c.write_bytes(b"compressible " * 100_000 + b"x" * 480)  # 2540 sectors
    r = extents("map", c, "--dm-table", "--zero-unwritten", "--allow-shared")
    assert r.returncode == errors.DataError.exit_status
    assert "(encoded)" in one_line_error(r) and "compressed" in r.err


def test_verify_and_its_mismatch_report(ext4: Bed) -> None:
    f = ext4.path("v")
    data = write_random(f, 2 * MiB, seed=6)
    ok = extents("verify", f)
    assert ok.returncode == 0, ok.err
    assert ok.out.startswith("identical: 2 MiB in") and ok.err == ""  # no bar: not a tty
    # change one byte on the device behind the filesystem's back; the page cache still
    # holds the file's bytes, which is what the filesystem returns (the pages are kept
    # mapped: a drop_caches by anything else on the machine cannot evict mapped pages)
    with open(f, "rb") as fh, mmap.mmap(fh.fileno(), 0, prot=mmap.PROT_READ) as pinned:
        assert pinned[:] == data
        run = layout_of(f).runs[-1]
        at = run.physical + 4096 + 77
        _poke_device(ext4.device, at)
        bad = extents("verify", f)
        assert bad.returncode == 1, bad.err
        want = f"file byte {run.logical + 4096 + 77} differs from byte {at} of {ext4.device}"
        assert bad.out.strip() == f"MISMATCH: {want}"
        out = ext4.mnt.parent / "v.map"
        saved = extents("save", f, "-o", out)
        assert saved.returncode == 1 and want in saved.out and not out.exists()


def _poke_device(dev: str, at: int) -> None:
    """Flip one byte of the device with O_DIRECT (our own loop device)."""
    base = at - at % 4096
    buf = mmap.mmap(-1, 4096)
    fd = os.open(dev, os.O_RDWR | os.O_DIRECT)
    try:
        os.preadv(fd, [buf], base)
        buf[at - base] ^= 0xFF
        os.pwritev(fd, [buf], base)
    finally:
        os.close(fd)
        buf.close()


def test_unwritten_space_shown_dangerous(ext4: Bed) -> None:
    f = ext4.path("fa")
    stale_data_then_fallocate(ext4, f, 4 * MiB)
    refused = extents("map", f, "--dm-table")
    assert refused.returncode == errors.DataError.exit_status
    assert f"file bytes 0+{4 * MiB} (unwritten)" in one_line_error(refused)
    assert extents("verify", f).returncode == 0
    danger = extents("verify", f, "--include-unwritten")
    assert danger.returncode == 1 and danger.out.startswith("MISMATCH: file byte ")


def test_save_then_defrag_then_check(ext4: Bed) -> None:
    filler = fragment_free_space(ext4)
    f = ext4.path("victim")
    write_random(f, 4 * MiB, seed=7)
    before = layout_of(f).totals.runs
    assert before > 4
    m = ext4.mnt.parent / "victim.map"
    r = extents("save", f, "-o", m)
    assert r.returncode == 0, r.err
    assert extents("check", m).out.startswith("unchanged:")
    again = extents("save", f, "-o", m)
    assert again.returncode == errors.ExistsError.exit_status and "--force" in again.err
    filler.unlink()
    ext4.sync()
    subprocess.run(["e4defrag", str(f)], check=True, capture_output=True)
    assert layout_of(f).totals.runs < before  # e4defrag really moved it
    moved = extents("check", m)
    assert moved.returncode == 1, moved.out + moved.err
    assert moved.out.startswith("moved:") and "was data at device byte" in moved.out
    n = int(moved.out.split(": ")[2].split()[0])  # "... says: N segments moved of M"
    assert 0 < n <= before
    assert (f"... and {n - 5} more" in moved.out) == (n > 5)
    assert extents("check", "--quick", m).returncode == 1
    with open(f, "r+b") as fh:
        fh.seek(123456)
        fh.write(b"!")
    changed = extents("check", m)
    assert changed.returncode == 2, changed.out
    assert changed.out.startswith("content changed:")
    assert extents("save", "--force", f, "-o", m).returncode == 0
    assert extents("check", m).returncode == 0


@pytest.fixture
def saved_map(ext4: Bed) -> Iterator[tuple[Path, dict]]:
    f = ext4.path("s")
    write_random(f, MiB, seed=8)
    m = ext4.mnt.parent / "s.map"
    assert extents("save", f, "-o", m).returncode == 0
    yield m, json.loads(m.read_text())


def _reseal(doc: dict) -> str:
    doc = {k: v for k, v in doc.items() if k != "map_sha256"}
    return json.dumps({**doc, "map_sha256": mapfile._self_digest(doc)})


def test_bad_map_files(saved_map: tuple[Path, dict], tmp_path: Path) -> None:
    m, doc = saved_map
    text = m.read_text()
    corrupt = tmp_path / "corrupt.map"
    corrupt.write_text(text.replace(f'"inode": {doc["file"]["inode"]}',
                                    f'"inode": {doc["file"]["inode"] + 1}'))
    elsewhere = tmp_path / "elsewhere.map"
    elsewhere.write_text(_reseal({**doc, "machine_id": "0" * 32, "host": "far"}))
    gone = tmp_path / "gone.map"
    gone.write_text(_reseal({**doc, "file": {**doc["file"], "path": str(tmp_path / "no")}}))
    (tmp_path / "junk.map").write_bytes(b"\x00\xff" * 10)
    for name, status, words in (
        (corrupt, 65, "is corrupted"),
        (elsewhere, 66, "saved on another machine (far)"),
        (gone, 66, "no longer exists"),
        (tmp_path / "junk.map", 65, "not a map file"),
        (tmp_path / "missing.map", 66, "no such map file"),
        (tmp_path, 65, "is a directory"),
    ):
        r = extents("check", name)
        assert r.returncode == status, (name, r.err)
        assert words in one_line_error(r)
        assert r.out == ""


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    mnt = tmp_path / "tmpfs"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def test_bad_files(tmp_path: Path, tmpfs: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    (tmpfs / "f").write_bytes(b"x" * 4096)
    for args, status, words in (
        (("show", tmpfs / "f"), 69, f"{tmpfs / 'f'}: its filesystem does not report extents"),
        (("show", tmp_path), 64, "is a directory"),
        (("verify", tmp_path / "fifo"), 64, "is a FIFO"),
        (("show", "/proc/version"), 69, "does not report extents (FIEMAP)"),
        (("map", "/dev/null", "--dm-table"), 64, "is a character device"),
        (("show", tmp_path / "missing"), 66, "no such file"),
        (("map", tmp_path / "x"), 64, "one of the arguments --dm-table --loop-args"),
    ):
        r = extents(*args)
        assert r.returncode == status, (args, r.err)
        assert words in one_line_error(r)


# --- not root -----------------------------------------------------------------------------

AS_NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]


def _as_nobody(*args: str | Path) -> Result:
    """The CLI as nobody, without any capability: it can read what others may read."""
    site = [str(Path(backburner.__file__).resolve().parents[1])]
    site += [str(Path(p).resolve()) for p in sys.path if p.endswith("site-packages")]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": ":".join(site)}
    python = next((p for p in (sys.executable, shutil.which("python3"), "/usr/bin/python3")
                   if p and subprocess.run([*AS_NOBODY, p, "-c", "import backburner.cli"],
                                           env=env, cwd="/", capture_output=True).returncode == 0),
                  None)
    if python is None:
        pytest.fail(f"no Python that user nobody can run imports backburner from {site}: the "
                    "checkout and its .venv must be readable by others for this test")
    with subprocess.Popen([*AS_NOBODY, python, "-m", "backburner", "extents", *map(str, args)],
                          env=env, cwd="/", stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE) as proc:
        out, err = proc.communicate(timeout=60)
    return Result(proc.pid, proc.returncode, out, err)


def test_show_for_anyone_verify_for_root(public_dir: Path, make_bed) -> None:
    """show needs only read access to the file; verify reads the block device (root)."""
    ext4: Bed = make_bed("ext4", where=public_dir)
    ext4.mnt.parent.chmod(0o755)
    f = ext4.path("public")
    write_random(f, MiB)
    f.chmod(0o644)
    r = _as_nobody("show", f)
    assert r.returncode == 0, r.err
    assert r.out.startswith(f"{f}: 1 MiB")
    v = _as_nobody("verify", f)
    assert v.returncode == errors.NotRootError.exit_status == 77
    assert f"reading the block device {ext4.device} needs root" in one_line_error(v)


def test_progress_bar_on_a_terminal(make_bed) -> None:
    import pty

    ext4: Bed = make_bed("ext4", 256 * MiB)
    f = ext4.path("large")
    write_random(f, 80 * MiB)
    master, slave = pty.openpty()
    try:
        with subprocess.Popen([sys.executable, "-m", "backburner", "extents", "verify", str(f)],
                              stdout=subprocess.PIPE, stderr=slave) as proc:
            out, _ = proc.communicate(timeout=60)
        os.close(slave)
        slave = -1
        shown = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the other side is closed and drained
                break
            if not chunk:
                break
            shown += chunk
    finally:
        if slave >= 0:
            os.close(slave)
        os.close(master)
    assert proc.returncode == 0 and out.startswith(b"identical: 80 MiB")
    assert b"80.0/80.0 MiB" in shown


def test_the_load_hint_says_whether_the_kernel_would_take_the_table(ext4: Bed) -> None:
    """A mounted filesystem claims its device (dmsetup create: "Device or resource busy"):
    the hint says so, and says it only after asking the kernel (an exclusive open)."""
    f = ext4.path("frag")
    write_fragmented(ext4, f, MiB, seed=11)
    r = extents("map", "--dm-table", f)
    assert r.returncode == 0, r.err
    hint = r.err.strip().splitlines()[-1].removeprefix("backburner: ")
    assert hint.startswith("not loadable now: ") and f"mounted at {ext4.mnt}" in hint, hint
    assert "--saved MAP" in hint


@pytest.mark.alone  # another test's `unshare --mount` copies our mount and keeps the
# device claimed after our umount, which this checks is not the case
def test_a_saved_map_gives_its_table_only_while_it_holds(ext4: Bed) -> None:
    """`map --saved`: mounted, proven by check (a moved file refused); unmounted, proven by
    the device's bytes against the saved digests (bytes overwritten there: refused); the
    table it prints reads back as the file."""
    f = ext4.path("frag")
    data = write_fragmented(ext4, f, 2 * MiB, seed=12)
    m = ext4.mnt.parent / "frag.map"
    assert extents("save", f, "-o", m).returncode == 0
    live = extents("map", "--dm-table", "--saved", m)
    assert live.returncode == 0, live.err
    assert live.out == extents("map", "--dm-table", f).out
    assert "checked against the file" in live.err
    sh_umount = subprocess.run(["umount", str(ext4.mnt)], capture_output=True, text=True)
    assert sh_umount.returncode == 0, sh_umount.stderr
    ext4.mounted = False
    cold = extents("map", "--dm-table", "--saved", m)
    assert cold.returncode == 0, cold.err
    assert cold.out == live.out
    assert "match the saved digests" in cold.err
    assert cold.err.strip().splitlines()[-1].startswith("backburner: load it with: dmsetup")
    assert read_through_table(ext4, cold.out, len(data)) == data
    assert extents("map", "--loop-args", "--saved", m).returncode == errors.UsageError.exit_status
    # the device's bytes at one run overwritten (as a filesystem reusing freed blocks would)
    second = int(cold.out.splitlines()[1].split()[4]) * 512
    with open(ext4.device, "r+b") as dev:
        dev.seek(second)
        dev.write(b"\0" * 4096)
    gone = extents("map", "--dm-table", "--saved", m)
    assert gone.returncode == errors.DataError.exit_status and gone.out == ""
    assert "differ from the saved file's in 1 of" in one_line_error(gone)
    # the bytes put back, the filesystem's signature wiped: the file's bytes are all there,
    # but nothing says this is the saved filesystem any more
    with open(ext4.device, "r+b") as dev:
        dev.seek(second)
        dev.write(data[int(cold.out.splitlines()[1].split()[0]) * 512:][:4096])
    assert extents("map", "--dm-table", "--saved", m).returncode == 0
    subprocess.run(["wipefs", "-a", "-q", ext4.device], check=True)
    wiped = extents("map", "--dm-table", "--saved", m)
    assert wiped.returncode == errors.DataError.exit_status and wiped.out == ""
    assert "does not hold the saved filesystem" in one_line_error(wiped)


def test_a_saved_map_of_a_moved_file_is_refused(ext4: Bed) -> None:
    filler = fragment_free_space(ext4)
    f = ext4.path("victim")
    write_random(f, 4 * MiB, seed=13)
    m = ext4.mnt.parent / "victim.map"
    assert extents("save", f, "-o", m).returncode == 0
    filler.unlink()
    ext4.sync()
    subprocess.run(["e4defrag", str(f)], check=True, capture_output=True)
    r = extents("map", "--dm-table", "--saved", m)
    assert r.returncode == errors.DataError.exit_status and r.out == ""
    line = one_line_error(r)
    assert "moved since the map was saved" in line and "save a new map" in line, line
