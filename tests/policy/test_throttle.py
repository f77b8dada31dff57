"""throttlepolicy: the throttle's items in a policy text, their ranges, and govern's table
for a throttled cell (pure)."""

from __future__ import annotations

import pytest

from backburner.base.errors import UsageError
from backburner.policy import throttle as throttlepolicy
from backburner.policy.throttle import Spec


@pytest.mark.parametrize("text, rest, spec", [
    ("background", "background", None),
    ("io=idle,cpu=idle", "io=idle,cpu=idle", None),
    ("throttle", "default", Spec()),
    ("background,throttle", "background", Spec()),
    ("background,pause-ms=250,min-duty=0.25", "background",
     Spec(pause_ms=250, min_duty=0.25)),
    ("min-duty=0.1", "default", Spec(min_duty=0.1)),
    ("io=idle,pause-ms=100,stall-ms=50,window-ms=500", "io=idle",
     Spec(pause_ms=100, stall_ms=50, window_ms=500)),
    ("background,pause-ms=100,throttle=off", "background", None),
])
def test_a_policy_text_and_its_throttle(text: str, rest: str,
                                        spec: Spec | None) -> None:
    assert throttlepolicy.split(text) == (rest, spec)


def test_the_defaults_are_governs() -> None:
    from backburner.govern.rules import ThrottleSettings

    s, d = Spec(), ThrottleSettings()
    assert (s.pause_ms, s.min_duty, s.stall_ms, s.window_ms) == (
        d.pause_ms, d.min_duty, d.stall_ms, d.window_ms)


@pytest.mark.parametrize("text", ["throttle,pause-ms=0", "pause-ms=1e3", "min-duty=0",
                                  "throttle,window-ms=100", "throttle=yes"])
def test_bad_numbers_are_refused_in_one_line(text: str) -> None:
    with pytest.raises(UsageError) as err:
        throttlepolicy.split(text)
    assert err.value.exit_status == 64 and "\n" not in str(err.value)


def test_a_word_where_a_number_goes_is_named_so() -> None:
    """`pause-ms=abc` was "out of range": it is not a number."""
    with pytest.raises(UsageError, match="pause-ms='abc' in policy .* is not a number"):
        throttlepolicy.split("background,pause-ms=abc")
    with pytest.raises(UsageError, match="is out of range"):
        throttlepolicy.split("background,pause-ms=0")



def test_govern_table_names_what_differs_from_its_defaults() -> None:
    assert throttlepolicy.govern_table(Spec()) == ""
    assert throttlepolicy.govern_table(Spec(pause_ms=250, min_duty=0.25)) == (
        "[throttle]\npause_ms = 250\nmin_duty = 0.25\n")
