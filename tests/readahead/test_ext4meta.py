"""ext4meta: inode-table places read from real images agree with dumpe2fs and debugfs
(1 KiB and 4 KiB blocks, 32- and 64-byte group descriptors); the read-ahead window
follows the kernel's rule (__ext4_get_inode_loc)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from backburner.readahead import ext4meta


def _image(tmp_path: Path, size: str, *opts: str) -> Path:
    tree = tmp_path / "tree"
    for d in range(3):
        (tree / f"d{d}").mkdir(parents=True)
        for i in range(50):
            (tree / f"d{d}" / f"f{i}").write_text(str(i))
    img = tmp_path / "img"
    subprocess.run(["truncate", "-s", size, str(img)], check=True)
    subprocess.run(["mke2fs", "-q", "-F", "-t", "ext4", *opts, "-d", str(tree), str(img)],
                   check=True, capture_output=True)
    return img


@pytest.mark.parametrize("size,opts", [("64M", ()), ("300M", ("-T", "default")),
                                       ("300M", ("-O", "^64bit,^metadata_csum"))])
def test_geometry_agrees_with_dumpe2fs_and_debugfs(tmp_path: Path, size: str,
                                                    opts: tuple[str, ...]) -> None:
    img = _image(tmp_path, size, *opts)
    geo = ext4meta.read(str(img))
    dump = subprocess.run(["dumpe2fs", str(img)], capture_output=True, text=True).stdout
    assert geo.block == int(re.search(r"Block size:\s+(\d+)", dump)[1])
    assert list(geo.tables) == [int(t) for t in re.findall(r"Inode table at (\d+)-", dump)]
    # without descriptor checksums the kernel cannot trust a count of unused inodes
    unused = [int(u) for u in re.findall(r"(\d+) unused inodes", dump)] or [0] * len(geo.tables)
    assert list(geo.in_use) == [geo.inodes_per_group - u for u in unused]
    assert geo.in_use[0] >= 150
    cmds = tmp_path / "cmds"
    inodes = [2, 11, 12, 100, 163, geo.inodes_per_group + 1]
    cmds.write_text("".join(f"imap <{i}>\n" for i in inodes))
    out = subprocess.run(["debugfs", "-f", str(cmds), str(img)], capture_output=True,
                         text=True).stdout
    assert [geo.inode_block(i) for i in inodes] == [
        int(b) for b in re.findall(r"located at block (\d+)", out)]


def test_window_is_the_kernels() -> None:
    """Aligned 32-block window, cut to the table and to the inodes in use; the kernel's
    loop reads its end block too."""
    geo = ext4meta.Geometry(4096, 8192, 256, (1000, 50000), (800, 8192))
    assert geo.inode_block(1) == 1000 and geo.inode_block(17) == 1001
    assert geo.window(1) == range(1000, 1033)  # 992 aligned, moved to the table: 1000+32
    assert geo.window(16 * 30 + 1) == range(1024, 1051)  # 800 in use: 50 blocks
    assert geo.window(8192 + 16 * 40 + 1) == range(50016, 50049)


def _node(depth: int, entries: list[tuple[int, int]]) -> bytes:
    """An extent-tree node: header, then (logical block, child block) index entries."""
    import struct

    out = struct.pack("<HHHHI", 0xF30A, len(entries), 4, depth, 0)
    for first, child in entries:
        out += struct.pack("<IIHH", first, child & 0xFFFFFFFF, child >> 32, 0)
    return out


def _inode(root: bytes, flags: int = 0x80000) -> bytes:
    import struct

    raw = bytearray(256)
    struct.pack_into("<I", raw, 0x20, flags)
    raw[0x28:0x28 + len(root)] = root
    return bytes(raw)


def test_tree_blocks_reads_only_the_nodes_the_wanted_blocks_need() -> None:
    leaves = {100: _node(0, []), 200: _node(0, []), 7 << 32: _node(0, [])}
    inode = _inode(_node(1, [(0, 100), (1000, 200), (5000, 7 << 32)]))
    read = leaves.__getitem__
    assert ext4meta.tree_blocks(inode, read, [(1500, 1)]) == [200]
    assert ext4meta.tree_blocks(inode, read, [(0, 1), (1200, 5)]) == [100, 200]
    assert ext4meta.tree_blocks(inode, read, [(999, 2)]) == [100, 200]
    assert ext4meta.tree_blocks(inode, read, [(9000, 1)]) == [7 << 32]
    assert ext4meta.tree_blocks(inode, read, []) == []
    # two levels: an index block, then its leaves
    deep = {300: _node(1, [(0, 100), (1000, 200)]), 100: _node(0, []), 200: _node(0, [])}
    assert ext4meta.tree_blocks(_inode(_node(2, [(0, 300)])), deep.__getitem__,
                                [(1001, 1)]) == [300, 200]
    # extents in the inode itself, or no extents at all: nothing to read
    assert ext4meta.tree_blocks(_inode(_node(0, [(0, 5)])), read, [(0, 1)]) == []
    assert ext4meta.tree_blocks(_inode(_node(1, [(0, 100)]), flags=0), read, [(0, 1)]) == []


def test_tree_blocks_agree_with_debugfs(tmp_path: Path) -> None:
    """A file of 12 extents has one leaf block, where debugfs says; one of 1 extent none."""
    tree = tmp_path / "tree"
    tree.mkdir()
    with open(tree / "holes", "wb") as f:
        for i in range(12):
            f.seek(i * 65536)
            f.write(b"x" * 4096)
    (tree / "plain").write_bytes(b"y" * 50000)
    img = tmp_path / "img"
    subprocess.run(["truncate", "-s", "64M", str(img)], check=True)
    subprocess.run(["mke2fs", "-q", "-F", "-t", "ext4", "-d", str(tree), str(img)],
                   check=True, capture_output=True)
    geo = ext4meta.read(str(img))
    listing = subprocess.run(["debugfs", "-R", "ls -l /", str(img)], capture_output=True,
                             text=True).stdout
    ino = {ln.split()[-1]: int(ln.split()[0]) for ln in listing.splitlines() if ln.strip()}
    data = img.read_bytes()

    def block(b: int) -> bytes:
        return data[b * geo.block:(b + 1) * geo.block]

    def inode(i: int) -> bytes:
        return data[geo.inode_at(i):geo.inode_at(i) + geo.inode_size]

    ex = subprocess.run(["debugfs", "-R", "ex /holes", str(img)], capture_output=True,
                        text=True).stdout
    leaf = int(re.search(r"^\s*0/\s*1\s+1/\s*1\s+\d+\s+-\s+\d+\s+(\d+)", ex, re.M)[1])
    assert ext4meta.tree_blocks(inode(ino["holes"]), block, [(0, 1)]) == [leaf]
    assert ext4meta.tree_blocks(inode(ino["plain"]), block, [(0, 13)]) == []
