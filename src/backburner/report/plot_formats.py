"""The image formats plots are written in, checked before anything is drawn.

Apart from `plot` so the CLI can check ``--format`` without importing matplotlib, which
only what draws imports.
"""

from __future__ import annotations

from ..base.errors import UsageError

FORMATS = ("png", "svg", "pdf")


def check_formats(formats: tuple[str, ...] | list[str]) -> None:
    """UsageError for an unknown format, or for none at all."""
    bad = [f for f in formats if f not in FORMATS]
    if bad or not formats:
        raise UsageError(f"unknown plot format {', '.join(bad) or '(none)'}",
                         f"use one or more of {','.join(FORMATS)}")


def parse_formats(text: str) -> tuple[str, ...]:
    """`--format png,svg` as a tuple; UsageError (before anything is drawn) if unknown."""
    formats = tuple(f.strip().lower() for f in text.split(",") if f.strip())
    check_formats(formats)
    return formats
