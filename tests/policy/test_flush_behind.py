"""policy.flush_behind: the item of a policy text that asks for flush-behind."""

from __future__ import annotations

import pytest

from backburner.base.errors import UsageError
from backburner.policy import flush_behind, grammar


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


def test_given_twice_is_refused_not_the_last_one_taken() -> None:
    with pytest.raises(UsageError, match="flush-behind given twice"):
        flush_behind.split("io=idle,flush-behind=on,flush-behind=off")


@pytest.mark.parametrize("text", ["cpu=idle", "io=none"])
def test_without_an_io_class_to_write_at_it_is_refused(text: str) -> None:
    """No class, or the class `none` (io=none, --io none): nothing to write the files at
    that the flusher's own writes would not have had."""
    policy = grammar.parse_policy(text)
    with pytest.raises(UsageError, match="flush-behind writes the job's files at its IO"):
        flush_behind.check_class(text, policy, "the job's")
    flush_behind.check_class("io=idle", grammar.parse_policy("io=idle"), "the job's")
