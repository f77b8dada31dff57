"""The one exception family: what a refusal by the kernel is called, by who we are."""

from __future__ import annotations

import pytest

from backburner.base import errors


def test_a_refusal_says_needs_root_only_to_someone_who_is_not(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    err = errors.denied("reading the block device /dev/sda")
    assert isinstance(err, errors.NotRootError) and "needs root" in str(err)
    monkeypatch.setattr("os.geteuid", lambda: 0)
    err = errors.denied("reading the block device /dev/sda", "Permission denied")
    assert isinstance(err, errors.AccessError) and err.exit_status == 77
    assert "needs root" not in str(err)
    assert "the kernel refused (Permission denied) although this runs as root" in str(err)
