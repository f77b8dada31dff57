"""The registry of export formats: each format module registers its writer here."""

from __future__ import annotations

from collections.abc import Callable
from typing import TextIO

from ..data import ReportData

Writer = Callable[[ReportData, TextIO, float, float], None]
#: The formats, in the order `--help` lists them; each module registers one of these.
FORMATS = ("csv", "json", "markdown", "hyperfine-json")
EXPORTERS: dict[str, Writer] = {}


def exporter(name: str) -> Callable[[Writer], Writer]:
    assert name in FORMATS, name

    def register(fn: Writer) -> Writer:
        EXPORTERS[name] = fn
        return fn

    return register
