"""Finding and reading rule files: the built-in defaults and a rules directory.

Rule files say what to do as root, so they are read only if nobody but root could have
written them (like sudoers): each file and its directory chain are checked with
`safepath` before a byte is read, and a file failing the check stops everything with a
one-line error naming it (exit status 78). A file in the rules directory replaces the
built-in file of the same name; `--no-defaults` leaves the built-in ones out.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from ..base.errors import NotFoundError
from ..files import safepath
from . import broad, rulefile, rules
from .procinfo import ProcInfo

RULES_DIR = "/etc/backburner/rules.d"
DEFAULTS = "defaults"  # package data: backburner/govern/defaults/*.toml


@dataclass(frozen=True)
class Source:
    """One rule file in force: where it is shown from and its text."""

    name: str  # the file name: what overrides what
    shown: str  # what errors and `check` call it: a path, or "(built-in) NAME"
    text: str


def builtin_sources() -> list[Source]:
    folder = resources.files(__package__).joinpath(DEFAULTS)
    out = []
    for item in sorted(folder.iterdir(), key=lambda t: t.name):
        if item.name.endswith(".toml"):
            out.append(Source(item.name, f"(built-in) {item.name}", item.read_text()))
    return out


def directory_sources(folder: str, *, required: bool) -> list[Source]:
    """The *.toml files of a rules directory, each checked to be root's alone before it is
    read. A missing default directory is fine (only the defaults apply); a missing --rules
    directory is an error."""
    path = Path(folder)
    if not path.is_dir():
        if required:
            raise NotFoundError(f"rules directory {folder} does not exist")
        return []
    safepath.check_chain(path, "rules directory")
    out = []
    for file in sorted(path.glob("*.toml")):
        safepath.check_file(file, "rule file")
        try:
            text = file.read_text()
        except UnicodeDecodeError:
            text = "\0"  # not text: reported by the parser with the file's name
        out.append(Source(file.name, str(file), text))
    return out


def sources(rules_dir: str | None, defaults: bool = True) -> list[Source]:
    """Rule files in force, in order of their names (a rules-dir file replaces the built-in
    one of the same name)."""
    mine = directory_sources(rules_dir or RULES_DIR, required=rules_dir is not None)
    by_name = {s.name: s for s in (builtin_sources() if defaults else [])}
    by_name.update({s.name: s for s in mine})
    return [by_name[name] for name in sorted(by_name)]


def parse(found: list[Source]) -> tuple[rules.Ruleset, list[rules.RuleError]]:
    """Every file parsed and combined; broad rules refused (checked against the real PID 1
    too, as far as it can be read)."""
    parsed = [rulefile.parse_file(s.text, s.shown) for s in found]
    ruleset, errors = rulefile.combine(parsed)
    pid1 = ProcInfo(1).freeze() if os.path.exists("/proc/1") else None
    return ruleset, errors + broad.broad_errors(ruleset, pid1)


def load(rules_dir: str | None, defaults: bool = True) -> rules.Ruleset:
    """The rules to govern with; RulesError (65) if any file has an error."""
    ruleset, errors = parse(sources(rules_dir, defaults))
    if errors:
        raise rules.RulesError(errors)
    return ruleset
