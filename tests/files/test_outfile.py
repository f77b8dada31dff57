"""files.outfile's promise, checked before any work: an output path that cannot be
written is refused in one line with its own status, whatever root's access check says."""

from __future__ import annotations

from pathlib import Path

import pytest

from backburner.base.errors import ExistsError, IOFailure, UsageError
from backburner.files import outfile


def test_an_empty_name_is_a_usage_error() -> None:
    with pytest.raises(UsageError) as info:
        outfile.check_new("")
    assert info.value.message == "the output file name is empty"


@pytest.mark.root
@pytest.mark.parametrize("path", ["/proc/backburner-x.json", "/sys/backburner-x.json"])
def test_a_folder_where_no_file_can_be_made_is_refused_before_the_work(path: str) -> None:
    """root's access(W_OK) says yes to /proc and /sys: a job traced for minutes then lost
    its trace when the file could not be made."""
    with pytest.raises(IOFailure, match=f"^{path}: cannot write there"):
        outfile.check_new(path)


def test_the_check_leaves_nothing_in_the_folder(tmp_path: Path) -> None:
    outfile.check_new(str(tmp_path / "out.json"))
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "out.json").write_text("x")
    with pytest.raises(ExistsError):
        outfile.check_new(str(tmp_path / "out.json"))
    outfile.check_new(str(tmp_path / "out.json"), force=True)
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]
