"""logtail: the end of a log, whatever its size, blank lines and cut-off lines aside."""

from __future__ import annotations

from pathlib import Path

from backburner.files.logtail import last_lines


def test_last_lines_of_a_long_log(tmp_path: Path) -> None:
    log = tmp_path / "log"
    log.write_text("".join(f"line {i}\n" for i in range(100_000)) + "\n  \n" + "x" * 900)
    assert last_lines(str(log), 2, max_chars=600) == ["line 99999", "x" * 600]
    assert last_lines(str(tmp_path / "missing")) == []
    (tmp_path / "empty").write_text("\n\n")
    assert last_lines(str(tmp_path / "empty")) == []
