"""Study files: a whole bench matrix in one TOML file, so a lab runs the same study on every
machine (`bench --study office.toml`).

Every command-line option of `bench` has a key of the same name (``probe``, ``load``,
``policy``, ``scheduler``, ``device``, ``trials``, ``settle``, ``timeout``, ...); options
that may be repeated take a list. An unknown key or a value of the wrong type is a
`UsageError` (64) naming the key. Options given on the command line override the file's.
The file's text is stored with the run.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from typing import Any

from ..base.errors import UsageError
from ..base.quantities import parse_duration
from ..files import infile

#: key -> (config field, type): "list" takes a string or a list of strings
KEYS: dict[str, tuple[str, str]] = {
    "preset": ("preset", "str"), "probe": ("probes", "list"), "ready-line": ("ready_line", "str"),
    "ready-file": ("ready_file", "str"), "ready": ("ready_window", "str"),
    "load": ("loads", "list"),
    "policy": ("policies", "list"), "scheduler": ("schedulers", "list"),
    "device": ("device", "str"), "trials": ("trials", "int"), "warmup": ("warmup", "int"),
    "cold": ("cold", "bool"), "seed": ("seed", "int"), "settle": ("settle_s", "float"),
    "timeout": ("timeout_s", "float"), "abort-factor": ("abort_factor", "float"),
    "rotational": ("rotational", "int"), "prepare": ("prepare_commands", "list"),
    "setup-variant": ("prepares", "list"), "setup-variant-during": ("prepares", "list"),
    "setup-variant-tune": ("prepares", "list"),
    "prepare-during": ("prepares", "list"), "shell": ("shell", "str"),
    "load-lifetime": ("load_lifetime", "str"),
    "block": ("block", "int"), "probe-layout": ("probe_layout", "str"),
    "probe-root": ("probe_root", "str"), "trace": ("trace", "bool"),
    "ignore-failure": ("ignore_failure", "bool"),
    "min-runs": ("min_runs", "int"), "max-runs": ("max_runs", "int"),
    "max-time": ("max_time_s", "duration"), "tolerance": ("tolerance", "float"),
    "net-link": ("net_link", "str"),
}


#: keys kept for the study files that use them, each with what replaces it
DEPRECATED = {"prepare-during": "setup-variant-during"}
#: the matrix dimension's keys: "before" steps and "during" steps
VARIANTS = {"setup-variant": "before", "setup-variant-during": "during",
            "setup-variant-tune": "tune", "prepare-during": "during"}


@dataclass(frozen=True)
class Study:
    path: str
    text: str
    options: dict[str, Any]  # config field -> value
    preset: str | None
    notes: tuple[str, ...] = ()  # one line each: a deprecated key and what replaces it


#: Far beyond any real study file (a few hundred lines of TOML): a bigger file is not one.
MAX_STUDY_BYTES = 1 << 20


def load(path: str) -> Study:
    """The study file at `path`, read through `infile`: a FIFO, a device or a huge file
    named as one is refused in one line, not read until memory runs out."""
    text = infile.read_text(path, "study file", MAX_STUDY_BYTES)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise UsageError(f"study file {path} does not parse: {err}") from None
    return Study(path, text, *parse(data, path))


def parse(data: dict[str, Any], path: str = "study"
          ) -> tuple[dict[str, Any], str | None, tuple[str, ...]]:
    """TOML data -> (config fields, preset, deprecation notes). Pure."""
    options: dict[str, Any] = {}
    preset = None
    notes = tuple(f"{path}: key {key!r} is deprecated; use {new!r}"
                  for key, new in DEPRECATED.items() if key in data)
    for key, value in data.items():
        if key not in KEYS:
            raise UsageError(f"{path}: unknown key {key!r}",
                             "keys are the options of `backburner bench`: "
                             + ", ".join(sorted(KEYS)))
        field, kind = KEYS[key]
        value = _typed(path, key, value, kind)
        if key in VARIANTS:
            value = options.get("prepares", []) + [f"{VARIANTS[key]}:{v}" for v in value]
        if field == "preset":
            preset = value
        else:
            options[field] = value
    return options, preset, notes


def _typed(path: str, key: str, value: Any, kind: str) -> Any:
    def wrong(want: str) -> UsageError:
        return UsageError(f"{path}: key {key!r} must be {want}, not {type(value).__name__}")

    if kind == "list":
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not all(isinstance(v, str) for v in items):
            raise wrong("a string or a list of strings")
        return list(items)
    if kind == "bool":
        if not isinstance(value, bool):
            raise wrong("true or false")
        return value
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise wrong("a whole number")
        return value
    if kind == "duration":  # seconds, or a string such as "5m"
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise wrong("a number of seconds or a duration such as \"5m\"")
        return parse_duration(value, what=f"{path}: key {key!r}")
    if kind == "float":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise wrong("a number")
        return float(value)
    if not isinstance(value, str):
        raise wrong("a string")
    return value
