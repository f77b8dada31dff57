"""net.link: the slow link's spec, parsed once, wrong parts named in one line (64)."""

from __future__ import annotations

import pytest

from backburner.base.errors import UsageError
from backburner.net.link import LinkSpec, parse, parse_rate


def test_parse_full_and_default_buffer() -> None:
    assert parse("1mbit:40ms:300ms") == LinkSpec(1_000_000, 40.0, 300.0)
    assert parse("512kbit:0ms") == LinkSpec(512_000, 0.0, 300.0)
    assert parse("1.5Mbit:10ms:50ms").rate_bit == 1_500_000


def test_buffer_bytes_is_the_queue_at_the_rate() -> None:
    assert parse("1mbit:0ms:300ms").buffer_bytes == 37_500
    assert parse("8kbit:0ms:1ms").buffer_bytes == 2 * 1514  # never below two frames


@pytest.mark.parametrize("bad", ["", "1mbit", "fast:40ms", "1mbps:40ms", "1mbit:40",
                                 "1mbit:40ms:big", "1mbit:0ms:0ms", "0mbit:1ms",
                                 "1kbit:0ms", "1mbit:1ms:2ms:3ms",
                                 # a newline or a space the old `$` let through
                                 "1mbit\n:0ms", "1mbit:0ms\n", "1mbit:0ms:300ms\n",
                                 " 1mbit:0ms",
                                 # what tc wraps round or refuses after the first changes
                                 "11gbit:0ms", "99999999999999999999gbit:0ms",
                                 "9" * 400 + "gbit:0ms", "1mbit:10001ms",
                                 "1mbit:0ms:20000ms", "10gbit:0ms:5000ms"])
def test_unknown_spec_is_one_usage_line(bad: str) -> None:
    with pytest.raises(UsageError) as err:
        parse(bad)
    assert err.value.exit_status == 64
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("text, bit", [("8kbit", 8_000), ("10gbit", 10_000_000_000),
                                       ("1.5Mbit", 1_500_000)])
def test_rates_at_the_bounds_are_taken(text: str, bit: int) -> None:
    assert parse_rate(text) == bit


@pytest.mark.parametrize("bad", ["1mbit\n", "1mbit ", "\t1mbit", "7999bit", "10.1gbit",
                                 "1" * 30 + "bit", "9" * 400 + "gbit"])
def test_a_rate_out_of_bounds_or_with_a_newline_is_one_usage_line(bad: str) -> None:
    with pytest.raises(UsageError) as err:
        parse_rate(bad, " (--net-uplink)")
    assert err.value.exit_status == 64 and "\n" not in str(err.value)
    assert "(--net-uplink)" in str(err.value)
