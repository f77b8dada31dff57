"""Rules of `govern`: which running programs are bulk work and what to set on them.

PURE: a process's facts in, a match and the reasons for it out. Nothing here reads /proc or
the filesystem: the facts come from an object with the attributes of `Facts` (the daemon's
are read lazily from /proc by `procinfo`, the tests' are plain values), so matching is
tested exactly. Rule files are read into these rules by `rulefile`; `broad` refuses rules
that would match too much.
"""

from __future__ import annotations

import fnmatch
import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ..base.errors import BackburnerError
from ..policy import grammar
from ..policy import throttle as throttlepolicy
from .pattern import MATCH_DEADLINE_S, Pattern

MATCH_KEYS = ("comm", "exe", "user", "unit", "cgroup", "cmdline", "parent")  # cheapest first
#: The kernel keeps 15 characters of a program's name (TASK_COMM_LEN 16 with the NUL).
COMM_LEN = 15
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
    cmdline: tuple[Pattern, ...] = ()  # searched with a deadline (`pattern`)
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
            vals = [v.pattern if isinstance(v, Pattern) else v for v in getattr(self, key)]
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
    policy: grammar.Policy
    throttle: bool = False
    broad: bool = False
    file: str = ""
    line: int = 0
    net: str | None = None  # "background": its traffic held back (`net.background`)
    flush_behind: bool = False  # its closed files written back at once (`run.flushing`)

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    def sets(self) -> str:
        """What the rule sets, as `status` and `check` show it."""
        parts = [f"{k} {v}" for k, v in self.policy.settings().items()
                 if v not in ("-", "inherit")]
        if self.throttle:
            parts.append("throttled under IO pressure")
        if self.flush_behind:
            parts.append("its files written back at the idle class")
        if self.net:
            parts.append(f"network {self.net}")
        return ", ".join(parts) or "nothing"

    def holds(self, facts: Facts) -> bool:
        return self.match.holds(facts)


@dataclass(frozen=True)
class ThrottleSettings:
    """When interactive work counts as stalled (a PSI trigger: `stall_ms` of stall within
    `window_ms`), how long one pause of the bulk group may last, and the share of time the
    bulk work keeps running while throttled (guaranteed)."""

    stall_ms: int = throttlepolicy.DEFAULT_STALL_MS
    window_ms: int = throttlepolicy.DEFAULT_WINDOW_MS
    pause_ms: int = throttlepolicy.DEFAULT_PAUSE_MS
    min_duty: float = throttlepolicy.DEFAULT_MIN_DUTY  # why this value: there
    watch: tuple[str, ...] = ()  # cgroup v2 groups whose io.pressure counts (default: see docs)
    file: str = ""


@dataclass(frozen=True)
class NetSettings:
    """Where rules with `net = "background"` hold traffic back (the [net] table, as `run
    --net-dev/--netns/--net-uplink`): the interface (default: the one the default route
    leaves by), its network namespace, and the uplink's rate when known (uploads then go
    behind everything else)."""

    dev: str | None = None
    netns: str | None = None
    uplink: str | None = None
    file: str = ""


# --- a set of rule files --------------------------------------------------------------------


@dataclass(frozen=True)
class Ruleset:
    """The rules in force, in order (files sorted by name; rules in file order): the first
    rule that matches a process governs it."""

    rules: tuple[Rule, ...]
    throttle: ThrottleSettings = ThrottleSettings()
    files: tuple[str, ...] = ()
    net: NetSettings = NetSettings()
    _by_comm: dict[str, tuple[Rule, ...]] = field(init=False, repr=False, compare=False)
    _by_comm_at: dict[str, tuple[int, ...]] = field(init=False, repr=False, compare=False)
    _always: tuple[Rule, ...] = field(init=False, repr=False, compare=False)
    _always_at: tuple[int, ...] = field(init=False, repr=False, compare=False)
    _names: frozenset[bytes] = field(init=False, repr=False, compare=False)
    _sure: dict[str, Rule] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Linear in the rules: each rule's position is known as it is indexed (no search of
        # the list), and a name's candidates are merged with the rules that must look at
        # every process only when asked (a table of names x such rules would be quadratic).
        index: dict[str, list[int]] = {}
        always: list[int] = []
        for i, rule in enumerate(self.rules):
            comms = rule.match.comm
            if comms and not any(_is_glob(c) for c in comms):
                for key in {k for c in comms for k in (c, c[:COMM_LEN])}:
                    index.setdefault(key, []).append(i)  # ascending, each rule once
            else:
                always.append(i)
        object.__setattr__(self, "_by_comm", {
            name: tuple(self.rules[i] for i in found) for name, found in index.items()})
        object.__setattr__(self, "_by_comm_at", {
            name: tuple(found) for name, found in index.items()} if always else {})
        object.__setattr__(self, "_always", tuple(self.rules[i] for i in always))
        object.__setattr__(self, "_always_at", tuple(always))
        object.__setattr__(self, "_names", frozenset(n.encode() for n in index))
        # names whose first candidate rule lists the name and asks for nothing else: matched
        # for sure (a rule without a name list that comes first must be tried instead)
        object.__setattr__(self, "_sure", {
            name: self.rules[found[0]] for name, found in index.items()
            if (not always or found[0] < always[0])
            and self.rules[found[0]].match.given() == ["comm"]})

    def candidates(self, comm: str) -> tuple[Rule, ...]:
        """The rules worth evaluating for a program named `comm`, in rule order: those
        listing that exact name, and those with no exact-name list. For most processes this
        is empty, and nothing else about the process needs to be read."""
        named = self._by_comm.get(comm)
        if named is None:
            return self._always
        if not self._always:
            return named
        rules = self.rules
        return tuple(rules[i] for i in heapq.merge(self._by_comm_at[comm], self._always_at))

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
        matched = True
        for key in rule.match.given():
            late: list[str] = []
            if key == "cmdline":
                line = " ".join(facts.cmdline)
                found = [p.search(line) if line else False for p in rule.match.cmdline]
                held = any(found)
                late = [p.pattern for p, f in zip(rule.match.cmdline, found, strict=True)
                        if f is None]
            else:
                held = rule.match.key_holds(key, facts)
            matched = matched and held
            want = [v.pattern if isinstance(v, Pattern) else v
                    for v in getattr(rule.match, key)]
            reasons.append(f"{key} {_fact_text(key, facts)} "
                           f"{'matches' if held else 'does not match'} {want}"
                           + (f" ({', '.join(map(repr, late))} ran past the "
                              f"{MATCH_DEADLINE_S * 1000:.0f} ms deadline: no match)"
                              if late else ""))
        out.append(Verdict(rule, matched, tuple(reasons)))
    return out
