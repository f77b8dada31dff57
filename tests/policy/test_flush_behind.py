"""policy.flush_behind: the item of a policy text that asks for flush-behind."""

from __future__ import annotations

import pytest

from backburner.base.errors import UsageError
from backburner.policy import flush_behind


@pytest.mark.parametrize(("text", "rest", "on"), [
    ("io=idle,flush-behind", "io=idle", True),
    ("flush-behind=on,background", "background", True),
    ("io=idle,flush-behind=off", "io=idle", False),
    ("io=idle,pause-ms=500", "io=idle,pause-ms=500", False),  # the throttle's: left alone
    ("flush-behind", "default", True),
])
def test_the_item_is_taken_out_and_read(text: str, rest: str, on: bool) -> None:
    assert flush_behind.split(text) == (rest, on)


def test_a_value_other_than_on_or_off_is_one_line_of_usage() -> None:
    with pytest.raises(UsageError, match="flush-behind='yes'"):
        flush_behind.split("io=idle,flush-behind=yes")
