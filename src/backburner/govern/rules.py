"""Rules of `govern`: which running programs are bulk work and what to set on them.

PURE: TOML text in, rules (or every error, each with its file and line) out; a process's
facts in, a match and the reasons for it out. Nothing here reads /proc or the filesystem:
the facts come from an object with the attributes of `Facts` (the daemon's are read lazily
from /proc by `procinfo`, the tests' are plain values), so matching is tested exactly.

The format is fixed by issue 10 (rule files written today keep working; it may only grow):

    [[rule]]
    name = "indexers"
    match = { comm = ["updatedb", "plocate"] }
    policy = "background"        # or io / cpu / io_weight / cpu_weight, as `run` takes them
    throttle = true              # pause it in short slices while interactive work stalls
    broad = true                 # allow a match of PID 1, every process or a shell

Extensions (all optional): a top-level ``[throttle]`` table with the pressure settings
(`ThrottleSettings`), in at most one file.
"""

from __future__ import annotations

import fnmatch
import re
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from .. import priority
from ..errors import BackburnerError

MATCH_KEYS = ("comm", "exe", "user", "unit", "cgroup", "cmdline", "parent")  # cheapest first
POLICY_KEYS = ("policy", "io", "cpu", "io_weight", "cpu_weight")
RULE_KEYS = ("name", "match", *POLICY_KEYS, "throttle", "broad")
#: The kernel keeps 15 characters of a program's name (TASK_COMM_LEN 16 with the NUL).
COMM_LEN = 15
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_GLOB_CHARS = set("*?[")


class Facts(Protocol):
    """What a rule can ask about a process. Missing facts are '' / [] / -1 (a kernel
    thread has no exe; a process that is gone has nothing), and then nothing matches them."""

    pid: int
    comm: str
    exe: str
    cmdline: list[str]
    ancestors: list[tuple[str, str]]  # (comm, exe) of the parent, its parent, ... PID 1
    unit: str
    cgroup: str
    user: str
    uid: int


@dataclass
class StaticFacts:
    """Facts as plain values: the broad-rule probes and the tests."""

    pid: int = 4242
    comm: str = ""
    exe: str = ""
    cmdline: list[str] = field(default_factory=list)
    ancestors: list[tuple[str, str]] = field(default_factory=list)
    unit: str = ""
    cgroup: str = ""
    user: str = ""
    uid: int = -1


@dataclass(frozen=True)
class RuleError:
    """One problem in a rule file: where it is and what is wrong."""

    file: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.message}"


class RulesError(BackburnerError):
    """Rule files that do not validate: the first error names file and line; `errors` has
    them all (`govern check` lists every one)."""

    exit_status = 65  # EX_DATAERR, like any other bad data

    def __init__(self, errors: Sequence[RuleError]) -> None:
        self.errors = list(errors)
        more = len(self.errors) - 1
        hint = (f"and {more} more error{'s' if more > 1 else ''}; `backburner govern check` "
                "lists them all") if more else "`backburner govern check` validates rule files"
        super().__init__(str(self.errors[0]), hint)


# --- matchers ---------------------------------------------------------------------------------


def _is_glob(text: str) -> bool:
    return bool(_GLOB_CHARS & set(text))


def comm_matches(pattern: str, comm: str) -> bool:
    """Exact, or a glob; a name longer than the kernel keeps also matches its first 15
    characters ("unattended-upgrades" runs as "unattended-upgr")."""
    if not comm:
        return False
    if _is_glob(pattern):
        return fnmatch.fnmatchcase(comm, pattern)
    return comm == pattern or (len(pattern) > COMM_LEN and comm == pattern[:COMM_LEN])


def exe_matches(pattern: str, exe: str) -> bool:
    return bool(exe) and fnmatch.fnmatchcase(exe, pattern)


@dataclass(frozen=True)
class Match:
    """The `match` table: every key given must hold; a key holds if any of its values does."""

    comm: tuple[str, ...] = ()
    exe: tuple[str, ...] = ()
    cmdline: tuple[re.Pattern[str], ...] = ()
    parent: tuple[str, ...] = ()
    unit: tuple[str, ...] = ()
    cgroup: tuple[str, ...] = ()
    user: tuple[str, ...] = ()

    def given(self) -> list[str]:
        return [k for k in MATCH_KEYS if getattr(self, k)]

    def key_holds(self, key: str, facts: Facts) -> bool:
        values = getattr(self, key)
        if key == "comm":
            comm = facts.comm
            return any(comm_matches(v, comm) for v in values)
        if key == "exe":
            exe = facts.exe
            return any(exe_matches(v, exe) for v in values)
        if key == "cmdline":
            line = " ".join(facts.cmdline)
            return bool(line) and any(rx.search(line) for rx in values)
        if key == "parent":
            return any(_ancestor_matches(v, facts.ancestors) for v in values)
        if key in ("unit", "cgroup"):
            have = getattr(facts, key)
            return bool(have) and any(fnmatch.fnmatchcase(have, v) for v in values)
        if key == "user":
            return any(v in (facts.user, str(facts.uid)) for v in values if facts.uid >= 0)
        raise KeyError(key)

    def holds(self, facts: Facts) -> bool:
        return all(self.key_holds(k, facts) for k in self.given())

    def describe(self) -> str:
        parts = []
        for key in self.given():
            vals = [rx.pattern if isinstance(rx, re.Pattern) else rx for rx in getattr(self, key)]
            parts.append(f"{key} {vals[0]!r}" if len(vals) == 1 else f"{key} {vals}")
        return ", ".join(parts)


def _ancestor_matches(value: str, ancestors: Iterable[tuple[str, str]]) -> bool:
    if "/" in value:
        return any(exe_matches(value, exe) for _comm, exe in ancestors)
    return any(comm_matches(value, comm) for comm, _exe in ancestors)


@dataclass(frozen=True)
class Rule:
    name: str
    match: Match
    policy: priority.Policy
    throttle: bool = False
    broad: bool = False
    file: str = ""
    line: int = 0

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    def sets(self) -> str:
        """What the rule sets, as `status` and `check` show it."""
        parts = [f"{k} {v}" for k, v in self.policy.settings().items()
                 if v not in ("-", "inherit")]
        if self.throttle:
            parts.append("throttled under IO pressure")
        return ", ".join(parts) or "nothing"

    def holds(self, facts: Facts) -> bool:
        return self.match.holds(facts)


@dataclass(frozen=True)
class ThrottleSettings:
    """When interactive work counts as stalled (a PSI trigger: `stall_ms` of stall within
    `window_ms`), how long one pause of the bulk group may last, and the share of time the
    bulk work keeps running while throttled (guaranteed)."""

    stall_ms: int = 100
    window_ms: int = 1000
    pause_ms: int = 500
    min_duty: float = 0.5
    watch: tuple[str, ...] = ()  # cgroup v2 groups whose io.pressure counts (default: see docs)
    file: str = ""


LIMITS = {"stall_ms": (1, 10_000), "window_ms": (500, 10_000), "pause_ms": (10, 10_000)}


# --- parsing ------------------------------------------------------------------------------------


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
    errors: list[RuleError] = field(default_factory=list)


def parse_file(text: str, file: str) -> ParsedFile:
    """Parse and validate one rule file. Never raises for bad content: errors are collected
    (so `check` can list every one), each with the file and the line."""
    out = ParsedFile(file)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        m = re.search(r"\(at line (\d+), column \d+\)", str(err))
        line = int(m.group(1)) if m else 1
        msg = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(err))
        out.errors.append(RuleError(file, line, f"not valid TOML: {msg}"))
        return out
    lines = _Lines(text)
    for key in data:
        if key not in ("rule", "throttle"):
            out.errors.append(RuleError(file, lines.key(1, len(lines.lines) + 1, key)
                                        or lines.table(key),
                                        f"unknown top-level key {key!r} (expected [[rule]] "
                                        "tables and an optional [throttle] table)"))
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
    return out


def _parse_rule(table: dict[str, Any], index: int, lines: _Lines, out: ParsedFile
                ) -> Rule | None:
    errors_before = len(out.errors)

    def error(key: str | None, message: str) -> None:
        line = lines.in_rule(index, key) if key else lines.rule(index)
        out.errors.append(RuleError(out.file, line, message))

    name = table.get("name")
    label = f"rule {name!r}" if isinstance(name, str) else f"rule #{index + 1}"
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
    for key in ("throttle", "broad"):
        value = table.get(key, False)
        if not isinstance(value, bool):
            error(key, f"{label}: {key} must be true or false, not {value!r}")
            value = False
        flags[key] = value
    if policy is not None and not _sets_anything(policy) and not flags["throttle"]:
        error("policy" if "policy" in table else None,
              f"{label} sets nothing: give policy = \"background\" (or io, cpu, io_weight, "
              "cpu_weight), or throttle = true")
    if len(out.errors) > errors_before or match is None or policy is None:
        return None
    return Rule(str(name), match, policy, flags["throttle"], flags["broad"], out.file,
                lines.rule(index))


def _sets_anything(policy: priority.Policy) -> bool:
    return any(v is not None for v in (policy.io, policy.cpu, policy.io_weight,
                                       policy.cpu_weight))


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
                    compiled.append(re.compile(text))
                except re.error as err:
                    error(key, f"{label}: match.cmdline {text!r} is not a valid regular "
                          f"expression: {err}")
                    ok = False
            fields[key] = tuple(compiled)
        else:
            fields[key] = values
    if ok and not fields:
        error("match", f"{label}: match is empty, which would match every process")
        return None
    return Match(**fields) if ok else None


def _parse_policy(table: dict[str, Any], label: str, error: Any) -> priority.Policy | None:
    """A named policy of `run` (or its io=…,cpu=… spec), then the rule's own keys on top;
    only lowering is allowed: a rule cannot grant the realtime IO class or a negative nice."""
    try:
        base = table.get("policy", "default")
        if not isinstance(base, str):
            error("policy", f"{label}: policy must be a string such as \"background\"")
            return None
        try:
            policy = priority.parse_policy(base)
        except BackburnerError as err:
            error("policy", f"{label}: {err.message}")
            return None
        kw: dict[str, Any] = {}
        for key, parse in (("io", priority.IOPrio.parse), ("cpu", priority.CPUPolicy.parse)):
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
                kw[key] = priority.parse_weight(value, key.replace("_", " "), top)
    except BackburnerError as err:
        key = next((k for k in ("io", "cpu", "io_weight", "cpu_weight") if k in table), None)
        error(key, f"{label}: {err.message}")
        return None
    policy = policy.with_overrides(**kw)
    if policy.io is not None and policy.io.klass == "rt":
        error("io", f"{label}: a rule may only lower priorities, not grant the realtime IO "
              "class")
        return None
    if policy.cpu is not None and policy.cpu.nice is not None and policy.cpu.nice < 0:
        error("cpu", f"{label}: a rule may only lower priorities, not set a negative nice")
        return None
    return policy


def _parse_throttle(value: Any, lines: _Lines, out: ParsedFile) -> ThrottleSettings | None:
    line = lines.table("throttle")
    if not isinstance(value, dict):
        out.errors.append(RuleError(out.file, line, "throttle must be a [throttle] table"))
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


# --- a set of rule files --------------------------------------------------------------------


@dataclass(frozen=True)
class Ruleset:
    """The rules in force, in order (files sorted by name; rules in file order): the first
    rule that matches a process governs it."""

    rules: tuple[Rule, ...]
    throttle: ThrottleSettings = ThrottleSettings()
    files: tuple[str, ...] = ()
    _by_comm: dict[str, tuple[Rule, ...]] = field(init=False, repr=False, compare=False)
    _always: tuple[Rule, ...] = field(init=False, repr=False, compare=False)
    _names: frozenset[bytes] = field(init=False, repr=False, compare=False)
    _sure: dict[str, Rule] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        index: dict[str, list[int]] = {}
        always: list[int] = []
        for i, rule in enumerate(self.rules):
            comms = rule.match.comm
            if comms and not any(_is_glob(c) for c in comms):
                for c in comms:
                    for key in {c, c[:COMM_LEN]}:
                        index.setdefault(key, []).append(i)
            else:
                always.append(i)
        object.__setattr__(self, "_by_comm", {
            name: tuple(self.rules[i] for i in sorted({*found, *always}))
            for name, found in index.items()})
        object.__setattr__(self, "_always", tuple(self.rules[i] for i in always))
        object.__setattr__(self, "_names", frozenset(n.encode() for n in index))
        # names whose first candidate rule asks for nothing but the name: matched for sure
        object.__setattr__(self, "_sure", {
            name: rules[0] for name, rules in self._by_comm.items()
            if rules[0].match.given() == ["comm"] and name in index
            and self.rules.index(rules[0]) in index[name]})

    def candidates(self, comm: str) -> tuple[Rule, ...]:
        """The rules worth evaluating for a program named `comm`: those listing that exact
        name, and those with no exact-name list. For most processes this is empty, and
        nothing else about the process needs to be read."""
        return self._by_comm.get(comm, self._always)

    def sure_match(self, comm: str) -> Rule | None:
        """The rule that governs a program of this name whatever else is true of it (the
        first candidate lists the name and asks for nothing else), without reading more."""
        return self._sure.get(comm)

    def first_match(self, facts: Facts) -> Rule | None:
        for rule in self.candidates(facts.comm):
            if rule.holds(facts):
                return rule
        return None

    def names_bytes(self) -> frozenset[bytes] | None:
        """Every program name some rule lists, as the kernel spells it (bytes), when every
        rule has such a list; None when some rule must look at every process."""
        return None if self._always else self._names

    def by_name(self, name: str) -> Rule | None:
        return next((r for r in self.rules if r.name == name), None)


def combine(parsed: Sequence[ParsedFile]) -> tuple[Ruleset, list[RuleError]]:
    """Rules of several files (already in order) as one set; duplicate names and a second
    [throttle] table are errors naming both places."""
    errors = [e for p in parsed for e in p.errors]
    seen: dict[str, Rule] = {}
    rules: list[Rule] = []
    throttle: ThrottleSettings | None = None
    for p in parsed:
        for rule in p.rules:
            if rule.name in seen:
                first = seen[rule.name]
                errors.append(RuleError(rule.file, rule.line, f"rule name {rule.name!r} is "
                                        f"already used at {first.where}"))
                continue
            seen[rule.name] = rule
            rules.append(rule)
        if p.throttle is not None:
            if throttle is not None:
                errors.append(RuleError(p.file, 1, f"a second [throttle] table (the first is "
                                        f"in {throttle.file})"))
            else:
                throttle = p.throttle
    return Ruleset(tuple(rules), throttle or ThrottleSettings(),
                   tuple(p.file for p in parsed)), errors


# --- broad rules and explanations -------------------------------------------------------------

_INIT = (("systemd", "/usr/lib/systemd/systemd"),)
_TERMINAL = (("gnome-terminal-", "/usr/libexec/gnome-terminal-server"),
             ("systemd", "/usr/lib/systemd/systemd"), *_INIT)
_SSH = (("sshd", "/usr/sbin/sshd"), *_INIT)
SHELLS = ("bash", "zsh", "fish", "dash", "sh", "ksh", "mksh", "tcsh", "csh", "nu")


def _shell_probes() -> list[StaticFacts]:
    out = []
    for sh in SHELLS:
        for user, uid, ancestors, unit, login in (
                ("alice", 1000, _TERMINAL, "vte-spawn-0b1c.scope", False),
                ("root", 0, _SSH, "session-1.scope", True)):
            slice_ = f"/user.slice/user-{uid}.slice"
            out.append(StaticFacts(
                pid=4243, comm=sh, exe=f"/usr/bin/{sh}", cmdline=[f"-{sh}" if login else sh],
                ancestors=list(ancestors), unit=unit, cgroup=f"{slice_}/{unit}", user=user,
                uid=uid))
    return out


PID1_PROBES = [
    StaticFacts(pid=1, comm="systemd", exe="/usr/lib/systemd/systemd",
                cmdline=["/sbin/init", "splash"], unit="init.scope", cgroup="/init.scope",
                user="root", uid=0),
    StaticFacts(pid=1, comm="init", exe="/sbin/init", cmdline=["/sbin/init"], unit="",
                cgroup="/", user="root", uid=0),
]
#: A process nobody would name in a rule: matching it means matching (nearly) everything.
ANY_PROBE = StaticFacts(pid=4244, comm="q7zx-anything", exe="/opt/q7zx/bin/q7zx-anything",
                        cmdline=["/opt/q7zx/bin/q7zx-anything", "--q7zx"],
                        ancestors=[("q7zx-parent", "/opt/q7zx/bin/q7zx-parent"), *_INIT],
                        unit="q7zx.service", cgroup="/system.slice/q7zx.service",
                        user="q7zx", uid=4242)


def broad_reasons(rule: Rule, pid1: Facts | None = None) -> list[str]:
    """Why a rule is too broad to take without `broad = true`: it would match PID 1 (every
    process inherits from it), an interactive shell (everything typed in it), or a process
    nobody would name (so nearly every process)."""
    reasons = []
    if any(rule.holds(p) for p in [*PID1_PROBES, *([pid1] if pid1 else [])]):
        reasons.append("it would match PID 1")
    shell = next((p for p in _shell_probes() if rule.holds(p)), None)
    if shell is not None:
        reasons.append(f"it would match an interactive shell ({shell.comm} of {shell.user})")
    if any(rule.holds(p) for p in _any_probes(pid1)):
        reasons.append("it would match any process")
    return reasons


def _any_probes(pid1: Facts | None) -> list[Facts]:
    """ANY_PROBE, and the same process descending from this machine's own PID 1 (whatever
    it is called: `parent = "<PID 1's name>"` holds for every process there)."""
    if pid1 is None or not (pid1.comm or pid1.exe):
        return [ANY_PROBE]
    return [ANY_PROBE, replace(ANY_PROBE, ancestors=[ANY_PROBE.ancestors[0],
                                                      (pid1.comm, pid1.exe)])]


def broad_errors(ruleset: Ruleset, pid1: Facts | None = None) -> list[RuleError]:
    out = []
    for rule in ruleset.rules:
        if rule.broad:
            continue
        reasons = broad_reasons(rule, pid1)
        if reasons:
            out.append(RuleError(rule.file, rule.line, f"rule {rule.name!r} is too broad: "
                                 f"{'; '.join(reasons)} (add broad = true if you mean it)"))
    return out


@dataclass(frozen=True)
class Verdict:
    rule: Rule
    matched: bool
    reasons: tuple[str, ...]  # one per match key: why it holds or not


def _fact_text(key: str, facts: Facts) -> str:
    if key == "cmdline":
        return repr(" ".join(facts.cmdline)[:200])
    if key == "parent":
        chain = " < ".join(c for c, _e in facts.ancestors[:6]) or "none"
        return f"ancestors {chain}"
    if key == "user":
        return f"{facts.user or '?'} (uid {facts.uid})"
    return repr(getattr(facts, key) or "")


def explain(ruleset: Ruleset, facts: Facts) -> list[Verdict]:
    """Every rule's verdict on one process, in rule order (the first match governs)."""
    out = []
    for rule in ruleset.rules:
        reasons = []
        for key in rule.match.given():
            held = rule.match.key_holds(key, facts)
            want = [v.pattern if isinstance(v, re.Pattern) else v
                    for v in getattr(rule.match, key)]
            reasons.append(f"{key} {_fact_text(key, facts)} "
                           f"{'matches' if held else 'does not match'} {want}")
        out.append(Verdict(rule, rule.holds(facts), tuple(reasons)))
    return out
