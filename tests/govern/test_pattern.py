"""govern/pattern.py: a rule's cmdline pattern is searched with a deadline and in a bounded
text, and a pathological one is told apart from an ordinary one (no root)."""

from __future__ import annotations

import time

import pytest

from backburner.govern import pattern
from backburner.govern.pattern import Pattern

#: Exponential with Python's `re`, and at least cubic with `regex`: refused at load.
PATHOLOGICAL = [r"(a+)+$", r"(a|aa)+$", r"(\w+\s?)+$", r"(.*,){10}x", r"--opt=(a|aa)+;"]
#: Linear or quadratic: taken (the built-in flatpak rule's is among them).
ORDINARY = [r"^\S*flatpak(\s+-\S+)*\s+(update|upgrade)\b", r"foo.*bar", r"--backup",
            r"(^| )-j[0-9]+", r"rsync .*--delete", r"\bborg\b.*create", r"\s+$",
            r"(?:\w+/)+\w+\.py", r"(\d+\.)+\d+", r"^(\S+\s+){3}foo", r"apt-get (install|up)"]


def test_the_issues_pattern_does_not_hang_a_search() -> None:
    """`(a+)+$` against a user's `exec -a aaaa…!`: with `re` this search takes 2^n steps
    (it hung `govern explain` and the daemon); here it ends within the deadline, as no
    match if it has to."""
    p = Pattern(r"(a+)+$")
    started = time.process_time()
    assert not p.search("a" * 60 + "!")
    assert not Pattern(r"(a|aa)+$").search("a" * 60 + "!")  # exponential with `regex` too
    assert time.process_time() - started < 1.0


def test_a_search_past_its_deadline_is_no_match_and_counted() -> None:
    p = Pattern(r"(a|aa)+$")
    assert p.search("a" * 60 + "!") is None
    assert p.search("a" * 60 + "!") is None
    assert p.timeouts == 2
    assert p.search("b") is False and p.timeouts == 2
    assert Pattern("x+").search("axxb") is True


def test_only_the_first_text_limit_characters_are_searched() -> None:
    p = Pattern("needle")
    assert p.search("a" * (pattern.TEXT_LIMIT - 6) + "needle")
    assert not p.search("a" * pattern.TEXT_LIMIT + "needle")


def test_the_syntax_is_pythons() -> None:
    """`regex` knows more (\\p{L}, fuzzy matching): a rule file keeps meaning what `re`
    made of it, and what `re` refuses stays refused."""
    with pytest.raises(Exception, match="bad escape"):
        Pattern(r"\p{L}")
    assert Pattern(r"(?i)APT(?=-get)").search("apt-get")
    assert Pattern("a") == Pattern("a") and Pattern("a") != Pattern("b")
    assert len({Pattern("a"), Pattern("a")}) == 1


@pytest.mark.parametrize("text", PATHOLOGICAL)
def test_pathological_patterns_are_told(text: str) -> None:
    why = pattern.pathological(Pattern(text))
    assert why is not None and f"took more than {pattern.PROBE_DEADLINE_S:g} s" in why


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_patterns_pass(text: str) -> None:
    p = Pattern(text)
    assert pattern.pathological(p) is None
    assert p.timeouts == 0


def test_probes_are_the_patterns_own_characters_and_words_at_the_probe_length() -> None:
    probes = dict(pattern.probes(r"--opt=(\w+,?)+;"))
    assert {"-", "o", "p", "t", "=", "w", ",", ";", "a", " ", "--opt=", "--opt=a"} <= set(
        probes)
    for unit, text in probes.items():
        assert pattern.PROBE_LEN - len(unit) <= len(text) <= pattern.PROBE_LEN
        assert text.startswith(unit) and text.endswith("\x01")
    assert pattern.probes("apt-get (install|upgrade)") == []  # no repetition: no probe
