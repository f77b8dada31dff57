"""Exports of a report, one module per format behind a small registry (as hyperfine's
`export/`): each format registers a writer ``(data, out, tolerance, confidence)``."""

from __future__ import annotations

from collections.abc import Callable
from typing import TextIO

from ...errors import UsageError
from ..data import ReportData

Writer = Callable[[ReportData, TextIO, float, float], None]
EXPORTERS: dict[str, Writer] = {}


def exporter(name: str) -> Callable[[Writer], Writer]:
    def register(fn: Writer) -> Writer:
        EXPORTERS[name] = fn
        return fn

    return register


def export(data: ReportData, fmt: str, out: TextIO, *, tolerance: float = 0.10,
           confidence: float = 0.95) -> None:
    """Write `data` in format `fmt` (see `formats()`) to `out`."""
    try:
        writer = EXPORTERS[fmt]
    except KeyError:
        raise UsageError(f"unknown export format {fmt!r}",
                         f"use one of {', '.join(formats())}") from None
    writer(data, out, tolerance, confidence)


def formats() -> tuple[str, ...]:
    return tuple(EXPORTERS)


from . import csv, json, markdown  # noqa: E402, F401  - each registers itself
