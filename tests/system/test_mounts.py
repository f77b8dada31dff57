"""Mounts: nosuid and nodev unless asked.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from backburner import system

pytestmark = pytest.mark.timeout(60)  # a hang fails fast instead of at 300 s


@pytest.mark.root
@pytest.mark.parametrize("asked, absent", [("", set()), ("dev", {"nodev"}),
                                           ("ro,suid", {"nosuid"})])
def test_mounts_are_nosuid_and_nodev_unless_asked(
        state_dir: Path, tmp_path: Path, asked: str, absent: set[str]) -> None:
    target = tmp_path / "mnt"
    target.mkdir()
    with system.Transaction("test-mount") as tx:
        tx.apply(system.Mount("tmpfs", str(target), "tmpfs", asked))
        have = system.mount_options(str(target))
        assert {"nosuid", "nodev"} - absent <= have
        assert not absent & have
    assert not system.is_mountpoint(str(target))
