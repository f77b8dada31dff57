"""Every value read from a result database, checked once where it is loaded.

A database may have been edited by hand, damaged, or written by something else; whatever it
holds, what leaves the store is well-typed and plausible, or one `DataError` (65) names the
row and the field — never a traceback further down, and never a negative time reported as
a median.
"""

from __future__ import annotations

import json
import math
from typing import Any

from ..base.errors import DataError
from .cell import Cell
from .records import Run, StoredCell

STATUSES = ("ok", "failed", "timeout", "aborted")
#: Wall-clock timestamps outside this range are damage (0 = 1970, 2**33 s = year 2242).
EPOCH_RANGE = (0.0, float(2**33))
#: No trial lasts 30 years: a duration beyond this is damage, not a measurement.
MAX_SECONDS = 1e9
NON_NEGATIVE = ("wall_s", "user_s", "sys_s", "max_rss_kb", "in_blocks", "out_blocks",
                "load_read_bps", "load_write_bps")
DURATIONS = ("wall_s", "user_s", "sys_s")
NUMBERS = ("wall_s", "user_s", "sys_s", "max_rss_kb", "in_blocks", "out_blocks", "exit_code",
           "signal", "load_read_bps", "load_write_bps")


class Checker:
    """Validation bound to one database (its name goes into every message)."""

    def __init__(self, target: str) -> None:
        self.target = target

    def bad(self, where: str, name: str, value: Any, want: str) -> DataError:
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
        return DataError(f"{self.target}: {where}: {name} is {shown}, not {want}",
                         "the database is damaged or was edited by hand")

    def json_object(self, where: str, name: str, text: Any) -> dict[str, Any]:
        try:
            value = json.loads(text) if isinstance(text, str) else None
        except ValueError:
            value = None
        if not isinstance(value, dict):
            raise self.bad(where, name, text, "a JSON object")
        return value

    def time(self, where: str, name: str, value: Any, optional: bool = False) -> float | None:
        if value is None and optional:
            return None
        v = finite(value)
        if v is None or not EPOCH_RANGE[0] <= v <= EPOCH_RANGE[1]:
            raise self.bad(where, name, value, "a time")
        return v

    def text(self, where: str, name: str, value: Any) -> str:
        if not isinstance(value, str):
            raise self.bad(where, name, value, "text")
        return value

    def run(self, r: dict[str, Any]) -> Run:
        where = f"run {r['id']}"
        seed = whole(r["seed"])
        if seed is None:
            raise self.bad(where, "seed", r["seed"], "a whole number")
        return Run(
            id=int(r["id"]), uuid=self.text(where, "uuid", r.get("uuid") or f"local-{r['id']}"),
            machine_id=self.text(where, "machine_id", r.get("machine_id") or ""),
            hostname=self.text(where, "hostname", r.get("hostname") or ""),
            started_at=self.time(where, "started_at", r["started_at"]),  # type: ignore[arg-type]
            finished_at=self.time(where, "finished_at", r["finished_at"], optional=True),
            command=self.text(where, "command", r["command"]),
            config=self.json_object(where, "config", r["config"]), seed=seed,
            environment=self.json_object(where, "environment", r["environment"]),
            tool_version=self.text(where, "tool_version", r["tool_version"]))

    def cell(self, r: dict[str, Any]) -> StoredCell:
        where = f"cell {r['id']}"
        fields = [self.text(where, n, r[n]) for n in ("probe", "device", "scheduler", "load",
                                                      "policy")]
        prepare = self.text(where, "prepare", r.get("prepare") or "none")
        self.text(where, "key", r["key"])
        return StoredCell(int(r["id"]), int(r["run_id"]), Cell(*fields, prepare=prepare))

    def trial(self, t: dict[str, Any]) -> dict[str, Any]:
        where = f"trial {t['id']}"
        if t["status"] not in STATUSES:
            raise self.bad(where, "status", t["status"], "one of " + ", ".join(STATUSES))
        if isinstance(t["round"], bool) or not isinstance(t["round"], int) or t["round"] < 0:
            raise self.bad(where, "round", t["round"], "a whole number of 0 or more")
        for name in ("warmup", "cold"):
            if isinstance(t[name], bool) or t[name] not in (0, 1):
                raise self.bad(where, name, t[name], "0 or 1")
        for name in ("started_at", "ended_at"):
            self.time(where, name, t[name])
        for name in NUMBERS:
            if t[name] is None:
                continue
            v = finite(t[name])
            if v is None or (name in NON_NEGATIVE and v < 0) or (
                    name in DURATIONS and v > MAX_SECONDS):
                want = "a finite number of 0 or more" if name in NON_NEGATIVE else "a number"
                raise self.bad(where, name, t[name],
                               f"{want} (at most {MAX_SECONDS:g} s)" if name in DURATIONS
                               else want)
        t["extra"] = self.json_object(where, "extra", t["extra"])
        return t


def finite(value: Any) -> float | None:
    """A finite float, or None when `value` is not a finite real number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def whole(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return None
