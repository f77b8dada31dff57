"""units: the one place names and numbers are made safe and formatted."""

from __future__ import annotations

import math

import pytest

from backburner.base.errors import UsageError
from backburner.base.quantities import (
    fmt_count,
    fmt_duration,
    fmt_p,
    fmt_ratio,
    fmt_ratio_ci,
    fmt_signed,
    fmt_spread,
    fmt_value,
    one_line,
    parse_duration,
    slug,
)
from backburner.stats import RatioCI


@pytest.mark.parametrize("text, want", [
    ("readers:10:seq", "readers_10_seq"),
    ("cmd:'grep \"[/x]\" f'", "cmd_grep_x_f"),
    ("../../etc/passwd", "etc_passwd"),
    ("..", "x"),
    ("v1.5", "v1.5"),
    ("ünï köde", "n_k_de"),
    ("///", "x"),
])
def test_slug_is_a_safe_name(text: str, want: str) -> None:
    assert slug(text) == want
    assert "/" not in slug(text) and slug(text) not in ("", ".", "..")


def test_slug_length() -> None:
    assert len(slug("a" * 500)) == 60 and len(slug("a" * 500, 40)) == 40


def test_one_line_has_no_control_characters() -> None:
    out = one_line("a\nb\x1b[31mred\x07")
    assert "\n" not in out and "\x1b" not in out and "\x07" not in out


@pytest.mark.parametrize("text, shown", [
    ("\x9b2J", "\\x9b2J"),  # C1 CSI: an escape sequence without ESC
    ("ab\u202edc", "ab\\u202edc"),  # a right-to-left override reorders what follows
    ("a\u200bb", "a\\u200bb"),  # zero-width space
    ("bad\udcff", "bad\\xff"),  # a byte that was not UTF-8 (surrogateescape)
    ("\x1b]2;pwned\x07\x1b[2K\r=> rule", "\\x1b]2;pwned\\x07\\x1b[2K\\r=> rule"),
    ("plain ünïcode × ∞ \\ 'q'", "plain ünïcode × ∞ \\ 'q'"),  # printable: as it is
])
def test_one_line_escapes_what_could_forge_or_hide_text(text: str, shown: str) -> None:
    assert one_line(text) == shown
    assert one_line(shown) == shown  # escaping twice changes nothing
    assert shown.isprintable()
    shown.encode("utf-8")  # never a surrogate left to fail at print time


def test_numbers_for_tables() -> None:
    """The formats every table shares (trace's and the report's)."""
    assert fmt_count(89418) == "89,418" and fmt_count(2.5) == "2.5"
    assert fmt_count(math.nan) == "\u2013"
    assert fmt_value(0.25, "s") == "250 ms" and fmt_value(2.5, "s") == "2.50 s"
    assert fmt_value(2048, "KiB") == "2 MiB" and fmt_value(3, "count") == "3"
    assert fmt_signed(-3, "count") == "\u22123" and fmt_signed(0, "count") == "0"
    assert fmt_signed(0.5, "s") == "+500 ms"
    assert fmt_spread([1, 2, 3], "count") == "2 [1\u20133]"
    assert fmt_spread([4, 4], "count") == "4" and fmt_spread([7], "count") == "7"
    assert fmt_spread([1.0, 2.0, 3.0, 4.0], "count") == "2.5 [1\u20134]"
    assert fmt_p(0.0123) == "0.012" and fmt_p(0.00012) == "1.2e-04"


def test_ratios() -> None:
    assert fmt_ratio(float("inf")) == "from 0" and fmt_ratio(None) == "\u2013"
    assert fmt_ratio(22354.5) == "22354\u00d7" and fmt_ratio(0) == "to 0"
    assert fmt_ratio(0.25) == "0.25\u00d7" and fmt_ratio(1 / 1210) == "1/1210\u00d7"
    assert fmt_ratio_ci(RatioCI(3.2, 2.9, 3.5, 0.95)) == "3.20\u00d7 [2.90\u20133.50]"
    assert fmt_ratio_ci(RatioCI(12.5, 12.3, math.inf, 0.95)) == "12.5\u00d7 [12.3\u2013\u221e]"
    assert fmt_ratio_ci(None) == "\u2013"


@pytest.mark.parametrize(("text", "seconds"), [
    ("90", 90.0), ("90s", 90.0), ("5m", 300.0), ("1h30m", 5400.0), ("2.5m", 150.0),
    (" 1h 5s ", 3605.0), (12, 12.0), ("7M", 420.0)])
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "0", "5m30", "1d", "-5", "8h" * 30, "169h"])
def test_parse_duration_refuses(text: str) -> None:
    with pytest.raises(UsageError, match="duration"):
        parse_duration(text)


def test_fmt_duration() -> None:
    assert [fmt_duration(s) for s in (45, 150, 5400, 3605)] == ["45s", "2m30s", "1h30m",
                                                                 "1h5s"]
