"""Files: a private directory is named in the journal before it is made.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from backburner import system

pytestmark = pytest.mark.timeout(60)  # a hang fails fast instead of at 300 s


def test_a_private_directory_is_named_in_the_journal_before_it_is_made(
        state_dir: Path, tmp_path: Path) -> None:
    """Killed between naming and making it: restore knows the name, and leaves a directory
    of that name alone when someone else made it."""
    seen: list[str] = []
    change = system.PrivateDir(str(tmp_path), "w-")
    made = change.apply_with(seen.append)
    assert seen == [made] and Path(made).is_dir()
    assert oct(Path(made).stat().st_mode & 0o777) == "0o700"
    assert change.undo(None, made) is None and not Path(made).exists()
    other = tmp_path / "w-theirs"
    other.mkdir()
    os.chown(other, 65534, 65534)
    note = change.undo(None, str(other))
    assert other.is_dir() and note is not None and "not a directory backburner made" in note
