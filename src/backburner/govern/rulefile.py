"""Rule files of `govern`: TOML text in, rules (or every error, each with its file and
line) out. PURE: the text is given; `rulesources` finds the files.

The format is fixed (rule files written today keep working; it may only grow):

    [[rule]]
    name = "indexers"
    match = { comm = ["updatedb", "plocate"] }
    policy = "background"        # or io / cpu / io_weight / cpu_weight / group_io, as `run`
    throttle = true              # pause it in short slices while interactive work stalls
    flush_behind = true          # write its closed files back at once, at the idle class
    broad = true                 # allow a match of PID 1, every process or a shell
    net = "background"           # its downloads and uploads yield to other traffic

Extensions (all optional): a top-level ``[throttle]`` table with the pressure settings
(`ThrottleSettings`), and a ``[net]`` table with the interface of rules with `net`
(`NetSettings`), each in at most one file.
"""

from __future__ import annotations

import re
import reprlib
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import regex

from ..base.errors import BackburnerError
from ..kernel import priorities
from ..net import link
from ..policy import grammar
from . import pattern
from .rules import MATCH_KEYS, Match, NetSettings, Rule, RuleError, Ruleset, ThrottleSettings

POLICY_KEYS = ("policy", "io", "cpu", "io_weight", "cpu_weight", "group_io")
RULE_KEYS = ("name", "match", *POLICY_KEYS, "throttle", "flush_behind", "broad", "net")
NET_MODES = ("background",)  # as `run --net`
NET_KEYS = ("dev", "netns", "uplink")
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
#: Arrays and inline tables deeper than this are refused before the TOML parser, which
#: recurses once per level (a file nested 5,000 deep would end in a RecursionError). A
#: rule needs 2 (match, then a list in it).
MAX_NESTING = 32
#: What can hide a bracket (strings, comments), and the brackets and newlines themselves;
#: every alternative matches at least one character and ends at the end of the text.
_TOKENS = re.compile(r'"""(?:[^\\]|\\.)*?(?:"""|\Z)|\'\'\'.*?(?:\'\'\'|\Z)'
                     r'|"(?:[^"\\\n]|\\.)*(?:"|$)|\'[^\'\n]*(?:\'|$)|#[^\n]*|[\[\]{}\n]',
                     re.S | re.M)
_SHOWN = reprlib.Repr()
_SHOWN.maxlevel, _SHOWN.maxstring, _SHOWN.maxother = 2, 60, 60
LIMITS = {"stall_ms": (1, 10_000), "window_ms": (500, 10_000), "pause_ms": (10, 10_000)}


class _Lines:
    """Where things are in a rule file: tomllib gives values, not positions, so the line of
    a rule and of a key inside it is found in the text (the rule's header if not found)."""

    _HEADER = re.compile(r"^\s*\[\[\s*rule\s*\]\]")
    _TABLE = re.compile(r"^\s*\[")

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()
        self.headers = [i + 1 for i, ln in enumerate(self.lines) if self._HEADER.match(ln)]

    def rule(self, index: int) -> int:
        return self.headers[index] if index < len(self.headers) else self.key(0, len(
            self.lines), "rule") or 1

    def _block(self, index: int) -> tuple[int, int]:
        start = self.rule(index)
        end = len(self.lines) + 1
        for i in range(start, len(self.lines)):
            text = self.lines[i]
            if self._HEADER.match(text) or (self._TABLE.match(text)
                                            and not re.match(r"^\s*\[\s*rule\.", text)):
                end = i + 1
                break
        return start, end

    def key(self, start: int, end: int, key: str) -> int | None:
        pattern = re.compile(rf"(^|[\s{{,.]){re.escape(key)}\s*=")
        for n in range(max(start, 1), min(end, len(self.lines) + 1)):
            if pattern.search(self.lines[n - 1].split("#", 1)[0]):
                return n
        return None

    def in_rule(self, index: int, key: str) -> int:
        start, end = self._block(index)
        return self.key(start, end, key) or start

    def table(self, name: str) -> int:
        rx = re.compile(rf"^\s*\[\s*{re.escape(name)}\s*\]")
        return next((i + 1 for i, ln in enumerate(self.lines) if rx.match(ln)), 1)


@dataclass
class ParsedFile:
    """One rule file's rules, its [throttle] table if any, and its errors."""

    file: str
    rules: list[Rule] = field(default_factory=list)
    throttle: ThrottleSettings | None = None
    net: NetSettings | None = None
    errors: list[RuleError] = field(default_factory=list)


def parse_file(text: str, file: str) -> ParsedFile:
    """Parse and validate one rule file. Never raises for bad content: errors are collected
    (so `check` can list every one), each with the file and the line."""
    out = ParsedFile(file)
    deep = _too_deep(text)
    if deep is not None:
        out.errors.append(RuleError(file, deep, f"arrays or tables nested more than "
                                    f"{MAX_NESTING} deep (a rule needs 2)"))
        return out
    try:
        data = tomllib.loads(text)
    except RecursionError:  # not reached: _too_deep refuses such nesting first
        out.errors.append(RuleError(file, 1, "arrays or tables nested too deep to read"))
        return out
    except tomllib.TOMLDecodeError as err:
        m = re.search(r"\(at line (\d+), column \d+\)", str(err))
        line = int(m.group(1)) if m else 1
        msg = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(err))
        out.errors.append(RuleError(file, line, f"not valid TOML: {msg}"))
        return out
    lines = _Lines(text)
    for key in data:
        if key not in ("rule", "throttle", "net"):
            out.errors.append(RuleError(file, lines.key(1, len(lines.lines) + 1, key)
                                        or lines.table(key),
                                        f"unknown top-level key {key!r} (expected [[rule]] "
                                        "tables and optional [throttle] and [net] tables)"))
    rules = data.get("rule", [])
    if not isinstance(rules, list) or not all(isinstance(r, dict) for r in rules):
        out.errors.append(RuleError(file, lines.rule(0), "`rule` must be [[rule]] tables"))
        rules = []
    for index, table in enumerate(rules):
        rule = _parse_rule(table, index, lines, out)
        if rule is not None:
            out.rules.append(rule)
    if "throttle" in data:
        out.throttle = _parse_throttle(data["throttle"], lines, out)
    if "net" in data:
        out.net = _parse_net(data["net"], lines, out)
    return out


def _too_deep(text: str) -> int | None:
    """The line where arrays and inline tables first nest deeper than `MAX_NESTING`, or
    None. Linear: one pass over the text's brackets, strings and comments."""
    if text.count("[") + text.count("{") <= MAX_NESTING:
        return None
    depth, line = 0, 1
    for found in _TOKENS.finditer(text):
        token = found.group()
        if token == "\n":
            line += 1
        elif token in ("[", "{"):
            depth += 1
            if depth > MAX_NESTING:
                return line
        elif token in ("]", "}"):
            depth = max(0, depth - 1)
        else:
            line += token.count("\n")  # a multi-line string
    return None


def _shown(value: Any) -> str:
    """A value from the file as an error message shows it: short, and shallow however deep
    or long the value is."""
    return _SHOWN.repr(value)


def _parse_rule(table: dict[str, Any], index: int, lines: _Lines, out: ParsedFile
                ) -> Rule | None:
    errors_before = len(out.errors)

    def error(key: str | None, message: str) -> None:
        line = lines.in_rule(index, key) if key else lines.rule(index)
        out.errors.append(RuleError(out.file, line, message))

    name = table.get("name")
    label = f"rule {_shown(name)}" if isinstance(name, str) else f"rule #{index + 1}"
    for key in table:
        if key not in RULE_KEYS:
            error(key, f"{label}: unknown key {key!r} (known: {', '.join(RULE_KEYS)})")
    if name is None:
        error(None, f"{label}: missing `name`")
    elif not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        error("name", f"{label}: name must be letters, digits, '.', '_' or '-' (at most 64, "
              "starting with a letter or digit): it names the rule's cgroup")
    match = _parse_match(table.get("match"), label, error)
    policy = _parse_policy(table, label, error)
    flags = {}
    for key in ("throttle", "flush_behind", "broad"):
        value = table.get(key, False)
        if not isinstance(value, bool):
            error(key, f"{label}: {key} must be true or false, not {_shown(value)}")
            value = False
        flags[key] = value
    net = table.get("net")
    if net is not None and net not in NET_MODES:
        error("net", f"{label}: net must be one of {', '.join(map(repr, NET_MODES))}, "
              f"not {_shown(net)}")
    if (policy is not None and not _sets_anything(policy) and not flags["throttle"]
            and net is None):
        error("policy" if "policy" in table else None,
              f"{label} sets nothing: give policy = \"background\" (or io, cpu, io_weight, "
              "cpu_weight), throttle = true or net = \"background\"")
    if flags["flush_behind"] and policy is not None and policy.io != priorities.IOPrio("idle"):
        error("flush_behind", f"{label}: flush_behind writes the files back at the idle "
              "class, and the rule's IO class is not idle: give io = \"idle\" (or policy = "
              "\"background\")")
    if len(out.errors) > errors_before or match is None or policy is None:
        return None
    return Rule(str(name), match, policy, flags["throttle"], flags["broad"], out.file,
                lines.rule(index), net=net, flush_behind=flags["flush_behind"])


def _sets_anything(policy: grammar.Policy) -> bool:
    return any(v is not None for v in (policy.io, policy.cpu, policy.io_weight,
                                       policy.cpu_weight, policy.group_io))


def _strings(value: Any, key: str, label: str, error: Any) -> tuple[str, ...] | None:
    if isinstance(value, str | int) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, list) or not value or not all(
            isinstance(v, str) and v or (key == "user" and isinstance(v, int)
                                         and not isinstance(v, bool) and v >= 0)
            for v in value):
        error(key, f"{label}: match.{key} must be a non-empty string or list of non-empty "
              "strings" + (" or user ids" if key == "user" else ""))
        return None
    return tuple(str(v) for v in value)


def _parse_match(value: Any, label: str, error: Any) -> Match | None:
    if value is None:
        error(None, f"{label}: missing `match` (e.g. match = {{ comm = \"updatedb\" }})")
        return None
    if not isinstance(value, dict):
        error("match", f"{label}: match must be a table, e.g. match = {{ comm = \"rsync\" }}")
        return None
    ok = True
    fields: dict[str, tuple[Any, ...]] = {}
    for key, raw in value.items():
        if key not in MATCH_KEYS:
            error(key, f"{label}: unknown match key {key!r} (known: "
                  "exe, comm, cmdline, parent, unit, cgroup, user)")
            ok = False
            continue
        values = _strings(raw, key, label, error)
        if values is None:
            ok = False
            continue
        if key == "cmdline":
            compiled = []
            for text in values:
                try:
                    found = pattern.Pattern(text)
                except (re.error, regex.error) as err:
                    error(key, f"{label}: match.cmdline {_shown(text)} is not a valid regular "
                          f"expression: {err}")
                    ok = False
                    continue
                why = _pathological(found)
                if why is not None:
                    error(key, f"{label}: match.cmdline {_shown(text)} is pathological: {why} "
                          "(nested or overlapping repetition, such as (a+)+ or (a|aa)+, "
                          "backtracks without bound)")
                    ok = False
                compiled.append(found)
            fields[key] = tuple(compiled)
        else:
            fields[key] = values
    if ok and not fields:
        error("match", f"{label}: match is empty, which would match every process")
        return None
    return Match(**fields) if ok else None


_VERDICTS: dict[str, str | None] = {}


def _pathological(found: pattern.Pattern) -> str | None:
    """`pattern.pathological`, once per pattern text (a reload of the same files, a
    pattern repeated in many rules)."""
    if found.pattern not in _VERDICTS:
        if len(_VERDICTS) >= 4096:
            _VERDICTS.clear()
        _VERDICTS[found.pattern] = pattern.pathological(found)
    return _VERDICTS[found.pattern]


def _parse_policy(table: dict[str, Any], label: str, error: Any) -> grammar.Policy | None:
    """A named policy of `run` (or its io=…,cpu=… spec), then the rule's own keys on top;
    only lowering is allowed: a rule cannot grant the realtime IO class or a negative nice."""
    try:
        base = table.get("policy", "default")
        if not isinstance(base, str):
            error("policy", f"{label}: policy must be a string such as \"background\"")
            return None
        try:
            policy = grammar.parse_policy(base)
        except BackburnerError as err:
            error("policy", f"{label}: {err.message}")
            return None
        kw: dict[str, Any] = {}
        for key, parse in (("io", priorities.IOPrio.parse), ("cpu", priorities.CPUPolicy.parse),
                           ("group_io", grammar.parse_group_io)):
            if key in table:
                if not isinstance(table[key], str):
                    error(key, f"{label}: {key} must be a string such as \"idle\"")
                    return None
                kw[key] = parse(table[key])
        for key, top in (("io_weight", 1000), ("cpu_weight", 10000)):
            if key in table:
                value = table[key]
                if isinstance(value, bool) or not isinstance(value, int):
                    error(key, f"{label}: {key} must be a whole number 1..{top}")
                    return None
                kw[key] = grammar.parse_weight(value, key.replace("_", " "), top)
    except BackburnerError as err:
        key = next((k for k in POLICY_KEYS[1:] if k in table), None)
        error(key, f"{label}: {err.message}")
        return None
    policy = policy.with_overrides(**kw)
    if only := [k for k in policy.group_controls if k in ("io-latency", "io-cost")]:
        verb = "applies" if len(only) == 1 else "apply"
        error("policy", f"{label}: {' and '.join(only)} {verb} only in bench (the probe's "
              "group, the device under test), not to governed work")
        return None
    if policy.io is not None and policy.io.klass == "rt":
        error("io", f"{label}: a rule may only lower priorities, not grant the realtime IO "
              "class")
        return None
    if policy.cpu is not None and policy.cpu.nice is not None and policy.cpu.nice < 0:
        error("cpu", f"{label}: a rule may only lower priorities, not set a negative nice")
        return None
    return policy


def _table_line(value: Any, name: str, lines: _Lines, out: ParsedFile) -> int | None:
    """The line of the top-level table `name`; None (and an error) when it is not one."""
    line = lines.table(name)
    if not isinstance(value, dict):
        out.errors.append(RuleError(out.file, line, f"{name} must be a [{name}] table"))
        return None
    return line


def _parse_throttle(value: Any, lines: _Lines, out: ParsedFile) -> ThrottleSettings | None:
    line = _table_line(value, "throttle", lines, out)
    if line is None:
        return None
    errors_before = len(out.errors)

    def error(key: str, message: str) -> None:
        out.errors.append(RuleError(out.file, lines.key(line, len(lines.lines) + 1, key)
                                    or line, f"[throttle] {message}"))

    kw: dict[str, Any] = {}
    for key, raw in value.items():
        if key in LIMITS:
            low, high = LIMITS[key]
            if isinstance(raw, bool) or not isinstance(raw, int) or not low <= raw <= high:
                error(key, f"{key} must be a whole number {low}..{high}")
                continue
            kw[key] = raw
        elif key == "min_duty":
            if isinstance(raw, bool) or not isinstance(raw, int | float) \
                    or not 0.05 <= raw <= 0.95:
                error(key, "min_duty must be a fraction 0.05..0.95 (the share of time the "
                      "bulk work keeps running while throttled)")
                continue
            kw[key] = float(raw)
        elif key == "watch":
            watch = _strings(raw, "watch", "", lambda _k, _m: None)
            if watch is None:
                error(key, "watch must be a list of cgroup v2 groups, e.g. [\"user.slice\"]")
                continue
            kw[key] = watch
        else:
            error(key, f"unknown key {key!r} (known: stall_ms, window_ms, pause_ms, "
                  "min_duty, watch)")
    settings = ThrottleSettings(**kw, file=out.file)
    if settings.stall_ms >= settings.window_ms:
        error("stall_ms", "stall_ms must be below window_ms")
    return settings if len(out.errors) == errors_before else None


def _parse_net(value: Any, lines: _Lines, out: ParsedFile) -> NetSettings | None:
    line = _table_line(value, "net", lines, out)
    if line is None:
        return None
    errors_before = len(out.errors)
    for key, raw in value.items():
        at = lines.key(line, len(lines.lines) + 1, key) or line
        if key not in NET_KEYS:
            message = f"unknown key {key!r} (known: {', '.join(NET_KEYS)})"
        elif not isinstance(raw, str) or not raw:
            example = '"1mbit"' if key == "uplink" else '"eth0"'
            message = f"{key} must be a non-empty string, e.g. {example}"
        elif key == "uplink":
            try:
                link.parse_rate(raw)
                continue
            except BackburnerError as err:
                message = str(err)
        else:
            continue
        out.errors.append(RuleError(out.file, at, f"[net] {message}"))
    if len(out.errors) > errors_before:
        return None
    return NetSettings(**{k: value.get(k) for k in NET_KEYS}, file=out.file)


def combine(parsed: Sequence[ParsedFile]) -> tuple[Ruleset, list[RuleError]]:
    """Rules of several files (already in order) as one set; duplicate names and a second
    [throttle] table are errors naming both places."""
    errors = [e for p in parsed for e in p.errors]
    seen: dict[str, Rule] = {}
    rules: list[Rule] = []
    throttle: ThrottleSettings | None = None
    net: NetSettings | None = None
    for p in parsed:
        for rule in p.rules:
            if rule.name in seen:
                first = seen[rule.name]
                errors.append(RuleError(rule.file, rule.line, f"rule name {rule.name!r} is "
                                        f"already used at {first.where}"))
                continue
            seen[rule.name] = rule
            rules.append(rule)
        throttle = _only_one("throttle", throttle, p.throttle, p.file, errors)
        net = _only_one("net", net, p.net, p.file, errors)
    return Ruleset(tuple(rules), throttle or ThrottleSettings(),
                   tuple(p.file for p in parsed), net or NetSettings()), errors


_Table = TypeVar("_Table", ThrottleSettings, NetSettings)


def _only_one(name: str, kept: _Table | None, new: _Table | None, file: str,
              errors: list[RuleError]) -> _Table | None:
    """A top-level table of at most one file: the first kept, a second an error."""
    if new is not None and kept is not None:
        errors.append(RuleError(file, 1, f"a second [{name}] table (the first is in "
                                f"{kept.file})"))
        return kept
    return kept if new is None else new
