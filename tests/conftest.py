"""pytest hooks and fixtures; the helpers tests share live in helpers.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.geteuid() == 0:
        return  # root tests always run as root
    skip = pytest.mark.skip(reason="needs root")
    for item in items:
        if "root" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """BACKBURNER_STATE_DIR in a fresh tmp dir (inherited by subprocesses)."""
    path = tmp_path / "state"
    path.mkdir()
    monkeypatch.setenv("BACKBURNER_STATE_DIR", str(path))
    return path


