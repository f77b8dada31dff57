"""Exports of a report, one module per format behind a small registry (as hyperfine's
`export/`): each format module registers a writer ``(data, out, tolerance, confidence)``."""

from __future__ import annotations

from typing import TextIO

from ...base.errors import UsageError
from ..data import ReportData
from .registry import EXPORTERS, FORMATS


def export_to(data: ReportData, fmt: str, out: TextIO, *, tolerance: float | None = None,
           confidence: float = 0.95) -> None:
    """Write `data` in format `fmt` (see `formats()`) to `out`."""
    from . import csv, hyperfine, json, markdown  # noqa: F401  - each registers itself

    try:
        writer = EXPORTERS[fmt]
    except KeyError:
        raise UsageError(f"unknown export format {fmt!r}",
                         f"use one of {', '.join(formats())}") from None
    writer(data, out, tolerance, confidence)


def formats() -> tuple[str, ...]:
    return FORMATS
