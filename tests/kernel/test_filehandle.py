"""kernel.filehandle: a file opened by its inode number alone is that file."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from backburner.kernel import filehandle


@pytest.mark.root
def test_a_file_opened_by_its_inode_is_the_same_file(tmp_path: Path) -> None:
    target = tmp_path / "by-inode"
    target.write_bytes(b"the contents")
    anchor = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        try:
            fd = filehandle.open_by_inode(anchor, os.stat(target).st_ino)
        except OSError as err:
            if err.errno in (errno.EOPNOTSUPP, errno.ESTALE):  # not ext2/3/4's handles
                pytest.skip(f"{tmp_path} is not on a filesystem with 32-bit handles")
            raise
        try:
            assert os.read(fd, 100) == b"the contents"
            assert os.fstat(fd).st_ino == os.stat(target).st_ino
        finally:
            os.close(fd)
    finally:
        os.close(anchor)


def test_an_inode_beyond_a_32_bit_handle_is_refused() -> None:
    with pytest.raises(OSError) as caught:
        filehandle.open_by_inode(0, 1 << 32)
    assert caught.value.errno == errno.EOVERFLOW
