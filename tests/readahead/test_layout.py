"""layout: the three order formats (pure, with hostile names), their effect in real
mksquashfs and xorriso images (where each file's bytes landed, found in the image itself),
and build-ext4 round trips checked independently: owners, modes, symlinks, hard links,
xattrs, device nodes, sparse files and odd names preserved, the hot files first and
contiguous on the device in access order, e2fsck clean; an existing output refused (73)."""

from __future__ import annotations

import os
import random
import stat
import subprocess
from pathlib import Path

import pytest
from helpers import bb, one_line_error

from backburner import system
from backburner.extents import physical_runs
from backburner.readahead import layout, packfile
from backburner.readahead.pack import Entry, FileState, Pack

K = 4096
HOT = ["lib/zz last.py", "lib/a#first.py", "data/back\\slash", "data/new\nline", "b/x.bin",
       "#lead", "lib/mid dle.py"]
COLD = ["lib/cold1.py", "lib/cold2.py", "data/cold3", "zz/cold4", "a/cold5"]


def pack_of(root: str | bytes, rels: list[str], ranges: bool = True) -> Pack:
    entries = []
    for rel in rels:
        p = os.path.join(os.fsencode(root), os.fsencode(rel))
        st = os.stat(p)
        span = ((0, -(-st.st_size // K) * K),) if ranges and st.st_size else ()
        entries.append(Entry(p, FileState(st.st_dev, 0, st.st_ino, st.st_size,
                                          st.st_mtime_ns), span))
    return Pack(tuple(entries))


def make_tree(root: Path, seed: int = 3) -> dict[str, bytes]:
    """Hot and cold files of distinct random content (found again in raw images)."""
    rng = random.Random(seed)
    content = {}
    for rel in HOT + COLD:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        data = rng.randbytes(rng.randint(3, 20) * K + rng.randint(0, K - 1))
        path.write_bytes(data)
        content[rel] = data
    return content


# --- the formats, pure ---------------------------------------------------------------------


def test_formats_escape_or_skip_what_they_cannot_hold() -> None:
    rels = [b"lib/a b.py", b"#x", b"back\\slash", b"new\nline", b"\xff\"q"]
    sq = layout.emit(rels, "mksquashfs-sort")
    assert sq.data.split(b"\n") == [b"lib/a\\ b.py 32767", b"\\#x 32766",
                                    b"back\\\\slash 32765", b"\xff\"q 32763", b""]
    assert (sq.files, sq.skipped) == (4, 1)
    xo = layout.emit(rels, "xorriso-weights")
    lines = xo.data.split(b"\n")
    assert lines[:2] == [b"-iso_rr_pattern off", b"-backslash_codes on"]
    assert lines[2] == b'-find "/lib/a b.py" -exec sort_weight 5 --'
    assert lines[4] == b'-find "/back\\134slash" -exec sort_weight 3 --'
    assert lines[5] == b'-find "/new\\012line" -exec sort_weight 2 --'
    assert lines[6] == b'-find "/\\377\\042q" -exec sort_weight 1 --'
    assert xo.skipped == 0
    assert layout.emit(rels, "list").data == b"lib/a b.py\n#x\nback\\slash\n\xff\"q\n"
    assert layout.emit(rels, "list", null=True).data == b"\0".join(rels) + b"\0"


def test_many_files_keep_positive_squashfs_priorities() -> None:
    data = layout.emit([b"f%d" % i for i in range(40000)], "mksquashfs-sort").data
    prios = [int(line.rsplit(b" ", 1)[1]) for line in data.splitlines()]
    assert prios[0] == 32767 and min(prios) == 1
    assert prios == sorted(prios, reverse=True)


def test_relative_paths_and_root_guessing() -> None:
    pack = Pack(tuple(Entry(p, FileState(1, 0, i, 1, 1)) for i, p in enumerate(
        [b"/mnt/app/lib/a.py", b"/mnt/app/lib/b.py", b"/usr/lib/libc.so", b"/mnt/app/x"])))
    assert layout.relative_paths(pack, b"/mnt/app") == ([b"lib/a.py", b"lib/b.py", b"x"], 1)
    assert layout.relative_paths(pack, b"/")[0][0] == b"mnt/app/lib/a.py"
    image = {b"lib/a.py", b"lib/b.py", b"x"}
    assert layout.guess_root([e.path for e in pack.entries], image.__contains__) == b"/mnt/app"
    with pytest.raises(Exception, match="none of the pack's files"):
        layout.guess_root([b"/a/b"], lambda _rel: False)


# --- the formats in real images ------------------------------------------------------------


def _offsets(image: bytes, content: dict[str, bytes], names: list[str]) -> list[int]:
    found = [image.find(content[n][:256]) for n in names]
    assert -1 not in found, dict(zip(names, found, strict=True))
    return found


def test_mksquashfs_places_the_pack_first_in_access_order(tmp_path: Path) -> None:
    src = tmp_path / "src"
    content = make_tree(src)
    hot = [h for h in HOT if "\n" not in h]  # a sort file cannot name it: left out
    sortfile = tmp_path / "sort"
    sortfile.write_bytes(layout.emit([h.encode() for h in hot], "mksquashfs-sort").data)
    img = tmp_path / "img.sqfs"
    res = subprocess.run(["mksquashfs", str(src), str(img), "-noappend", "-noI", "-noD", "-noF",
                          "-noX", "-no-progress", "-sort", str(sortfile)],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert "Cannot stat" not in res.stdout + res.stderr  # every escaped name was found
    offsets = _offsets(img.read_bytes(), content, hot + COLD)
    hot_at, cold_at = offsets[:len(hot)], offsets[len(hot):]
    assert hot_at == sorted(hot_at)
    assert max(hot_at) < min(cold_at)


def test_xorriso_places_the_pack_first_in_access_order(tmp_path: Path) -> None:
    src = tmp_path / "src"
    content = make_tree(src)
    weights = tmp_path / "weights"
    weights.write_bytes(layout.emit([h.encode() for h in HOT], "xorriso-weights").data)
    img = tmp_path / "img.iso"
    res = subprocess.run(["xorriso", "-no_rc", "-outdev", str(img), "-map", str(src), "/",
                          "-options_from_file", str(weights), "-commit"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    offsets = _offsets(img.read_bytes(), content, HOT + COLD)
    hot_at, cold_at = offsets[:len(HOT)], offsets[len(HOT):]
    assert hot_at == sorted(hot_at)
    assert max(hot_at) < min(cold_at)


def test_order_cli(tmp_path: Path) -> None:
    src = tmp_path / "src"
    make_tree(src)
    pp = tmp_path / "p.pack"
    packfile.save(pp, pack_of(src, HOT))
    res = bb("layout", "order", str(pp), "--emit", "list", "--root", str(src))
    assert res.returncode == 0
    assert res.stdout == b"".join(h.encode() + b"\n" for h in HOT if "\n" not in h)
    assert "left out: 1 whose names list cannot hold (use list --null)" in res.err
    res = bb("layout", "order", str(pp), "--emit", "list", "--null", "--root", str(src / "lib"))
    assert res.stdout == b"zz last.py\0a#first.py\0mid dle.py\0"
    assert "4 outside" in res.err


# --- build-ext4 ----------------------------------------------------------------------------


def make_rich_tree(src: Path) -> dict[str, bytes]:
    content = make_tree(src)
    os.chown(src / "lib/a#first.py", 1234, 5678)
    os.chmod(src / "lib/a#first.py", 0o4750)
    os.setxattr(src / "b/x.bin", "user.note", b"kept")
    os.setxattr(src / "lib/cold1.py", "trusted.x", b"\0binary\xff")
    os.symlink("../lib/zz last.py", src / "data/link to hot")
    os.symlink("/nowhere/at all", src / "dangling")
    os.link(src / "lib/mid dle.py", src / "zz/hard link")
    os.link(src / "lib/cold2.py", src / "a/cold hard")
    os.mkfifo(src / "a/fifo")
    os.mknod(src / "a/null", 0o640 | stat.S_IFCHR, os.makedev(1, 3))
    with open(src / "sparse", "wb") as f:
        f.truncate(64 << 20)
        f.seek(32 << 20)
        f.write(b"middle")
    (src / "empty dir").mkdir(mode=0o711)
    os.chown(src / "empty dir", 42, 43)
    os.utime(src / "lib", ns=(1_000_000_123, 1_600_000_000_987_654_321))
    return content


@pytest.mark.root
def test_build_ext4_round_trip(tmp_path: Path, state_dir: Path) -> None:
    src = tmp_path / "src"
    make_rich_tree(src)
    pp = tmp_path / "app.pack"
    packfile.save(pp, pack_of(src, HOT))
    img = tmp_path / "app.img"
    res = bb("layout", "build-ext4", "--pack", str(pp), str(src), str(img), "--size", "96M",
             timeout=120)
    assert res.returncode == 0, res.err
    assert "verified equal to" in res.out and "7 hot files" in res.out
    after = res.out.splitlines()[-1]
    assert "contiguous 100%, in access order 100%; seeks: cold start 1, with replay 1" in after
    assert os.path.getsize(img) == 96 << 20
    fsck = subprocess.run(["e2fsck", "-f", "-n", str(img)], capture_output=True, text=True)
    assert fsck.returncode == 0, fsck.stdout + fsck.stderr
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with system.Transaction("test-ro") as tx:
        loop = tx.apply(system.LoopDevice(str(img), read_only=True))
        tx.apply(system.Mount(loop, str(mnt), "ext4", "ro"))
        _check_metadata(src, mnt)
        _check_hot_first(mnt, img)


def _check_metadata(src: Path, mnt: Path) -> None:
    st = os.lstat(mnt / "lib/a#first.py")
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (1234, 5678, 0o4750)
    assert os.getxattr(mnt / "b/x.bin", "user.note") == b"kept"
    assert os.getxattr(mnt / "lib/cold1.py", "trusted.x") == b"\0binary\xff"
    assert os.readlink(mnt / "data/link to hot") == "../lib/zz last.py"
    assert os.readlink(mnt / "dangling") == "/nowhere/at all"
    hot_link = os.lstat(mnt / "zz/hard link")
    assert hot_link.st_ino == os.lstat(mnt / "lib/mid dle.py").st_ino and hot_link.st_nlink == 2
    assert os.lstat(mnt / "a/cold hard").st_ino == os.lstat(mnt / "lib/cold2.py").st_ino
    assert stat.S_ISFIFO(os.lstat(mnt / "a/fifo").st_mode)
    dev = os.lstat(mnt / "a/null")
    assert stat.S_ISCHR(dev.st_mode) and dev.st_rdev == os.makedev(1, 3)
    sparse = os.lstat(mnt / "sparse")
    assert sparse.st_size == 64 << 20 and sparse.st_blocks * 512 < 1 << 20
    assert (mnt / "sparse").read_bytes()[32 << 20:(32 << 20) + 6] == b"middle"
    empty = os.lstat(mnt / "empty dir")
    assert (empty.st_uid, empty.st_gid, stat.S_IMODE(empty.st_mode)) == (42, 43, 0o711)
    assert os.lstat(mnt / "lib").st_mtime_ns == 1_600_000_000_987_654_321
    for rel in HOT + COLD:
        assert (mnt / rel).read_bytes() == (src / rel).read_bytes(), rel
    assert os.path.exists(os.path.join(os.fsencode(mnt), b"data/new\nline"))


def _debugfs_blocks(image: Path, rel: str) -> list[int]:
    """The blocks of a file or directory of an ext4 image, sorted, as debugfs lists them."""
    out = subprocess.run(["debugfs", "-R", f'blocks "/{rel}"', str(image)], check=True,
                         capture_output=True, text=True).stdout
    return sorted(int(b) for b in out.split())


def _check_hot_first(mnt: Path, image: Path) -> None:
    """Independently of `layout check`: each hot file's data is one run, each starting
    where the previous one ended (to the block), and every other file comes after; the
    directories (which a start reads to find the files) come just before it."""
    runs = [physical_runs(mnt / rel) for rel in HOT]
    assert all(len(r) == 1 for r in runs), runs
    dirs = [os.path.relpath(d, mnt) for d, _, _ in os.walk(mnt)]
    assert len(dirs) > 5
    assert max(_debugfs_blocks(image, d)[-1] for d in dirs) * K < runs[0][0].physical
    for prev, nxt in zip(runs, runs[1:], strict=False):
        assert nxt[0].physical == -(-(prev[0].physical + prev[0].length) // K) * K
    hot_end = runs[-1][0].physical + runs[-1][0].length
    cold = [r.physical for rel in COLD for r in physical_runs(mnt / rel)]
    assert min(cold) >= hot_end


@pytest.mark.root
def test_build_ext4_refuses_an_existing_output(tmp_path: Path, state_dir: Path) -> None:
    src = tmp_path / "src"
    make_tree(src)
    pp = tmp_path / "p.pack"
    packfile.save(pp, pack_of(src, HOT[:2]))
    img = tmp_path / "exists.img"
    img.write_bytes(b"precious")
    res = bb("layout", "build-ext4", "--pack", str(pp), str(src), str(img))
    assert res.returncode == 73
    assert "already exists" in one_line_error(res)
    assert img.read_bytes() == b"precious"


@pytest.mark.root
def test_check_compares_before_and_after(tmp_path: Path, state_dir: Path) -> None:
    src = tmp_path / "src"
    make_tree(src)
    pp = tmp_path / "p.pack"
    packfile.save(pp, pack_of(src, HOT))
    img = tmp_path / "new.img"
    assert bb("layout", "build-ext4", "--pack", str(pp), str(src), str(img),
              timeout=120).returncode == 0
    res = bb("layout", "check", str(src), str(img), "--pack", str(pp))
    assert res.returncode == 0, res.err
    before, after = res.out.splitlines()
    assert before.startswith(f"{src}: 7 files (0 missing)")
    assert after.startswith(f"{img}: 7 files (0 missing)")
    assert "seeks: cold start 1, with replay 1" in after
