"""ext4image (`layout build-ext4`): round trips checked independently: owners, modes,
symlinks, hard links, xattrs and ACLs, device nodes, sockets, sparse files and odd names
preserved, the hot files first and contiguous on the device in access order, e2fsck
clean; from a directory, from a mounted ext4 image (lost+found and all) and from a
mounted xfs; an existing output refused (73); a failing mke2fs in its own words."""

from __future__ import annotations

import os
import stat
import struct
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from helpers import bb, one_line_error

from backburner import system
from backburner.extents import physical_runs
from backburner.readahead import ext4end, packfile

from .test_layout import COLD, HOT, K, make_tree, pack_of

ACL_ACCESS, ACL_DEFAULT = "system.posix_acl_access", "system.posix_acl_default"
#: A POSIX ACL as the kernel takes it (setfacl's xattr): owner rw, user 1234 r, group r,
#: mask r, others nothing.
ACL = struct.pack("<I", 2) + b"".join(
    struct.pack("<HHI", tag, perm, ident) for tag, perm, ident in (
        (0x01, 6, 0xFFFFFFFF), (0x02, 4, 1234), (0x04, 4, 0xFFFFFFFF), (0x10, 4, 0xFFFFFFFF),
        (0x20, 0, 0xFFFFFFFF)))


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
    os.mknod(src / "a/loopish", 0o600 | stat.S_IFBLK, os.makedev(7, 200))
    os.mknod(src / "a/sock", 0o640 | stat.S_IFSOCK)
    os.setxattr(src / "lib/cold2.py", ACL_ACCESS, ACL)
    os.setxattr(src / "b/x.bin", ACL_ACCESS, ACL)  # a hot file's
    os.setxattr(src / "zz", ACL_DEFAULT, ACL)
    with open(src / "sparse", "wb") as f:
        f.truncate(64 << 20)
        f.seek(32 << 20)
        f.write(b"middle")
    (src / "empty dir").mkdir(mode=0o711)
    os.chown(src / "empty dir", 42, 43)
    os.utime(src / "lib", ns=(1_000_000_123, 1_600_000_000_987_654_321))
    return content


def _assert_clean(img: Path | str) -> None:
    fsck = subprocess.run(["e2fsck", "-f", "-n", str(img)], capture_output=True, text=True)
    assert fsck.returncode == 0, fsck.stdout + fsck.stderr


@contextmanager
def _mounted(img: Path, mnt: Path) -> Iterator[Path]:
    """The image on a read-only loop device, mounted read-only at `mnt` (made if need be)."""
    mnt.mkdir(exist_ok=True)
    with system.Transaction("test-ro") as tx:
        loop = tx.apply(system.LoopDevice(str(img), read_only=True))
        tx.apply(system.Mount(loop, str(mnt), "ext4", "ro"))
        yield mnt


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
    # the root's directory block, the hot inodes' one inode-table read, back to the region
    assert ("contiguous 100%, in access order 100%; seeks: cold start 1 (3 with the metadata "
            "it reads: 3 inode-table blocks in 1 read, 4 directory blocks), with replay 1"
            ) in after
    assert os.path.getsize(img) == 96 << 20
    _assert_clean(img)
    with _mounted(img, tmp_path / "mnt") as mnt:
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
    dev = os.lstat(mnt / "a/loopish")
    assert stat.S_ISBLK(dev.st_mode) and dev.st_rdev == os.makedev(7, 200)
    assert stat.S_ISSOCK(os.lstat(mnt / "a/sock").st_mode)
    for rel, name in (("lib/cold2.py", ACL_ACCESS), ("b/x.bin", ACL_ACCESS),
                      ("zz", ACL_DEFAULT)):
        assert os.getxattr(mnt / rel, name) == os.getxattr(src / rel, name), rel
    sparse = os.lstat(mnt / "sparse")
    assert sparse.st_size == 64 << 20 and sparse.st_blocks * 512 < 1 << 20
    assert (mnt / "sparse").read_bytes()[32 << 20:(32 << 20) + 6] == b"middle"
    empty = os.lstat(mnt / "empty dir")
    assert (empty.st_uid, empty.st_gid, stat.S_IMODE(empty.st_mode)) == (42, 43, 0o711)
    assert os.lstat(mnt / "lib").st_mtime_ns == os.lstat(src / "lib").st_mtime_ns  # to the ns
    for rel in HOT + COLD:
        assert (mnt / rel).read_bytes() == (src / rel).read_bytes(), rel
    assert os.path.exists(os.path.join(os.fsencode(mnt), b"data/new\nline"))


def _debugfs_blocks(image: Path, rel: str) -> list[int]:
    """The blocks of a file or directory of an ext4 image, sorted, as debugfs lists them."""
    out = subprocess.run(["debugfs", "-R", f'blocks "/{rel}"', str(image)], check=True,
                         capture_output=True, text=True).stdout
    return sorted(int(b) for b in out.split())


def _blocks(mnt: Path, image: Path, rel: str) -> tuple[int, int]:
    """Where a hot file's data or a directory's blocks are: (first byte, end), one run."""
    if (mnt / rel).is_dir():
        blocks = _debugfs_blocks(image, rel)
        assert blocks == list(range(blocks[0], blocks[0] + len(blocks))), (rel, blocks)
        return blocks[0] * K, (blocks[-1] + 1) * K
    runs = physical_runs(mnt / rel)
    assert len(runs) == 1, (rel, runs)
    return runs[0].physical, runs[0].physical + runs[0].length


def _check_hot_first(mnt: Path, image: Path) -> None:
    """Independently of `layout check`: the hot region holds, in first-use order, each hot
    directory's blocks right before the data of the first hot file in it and each hot
    file's data in one run, each item starting where the previous one ended (to the
    block); every cold file and cold directory comes after it; the hot directories, their
    entries and the hot files have the lowest inode numbers, densely (in the first
    inode-table blocks)."""
    order = ["lib", "lib/zz last.py", "lib/a#first.py", "data", "data/back\\slash",
             "data/new\nline", "b", "b/x.bin", "#lead", "lib/mid dle.py"]
    assert [r for r in order if "/" in r or r in HOT] == [r for r in order if r in HOT]
    places = [_blocks(mnt, image, rel) for rel in order]
    for (_, prev_end), (start, _) in zip(places, places[1:], strict=False):
        assert start == -(-prev_end // K) * K, places
    hot_end = places[-1][1]
    cold_dirs = ["a", "zz", "empty dir"]
    cold = [r.physical for rel in COLD + ["sparse"] for r in physical_runs(mnt / rel)]
    cold += [b * K for d in cold_dirs for b in _debugfs_blocks(image, d)]
    assert min(cold) >= hot_end
    hot_dirs = [mnt, mnt / "lib", mnt / "data", mnt / "b"]
    hot_inodes = {os.lstat(d).st_ino for d in hot_dirs[1:]}
    hot_inodes |= {os.lstat(d / n).st_ino for d in hot_dirs for n in os.listdir(d)
                   if n != "lost+found"}
    # pass 1 numbers them from the first free one (11: lost+found); a placeholder that
    # a hot file or directory replaced leaves its number free for a cold one
    assert max(hot_inodes) <= 11 + 2 * len(hot_inodes)
    cold_inodes = {os.lstat(os.path.join(d, n)).st_ino for c in cold_dirs
                   for d, ds, fs in os.walk(mnt / c) for n in ds + fs} - hot_inodes
    assert len([i for i in cold_inodes if i < max(hot_inodes)]) <= len(HOT) + 3


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


def _dumpe2fs_header(image: Path) -> dict[str, int]:
    out = subprocess.run(["dumpe2fs", "-h", str(image)], check=True, capture_output=True,
                         text=True, env={"LC_ALL": "C", "PATH": os.environ["PATH"]}).stdout
    fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    return {k: int(fields[k]) for k in ("Inodes per group", "Blocks per group", "Block count")}


@pytest.mark.root
def test_build_ext4_hot_region_at_the_end(tmp_path: Path, state_dir: Path) -> None:
    """--hot-region end: the root directory's block, the hot directories, their entries'
    inodes and the hot files' data all in the last block group, in first-use order; names
    and nodes debugfs cannot make (a newline, a socket, a symlink to a name with a
    newline) right in the image all the same; e2fsck clean, the mount equal to the source."""
    src = tmp_path / "src"
    make_rich_tree(src)
    os.mknod(src / "data/sock", 0o640 | stat.S_IFSOCK)
    os.symlink("bad\ntarget", src / "lib/odd link")
    os.utime(src / "lib", ns=(1_000_000_123, 1_600_000_000_987_654_321))
    pp = tmp_path / "app.pack"
    packfile.save(pp, pack_of(src, HOT))
    img = tmp_path / "end.img"
    res = bb("layout", "build-ext4", "--pack", str(pp), str(src), str(img), "--size", "320M",
             "--hot-region", "end", timeout=120)
    assert res.returncode == 0, res.err
    assert "7 hot files" in res.out and "at the end, from 258 MiB on" in res.out
    assert ("contiguous 100%, in access order 100%; seeks: cold start 1 (3 with the metadata "
            "it reads") in res.out.splitlines()[-1]
    _assert_clean(img)
    geo = _dumpe2fs_header(img)
    ipg, bpg = geo["Inodes per group"], geo["Blocks per group"]
    last = (geo["Block count"] - 1) // bpg
    assert last == 2
    with _mounted(img, tmp_path / "mnt") as mnt:
        _check_metadata(src, mnt)
        assert stat.S_ISSOCK(os.lstat(mnt / "data/sock").st_mode)
        assert os.readlink(mnt / "lib/odd link") == "bad\ntarget"
        root = _debugfs_blocks(img, "")
        assert root == [root[0]] and root[0] >= last * bpg
        order = ["lib", "lib/zz last.py", "lib/a#first.py", "data", "data/back\\slash",
                 "data/new\nline", "b", "b/x.bin", "#lead", "lib/mid dle.py"]
        places = [_blocks(mnt, img, rel) for rel in order]
        # right after the root's block and the staging directory's (freed) one
        assert places[0][0] == (root[0] + 2) * K
        for (_, prev_end), (start, _) in zip(places, places[1:], strict=False):
            assert start == -(-prev_end // K) * K, places
        cold = [r.physical for rel in COLD + ["sparse"] for r in physical_runs(mnt / rel)]
        cold += [b * K for d in ("a", "zz", "empty dir") for b in _debugfs_blocks(img, d)]
        assert not [c for c in cold if root[0] * K <= c < places[-1][1]]
        # the hot directories and files, and the cold files and directories in hot
        # directories (each filled into its placeholder, or made in place of it), beside
        # them
        beside = ["lib", "data", "b", *HOT, "lib/cold1.py", "data/cold3", "sparse",
                  "data/link to hot", "dangling", "a", "zz", "empty dir"]
        inodes = {os.lstat(mnt / rel).st_ino for rel in beside}
        assert {(i - 1) // ipg for i in inodes} == {last}, sorted(inodes)


@pytest.mark.root
def test_end_first_pass_moves_the_region_earlier_until_the_tree_fits(tmp_path: Path) -> None:
    """An estimate too small for the last group (64 MiB of a 320 MiB image) for an 80 MiB
    hot file: debugfs runs out of room there, and the next attempt starts the region a
    group earlier, where it fits; e2fsck finds the result clean."""
    stage = tmp_path / "hot"
    (stage / "\xff.stage").mkdir(parents=True)
    big = os.urandom(80 << 20)
    (stage / "\xff.stage/0000").write_bytes(big)
    img = str(tmp_path / "f.img")
    Path(img).touch()
    session, at = ext4end.first_pass_at_end(img, os.fsencode(stage), 320 << 20, 8192, 1 << 20,
                                            os.fsencode(tmp_path))
    assert 32768 * K <= at < 65536 * K  # group 1
    assert session.inodes == 2 and not session.fixups
    _assert_clean(img)
    out = subprocess.run(["debugfs", "-R", 'blocks "/\xff.stage/0000"', img], check=True,
                         capture_output=True).stdout.split()
    assert int(out[0]) * K > at and len(out) == 80 << 20 >> 12
    assert subprocess.run(["debugfs", "-R", 'dump "/\xff.stage/0000" /dev/stdout', img],
                          check=True, capture_output=True).stdout == big


def _pack_with_big(src: Path, used: list[tuple[int, int]]) -> Path:
    """The small hot files, and lib/big.so (4 MiB) second in access order, of which the
    start read only `used`."""
    from backburner.readahead.pack import Entry, FileState, Pack

    small = pack_of(src, HOT).entries
    p = src / "lib/big.so"
    st = os.stat(p)
    big = Entry(os.fsencode(p), FileState(st.st_dev, 0, st.st_ino, st.st_size,
                                          st.st_mtime_ns), tuple(used))
    pp = src.parent / "big.pack"
    packfile.save(pp, Pack((small[0], big, *small[1:])))
    return pp


@pytest.mark.root
@pytest.mark.parametrize("region", ["start", "end"])
def test_build_ext4_splits_a_large_file_into_its_used_ranges(tmp_path: Path, state_dir: Path,
                                                             region: str) -> None:
    """A 4 MiB hot file of which the start read 64 KiB and 128 KiB (a pack without the
    order of reads): only those are in the hot region, after all the small hot files
    (though it was read second), in the file's order; the rest lies outside the region;
    the file and the tree equal the source; e2fsck clean. With --whole-files it lies
    whole right after the first small file."""
    src = tmp_path / "src"
    make_tree(src)
    big = os.urandom(4 << 20)
    (src / "lib/big.so").write_bytes(big)
    used = [(0, 64 << 10), (2 << 20, 128 << 10)]
    pp = _pack_with_big(src, used)
    img = tmp_path / "split.img"
    res = bb("layout", "build-ext4", "--pack", str(pp), str(src), str(img), "--size", "320M",
             "--hot-region", region, timeout=120)
    assert res.returncode == 0, res.err
    assert "1 file in pieces, 3.8 MiB unread by the start outside the hot region" in res.out
    _assert_clean(img)
    whole = tmp_path / "whole.img"
    res = bb("layout", "build-ext4", "--pack", str(pp), str(src), str(whole), "--size", "320M",
             "--hot-region", region, "--whole-files", timeout=120)
    assert res.returncode == 0 and "in pieces" not in res.out, res.err
    with _mounted(img, tmp_path / "mnt") as mnt:
        assert (mnt / "lib/big.so").read_bytes() == big
        small_end = max(-(-(r.physical + r.length) // K) * K
                        for rel in HOT for r in physical_runs(mnt / rel))
        small_start = min(r.physical for rel in HOT for r in physical_runs(mnt / rel))
        runs = physical_runs(mnt / "lib/big.so")
        hot = [r for r in runs if any(r.logical < o + n and o < r.logical + r.length
                                      for o, n in used)]
        # the used ranges, in file order, right after the small hot files, contiguous
        assert [(r.logical, r.length) for r in hot] == [(0, 64 << 10), (2 << 20, 128 << 10)]
        assert hot[0].physical == small_end and hot[1].physical == small_end + (64 << 10)
        cold = [r for r in runs if r not in hot]
        assert sum(r.length for r in cold) == (4 << 20) - (192 << 10)
        # outside the hot region: after it (at the image's end, wherever there is room)
        hot_end = hot[1].physical + hot[1].length
        assert all(r.physical >= hot_end or r.physical + r.length <= small_start
                   for r in cold), (cold, small_start, hot_end)
        if region == "start":
            assert min(r.physical for r in cold) >= hot_end
    with _mounted(whole, tmp_path / "mnt") as mnt:
        first = physical_runs(mnt / HOT[0])[0]
        runs = physical_runs(mnt / "lib/big.so")
        assert len(runs) == 1 and runs[0].physical == first.physical + -(-first.length // K) * K
        assert small_start <= first.physical


# --- from any source -------------------------------------------------------------------------


def _built_equal(pp: Path, src: Path, img: Path, *more: str) -> str:
    res = bb("layout", "build-ext4", "--pack", str(pp), str(src), str(img), *more, timeout=120)
    assert res.returncode == 0, res.err
    assert "verified equal to" in res.out
    _assert_clean(img)
    return res.out


@pytest.mark.root
@pytest.mark.parametrize(("hot_inside", "region"), [(False, "start"), (False, "end"),
                                                    (True, "start")])
def test_build_ext4_from_a_directory_holding_lost_found(tmp_path: Path, state_dir: Path,
                                                        hot_inside: bool, region: str) -> None:
    """The root of every ext4 holds lost+found, which mke2fs makes itself: an empty one
    in the source, or one holding a file the start reads, is the image's own."""
    src = tmp_path / "src"
    (src / "lost+found").mkdir(parents=True, mode=0o700)
    (src / "d").mkdir()
    (src / "d/hot.bin").write_bytes(os.urandom(20_000))
    hot = ["d/hot.bin"]
    if hot_inside:
        (src / "lost+found/#4711").write_bytes(os.urandom(9_000))
        hot.append("lost+found/#4711")
    pp = tmp_path / "a.pack"
    packfile.save(pp, pack_of(src, hot))
    img = tmp_path / "a.img"
    out = _built_equal(pp, src, img, "--hot-region", region)
    assert f"{len(hot)} hot file" in out
    with _mounted(img, tmp_path / "mnt") as mnt:
        assert stat.S_IMODE(os.lstat(mnt / "lost+found").st_mode) == 0o700
        assert sorted(os.listdir(mnt / "lost+found")) == (["#4711"] if hot_inside else [])


@pytest.mark.root
@pytest.mark.parametrize("region", ["start", "end"])
def test_build_ext4_from_a_mounted_ext4_image(tmp_path: Path, state_dir: Path,
                                              region: str) -> None:
    """The documented flow: an existing image loop-mounted read-only, its start recorded
    there, the image re-laid from the mount. Its root's lost+found (here holding a file
    e2fsck recovered once), hard links, device nodes, a socket, xattrs and ACLs all
    come across; the hot files are first."""
    tree = tmp_path / "tree"
    make_rich_tree(tree)
    (tree / "lost+found").mkdir(mode=0o700)
    (tree / "lost+found/#12").write_bytes(b"recovered")
    old = tmp_path / "old.img"
    subprocess.run(["truncate", "-s", "96M", str(old)], check=True)
    subprocess.run(["mke2fs", "-q", "-F", "-t", "ext4", "-d", str(tree), str(old)], check=True,
                   capture_output=True)
    img = tmp_path / "new.img"
    with _mounted(old, tmp_path / "src") as src:
        assert os.path.ismount(src)
        pp = tmp_path / "app.pack"
        packfile.save(pp, pack_of(src, HOT))
        out = _built_equal(pp, src, img, "--size", "320M", "--hot-region", region)
        assert "7 hot files" in out and "(0 missing)" in out.splitlines()[-1]
        assert "contiguous 100%, in access order 100%" in out.splitlines()[-1]
        with _mounted(img, tmp_path / "mnt") as mnt:
            _check_metadata(src, mnt)
            assert (mnt / "lost+found/#12").read_bytes() == b"recovered"


@pytest.mark.root
def test_build_ext4_from_a_mounted_xfs(tmp_path: Path, state_dir: Path) -> None:
    """An xfs source: no lost+found, nanosecond times, its own xattr namespaces."""
    xfs = tmp_path / "src.xfs"
    subprocess.run(["truncate", "-s", "320M", str(xfs)], check=True)
    subprocess.run(["mkfs.xfs", "-q", str(xfs)], check=True, capture_output=True)
    src = tmp_path / "src"
    src.mkdir()
    with system.Transaction("test-xfs") as tx:
        loop = tx.apply(system.LoopDevice(str(xfs)))
        tx.apply(system.Mount(loop, str(src), "xfs"))
        make_rich_tree(src)
        os.sync()
        pp = tmp_path / "app.pack"
        packfile.save(pp, pack_of(src, HOT))
        img = tmp_path / "new.img"
        out = _built_equal(pp, src, img)
        assert "7 hot files" in out
        with _mounted(img, tmp_path / "mnt") as mnt:
            _check_metadata(src, mnt)


@pytest.mark.root
def test_a_failing_mke2fs_is_reported_in_its_own_words(tmp_path: Path, state_dir: Path) -> None:
    """mke2fs prints its complaint and then its usage text: the one-line error is the
    complaint, at once (not after growing the first pass to no avail)."""
    src = tmp_path / "src"
    make_tree(src)
    pp = tmp_path / "a.pack"
    packfile.save(pp, pack_of(src, HOT[:2]))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    fake = bin_dir / "mke2fs"
    fake.write_text("#!/bin/sh\n"
                    f"echo called >> {calls}\n"
                    "echo 'The resize maximum must be greater than the filesystem size.' >&2\n"
                    "echo >&2\necho 'Bad option(s) specified: ' >&2\necho >&2\n"
                    "printf '\\tresize=<resize maximum size in blocks>\\n' >&2\n"
                    "printf '\\tassume_storage_prezeroed=<0 to disable, 1 to enable>\\n' >&2\n"
                    "exit 1\n")
    fake.chmod(0o755)
    img = tmp_path / "a.img"
    res = bb("layout", "build-ext4", "--pack", str(pp), str(src), str(img),
             env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}, timeout=120)
    assert res.returncode == 71
    line = one_line_error(res)
    assert line.endswith("mke2fs -d (the hot files' first pass) failed: The resize maximum "
                         "must be greater than the filesystem size."), line
    assert calls.read_text().count("called") == 1
    assert not img.exists()


@pytest.mark.root
def test_a_file_read_out_of_order_is_laid_out_piece_by_piece(tmp_path: Path,
                                                             state_dir: Path) -> None:
    """A pack with the order of reads (--lookups): a library read in four pieces out of
    its order, between two data files, and a name looked for in vain in a directory no
    hot file is in. The hot region holds, one after the other: that directory's block,
    the library's extent-tree block, then every piece and file in the order read (with
    the data files' directory right before the first of them); the library's unread rest
    lies after the region; e2fsck clean, the tree equal."""
    from backburner.readahead.pack import MISSED, Entry, FileState, Lookup, Pack, Step

    src = tmp_path / "src"
    for rel, size in (("lib/big.so", 1 << 20), ("data/a", 5 * K), ("data/b", 3 * K),
                      ("etc/cold", 3 * K)):
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_bytes(os.urandom(size))

    def entry(rel: str, ranges: tuple) -> Entry:
        st = os.stat(src / rel)
        return Entry(os.fsencode(src / rel), FileState(st.st_dev, 0, st.st_ino, st.st_size,
                                                       st.st_mtime_ns), ranges)

    pieces = [(100, 8), (0, 4), (200, 4), (50, 2)]  # (first page, pages), as read
    big = entry("lib/big.so", tuple(sorted((p * K, n * K) for p, n in pieces)))
    pack = Pack((big, entry("data/a", ((0, 5 * K),)), entry("data/b", ((0, 3 * K),))), K,
                lookups=(Lookup(MISSED, os.fsencode(src / "etc/ld.so.cache"),
                                FileState(0, 0, 0, 0, 0)),),
                steps=(Step(-1), Step(0, 100, 8), Step(1, 0, 5), Step(0, 0, 4), Step(2, 0, 3),
                       Step(0, 200, 4), Step(0, 50, 2)))
    pp = tmp_path / "ordered.pack"
    packfile.save(pp, pack)
    img = tmp_path / "ordered.img"
    out = _built_equal(pp, src, img, "--size", "96M")
    assert "1 file in pieces" in out, out
    with _mounted(img, tmp_path / "mnt") as mnt:
        runs = {r.logical: r for r in physical_runs(mnt / "lib/big.so")}
        order = [runs[100 * K].physical, physical_runs(mnt / "data/a")[0].physical,
                 runs[0].physical, physical_runs(mnt / "data/b")[0].physical,
                 runs[200 * K].physical, runs[50 * K].physical]
        lengths = [8 * K, 5 * K, 4 * K, 3 * K, 4 * K, 2 * K]
        # data/a's directory comes where the start first looks into it: right before it
        assert _debugfs_blocks(img, "data") == [(order[0] + lengths[0]) // K]
        lengths[0] += K
        for at, ln, nxt in zip(order, lengths, order[1:], strict=False):
            assert nxt == at + ln, (order, lengths)
        tree_at = subprocess.run(["debugfs", "-R", 'ex "/lib/big.so"', str(img)], check=True,
                                 capture_output=True, text=True).stdout.splitlines()[1].split()
        assert int(tree_at[7]) * K == order[0] - K  # right before the first piece
        etc = _debugfs_blocks(img, "etc")
        assert etc[-1] * K < order[0]  # the directory searched, in the region before
        rest = [r for r in physical_runs(mnt / "lib/big.so") if r.logical not in
                (100 * K, 0, 200 * K, 50 * K)]
        assert min(r.physical for r in rest) > order[-1]
