"""layout: the three order formats (pure, with hostile names), their effect in real
mksquashfs and xorriso images (where each file's bytes landed, found in the image itself),
`layout check` before and after a build."""

from __future__ import annotations

import json
import os
import random
import subprocess
from pathlib import Path

import pytest
from helpers import bb

from backburner import system
from backburner.readahead import ext4image, layout, packfile
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
    assert "seeks: cold start 1 (3 with the metadata it reads: " in after
    assert "), with replay 1;" in after and "with the metadata" not in before  # a directory


# --- the check's prediction against a seeking drive ----------------------------------------


def _scattered_tree(src: Path) -> list[str]:
    """Eight directories of small files with a 1 MiB cold file in each (an ordinary image
    spreads the hot files over 12 MiB); 24 hot files from all of them, in a shuffled
    order. Returns the hot files, in that order."""
    rng = random.Random(5)
    for d in range(8):
        (src / f"d{d}").mkdir(parents=True)
        for i in range(40):
            (src / f"d{d}" / f"f{i:02d}").write_bytes(rng.randbytes(rng.randint(2, 6) * K))
        (src / f"d{d}" / "m-bulk").write_bytes(rng.randbytes(1 << 20))
    hot = [f"d{d}/f{i:02d}" for d in range(8) for i in rng.sample(range(40), 3)]
    rng.shuffle(hot)
    return hot


def _slowdisk_seeks(image: Path, mnt: Path, rels: list[str]) -> int:
    """The dvd slowdisk's own seek count for a cold start reading `rels` in order, on a
    fresh read-only mount (a mount's first metadata reads are the start's)."""
    from backburner.slowdisk import device as slowdisk

    with system.Transaction("test-check-seeks") as tx:
        disk = slowdisk.attach(slowdisk.CreateOptions("dvd", str(image), read_only=True), tx)
        tx.apply(system.Mount(disk.device, str(mnt), "ext4", "ro"))
        system.drop_caches()
        before = json.loads(Path(disk.stats_path).read_text())["seeks"]
        for rel in rels:
            (mnt / rel).read_bytes()
        return json.loads(Path(disk.stats_path).read_text())["seeks"] - before


@pytest.mark.root
@pytest.mark.alone  # another test's drop_caches mid-start has the start read its metadata again
def test_check_predicts_the_seeks_a_slowdisk_counts(tmp_path: Path, state_dir: Path) -> None:
    """`layout check`'s cold-start seeks, metadata included, against slowdisk's own count
    for the same start: on an ordinary image (scattered) and on the layout image of the
    same tree; the data alone would predict far fewer on the layout image's start."""
    src = tmp_path / "src"
    hot = _scattered_tree(src)
    pack = pack_of(src, hot)
    ordinary, built = tmp_path / "ordinary.img", tmp_path / "layout.img"
    subprocess.run(["truncate", "-s", "48M", str(ordinary)], check=True)
    subprocess.run(["mke2fs", "-q", "-F", "-t", "ext4", "-T", "default", "-E", "nodiscard",
                    "-d", str(src), str(ordinary)], check=True, capture_output=True)
    ext4image.build_ext4(pack, ext4image.BuildOptions(str(src), str(built), 48 << 20,
                                                      root=str(src)))
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    got = {}
    for img in (ordinary, built):
        c = layout.check(str(img), pack, str(src))
        assert c.meta is not None and c.files == 24
        got[img.name] = (c.seeks_cold, c.meta.seeks, _slowdisk_seeks(img, mnt, hot))
    for _data_only, predicted, counted in got.values():
        assert abs(predicted - counted) <= max(2, predicted // 5), got
    assert got["layout.img"][1] * 3 < got["ordinary.img"][1], got
    assert got["layout.img"][0] < got["layout.img"][1], got
