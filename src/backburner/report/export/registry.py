"""The registry of export formats: each format module registers its writer here."""

from __future__ import annotations

from collections.abc import Callable
from typing import TextIO

from ..data import ReportData
from ..names import EXPORT_FORMATS as FORMATS

Writer = Callable[[ReportData, TextIO, float, float], None]
EXPORTERS: dict[str, Writer] = {}


def exporter(name: str) -> Callable[[Writer], Writer]:
    assert name in FORMATS, name

    def register(fn: Writer) -> Writer:
        EXPORTERS[name] = fn
        return fn

    return register
