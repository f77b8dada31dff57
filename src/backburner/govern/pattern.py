r"""A rule's `cmdline` regular expression, safe to search in any user's command line as root.

Python's `re` backtracks without bound: `(a+)+$` searched in a command line of thirty
`a`s and a `!` takes minutes (twice as long for each `a` more), and the daemon searches
every program start that a rule's name list lets through, so one user's process could
stall govern for everyone. Here a pattern has Python's `re` syntax (a rule file means
what it meant), is compiled by the `regex` module, and is searched:

- in the first `TEXT_LIMIT` characters of the command line only (what /proc/PID/cmdline
  showed before Linux 4.2), so a pattern's cost does not grow with an argument list a user
  can make a megabyte long;
- with a deadline (`MATCH_DEADLINE_S`): a search that runs past it counts as no match (a
  rule only lowers priorities: leaving a process alone is the safe side) and is counted,
  for `govern status` and `govern explain` to say so.

The deadline, and the probes' below, are CPU time (the `regex` module's `timeout=`
counts the process's): a loaded machine makes a search take longer, not a verdict change.

A pattern is pathological when its time grows faster than the square of the text: it is
refused when its rule file is read. The test (`pathological`): the pattern is searched in
probe texts of `PROBE_LEN` characters (`probes`: each character and word it names, and a
few common ones, repeated, then a character it does not expect) and must finish each
within `PROBE_DEADLINE_S`. Linear patterns take microseconds there and the slowest
quadratic ones tried about 0.2 s (`(\w|\d)+$`); cubic ones (`(a+)+$`, which `regex` tames
from exponential) take seconds and exponential ones (`(a|aa)+$`) never finish: the margin
either side is wide enough for machines several times faster or slower than ours.
"""

from __future__ import annotations

import re
import warnings

import regex

#: How much of a command line (its arguments joined by spaces) a pattern is searched in.
TEXT_LIMIT = 4096
#: The longest one search may take in the daemon; past it the pattern does not match.
MATCH_DEADLINE_S = 0.01
#: The length of a probe text, and the longest a pattern may take on one.
PROBE_LEN = 1024
PROBE_DEADLINE_S = 1.0
#: Characters most command lines are made of, probed for every pattern beside its own.
_COMMON = "a0 -/._=,:A"
_META = set("\\()[]{}|*+?^$.")
_QUANTIFIER = re.compile(r"[*+{]|(?<!\()\?")
_WORD = re.compile(r"[^\\()\[\]{}|*+?^$.]{2,}")
_MAX_UNITS = 32  # distinct characters and words probed, each
_END = "\x01"  # ends every probe: a character no pattern of a command line expects


class Pattern:
    """One compiled `cmdline` pattern. `search` is True, False, or None when it ran past
    its deadline (then `timeouts` counts it)."""

    __slots__ = ("pattern", "timeouts", "_rx")

    def __init__(self, text: str) -> None:
        with warnings.catch_warnings():  # "possible nested set": a warning is no refusal
            warnings.simplefilter("ignore")
            re.compile(text)  # Python's syntax: raises re.error for what `re` would refuse
            self._rx = regex.compile(text, regex.VERSION0)
        self.pattern = text
        self.timeouts = 0

    def search(self, text: str, deadline_s: float = MATCH_DEADLINE_S) -> bool | None:
        try:
            return self._rx.search(text[:TEXT_LIMIT], timeout=deadline_s) is not None
        except TimeoutError:
            self.timeouts += 1
            return None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Pattern) and other.pattern == self.pattern

    def __hash__(self) -> int:
        return hash(self.pattern)

    def __repr__(self) -> str:
        return f"Pattern({self.pattern!r})"


def probes(text: str) -> list[tuple[str, str]]:
    """The texts a pattern is tried on when its rule is read, each with what it repeats:
    each character the pattern names (and each common one), each word of its literal text
    and the whole of that text, repeated to `PROBE_LEN` characters and ended by a
    character it does not expect; each character's run also after the pattern's first
    word (`--opt=(a|aa)+;` backtracks only past `--opt=`). No probe for a pattern without
    repetition, which cannot backtrack more than its own length at each position."""
    if not _QUANTIFIER.search(text):
        return []
    chars = list(dict.fromkeys(c for c in text if c.isprintable() and c not in _META))
    chars = list(dict.fromkeys([*chars[:_MAX_UNITS], *_COMMON]))
    words = _WORD.findall(text)
    units = [*chars, *list(dict.fromkeys(words))[:_MAX_UNITS], "".join(words)]
    out = [(u, u * ((PROBE_LEN - 1) // len(u)) + _END) for u in dict.fromkeys(units) if u]
    if words and len(words[0]) < PROBE_LEN // 2:
        first = words[0]
        out += [(f"{first}{c}", first + c * ((PROBE_LEN - 1 - len(first)) // len(c)) + _END)
                for c in chars]
    return out


def pathological(pattern: Pattern) -> str | None:
    """What the pattern could not search within the probe deadline (its rule is refused),
    or None."""
    for _unit, probe in probes(pattern.pattern):
        if pattern.search(probe, PROBE_DEADLINE_S) is None:
            pattern.timeouts = 0  # the probe's, not a command line's
            return (f"searching {len(probe)} characters ({probe[:24]!r}...) took more than "
                    f"{PROBE_DEADLINE_S:g} s")
    return None
