"""Slices by name: what `run --slice` and govern accept (the units themselves are proven in
the guest: tests/vm)."""

from __future__ import annotations

import pytest

from backburner.base.errors import UsageError
from backburner.systemd import facts as units


@pytest.mark.parametrize("name", ["backburner.slice", "bulk-updates.slice", "a_b.slice"])
def test_slice_names(name: str) -> None:
    assert units.check_slice_name(name) == name


@pytest.mark.parametrize("name, why", [
    ("/sys/fs/cgroup/x.slice", "given as a path"), ("user.slice/x.slice", "given as a path"),
    ("backburner", "not a slice name"), ("-.slice", "not a slice name"),
    ("a--b.slice", "not a slice name"), ("-a.slice", "not a slice name"),
    ("a b.slice", "not a slice name"), (".slice", "not a slice name")])
def test_what_is_not_a_slice_name_is_one_usage_error(name: str, why: str) -> None:
    with pytest.raises(UsageError, match=why) as err:
        units.check_slice_name(name)
    assert err.value.exit_status == 64 and "\n" not in str(err.value)
