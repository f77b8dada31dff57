"""bench/proberoot.py: what a layout of the probe's files needs on the testbed."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from backburner.bench import proberoot


@pytest.fixture
def plain_dir() -> Iterator[Path]:
    """A fresh directory of ours that a layout copies (/tmp and /run are the testbed's own,
    never copied)."""
    path = Path(tempfile.mkdtemp(prefix="backburner-test-", dir="/var/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def test_bytes_needed_counts_what_each_layout_copies(plain_dir: Path) -> None:
    """`touched` copies the files opened, `directories` every file beside them, `aged` the
    same with its fillers: the bound bench checks the testbed's room against."""
    (plain_dir / "a").write_bytes(b"x" * 10_000)
    (plain_dir / "b").write_bytes(b"y" * 5_000)
    (plain_dir / "sub").mkdir()  # a directory beside them is not copied
    touched = [str(plain_dir / "a")]
    per_file = proberoot.FILE_OVERHEAD_BYTES
    assert proberoot.bytes_needed("touched", touched) == 10_000 + per_file
    assert proberoot.bytes_needed("directories", touched) == 15_000 + 2 * per_file
    assert proberoot.bytes_needed("aged", touched) == (
        15_000 + 2 * per_file + 2 * proberoot.AGED_FILLER_BYTES)
    assert proberoot.bytes_needed("touched", [str(plain_dir / "gone")]) == 0
