"""units: the one place names and numbers are made safe and formatted."""

from __future__ import annotations

import pytest

from backburner.units import one_line, slug


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
