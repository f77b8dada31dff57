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
