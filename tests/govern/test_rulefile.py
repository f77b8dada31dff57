"""govern/rulefile.py: rule files parsed, with file and line in every error, every error of
a file listed, several files combined."""

from __future__ import annotations

import pytest

from backburner.govern.rulefile import combine, parse_file

from .test_rules import GOOD


def test_good_file_parses_with_policies_and_lines() -> None:
    parsed = parse_file(GOOD, "good.toml")
    assert parsed.errors == []
    idx, custom, under = parsed.rules
    assert (idx.name, idx.line, idx.throttle, idx.broad) == ("indexers", 2, True, False)
    assert idx.policy.io is not None and str(idx.policy.io) == "idle"
    assert idx.policy.io_weight == 10 and idx.policy.cpu_weight == 10
    assert idx.match.comm == ("updatedb", "plocate")
    # gentle (be:7, nice 19) with io overridden and a CPU weight added
    assert str(custom.policy.io) == "idle" and str(custom.policy.cpu) == "nice:19"
    assert custom.policy.cpu_weight == 20 and custom.line == 8
    assert custom.match.user == ("root", "1000")
    assert str(under.policy.io) == "be:7" and under.policy.cpu is None and under.line == 15
    assert "throttled" in idx.sets() and "io idle" in idx.sets()


@pytest.mark.parametrize("text, line, words", [
    ("[[rule]\nname = 1\n", 1, "not valid TOML"),
    ('[[rule]]\nname = "a"\nmatch = { comm = "x" }\nio = "idle"\ncolour = "red"\n', 5,
     "unknown key 'colour'"),
    ('[[rule]]\nmatch = { comm = "x" }\nio = "idle"\n', 1, "missing `name`"),
    ('[[rule]]\nname = "a b"\nmatch = { comm = "x" }\nio = "idle"\n', 2, "name must be"),
    ('[[rule]]\nname = "a"\nio = "idle"\n', 1, "missing `match`"),
    ('[[rule]]\nname = "a"\nmatch = {}\nio = "idle"\n', 3, "match is empty"),
    ('[[rule]]\nname = "a"\nio = "idle"\nmatch = { comm = [] }\n', 4, "non-empty"),
    ('[[rule]]\nname = "a"\nio = "idle"\nmatch = { comm = "x", colour = "y" }\n', 4,
     "unknown match key 'colour'"),
    ('[[rule]]\nname = "a"\nio = "idle"\n\nmatch = { cmdline = "(" }\n', 5,
     "not a valid regular expression"),
    ('[[rule]]\nname = "a"\nmatch = { comm = "x" }\npolicy = "fast"\n', 4,
     "unknown policy 'fast'"),
    ('[[rule]]\nname = "a"\nmatch = { comm = "x" }\nio = "rt:0"\n', 4, "realtime"),
    ('[[rule]]\nname = "a"\nmatch = { comm = "x" }\ncpu = "nice:-5"\n', 4, "negative nice"),
    ('[[rule]]\nname = "a"\nmatch = { comm = "x" }\nio_weight = 5000\n', 4, "out of range"),
    ('[[rule]]\nname = "a"\nmatch = { comm = "x" }\nio = "sometimes"\n', 4,
     "unknown IO class"),
    ('[[rule]]\nname = "a"\nmatch = { comm = "x" }\n', 1, "sets nothing"),
    ('[[rule]]\nname = "a"\nmatch = { comm = "x" }\nio = "idle"\nthrottle = "yes"\n', 5,
     "throttle must be true or false"),
    ('[[rule]]\nname = "a"\nmatch = { comm = "x" }\nio = "idle"\n[throttle]\nmin_duty = 1.5\n',
     6, "min_duty"),
    ('[[rule]]\nname = "a"\nmatch = { comm = "x" }\nio = "idle"\n[throttle]\n'
     'stall_ms = 900\nwindow_ms = 800\n', 6, "stall_ms must be below window_ms"),
    ('[rules]\nx = 1\n', 1, "unknown top-level key 'rules'"),
    ('[[rule]]\nname = "a"\nmatch = { comm = "x" }\npolicy = "gentle"\nflush_behind = true\n',
     5, "flush_behind writes the files back at the idle class, and the rule's IO class is "
     "not idle"),
    ('[[rule]]\nname = "a"\nmatch = { comm = "x" }\nio = "idle"\nflush_behind = 1\n', 5,
     "flush_behind must be true or false"),
    ('[[rule]]\nname = "a"\nmatch = { comm = "x" }\nnet = "slow"\n', 4,
     "net must be one of 'background', not 'slow'"),
    ('[[rule]]\nname = "a"\nmatch = { comm = "x" }\nnet = "background"\n[net]\n'
     'uplink = "fast"\n', 6, "[net] unknown link rate 'fast'"),
    ('[net]\ndev = "eth0"\nqueue = 5\n', 3, "[net] unknown key 'queue'"),
    ('[net]\ndev = ""\n', 2, "[net] dev must be a non-empty string"),
    ('[[rule]]\nname = "a"\nio = "idle"\nmatch = { comm = "x", cmdline = "(a|aa)+$" }\n', 4,
     "match.cmdline '(a|aa)+$' is pathological: searching 1024 characters"),
    ('[[rule]]\nname = "a"\nio = "idle"\nmatch = { cmdline = "\\\\p{L}" }\n', 4,
     "not a valid regular expression"),  # `regex` would take it; `re` does not
    ("x = " + "[" * 5000 + "]" * 5000 + "\n", 1, "nested more than 32 deep"),
    ('[[rule]]\nname = "a"\nio = "idle"\n\nmatch = { comm = ' + "[" * 40 + '"x"' + "]" * 40
     + " }\n", 5, "nested more than 32 deep"),
])
def test_errors_name_file_and_line(text: str, line: int, words: str) -> None:
    errs = parse_file(text, "bad.toml").errors
    assert errs, text
    assert errs[0].file == "bad.toml"
    assert errs[0].line == line, errs
    assert words in errs[0].message, errs


def test_every_error_of_a_file_is_listed() -> None:
    text = ('[[rule]]\nname = "a"\nmatch = { comm = "x" }\nio = "sometimes"\n\n'
            '[[rule]]\nname = "b"\nmatch = { cmdline = "[" }\nio = "idle"\n\n'
            '[[rule]]\nname = "c"\nmatch = { comm = "y" }\n')
    errs = parse_file(text, "many.toml").errors
    assert [(e.line, e.message.split(":")[0]) for e in errs] == [
        (4, "rule 'a'"), (8, "rule 'b'"), (11, "rule 'c' sets nothing")]


def test_duplicate_names_and_second_throttle_table_across_files() -> None:
    a = parse_file('[[rule]]\nname = "x"\nmatch = { comm = "a" }\nio = "idle"\n'
                   '[throttle]\npause_ms = 200\n', "a.toml")
    b = parse_file('\n[[rule]]\nname = "x"\nmatch = { comm = "b" }\nio = "idle"\n'
                   '[throttle]\npause_ms = 300\n', "b.toml")
    ruleset, errs = combine([a, b])
    assert [str(e) for e in errs] == [
        "b.toml:2: rule name 'x' is already used at a.toml:1",
        "b.toml:1: a second [throttle] table (the first is in a.toml)"]
    assert [r.name for r in ruleset.rules] == ["x"] and ruleset.throttle.pause_ms == 200


def test_group_io_is_a_rule_key_and_bench_only_knobs_are_refused() -> None:
    ok = parse_file('[[rule]]\nname = "a"\nmatch = { comm = "x" }\ngroup_io = "idle"\n', "g.toml")
    assert not ok.errors and ok.rules[0].policy.group_io == "idle"
    named = parse_file('[[rule]]\nname = "a"\nmatch = { comm = "x" }\npolicy = "group-idle"\n',
                       "g.toml")
    assert not named.errors and named.rules[0].policy.group_io == "idle"
    for text in ('policy = "latency-target"', 'policy = "iocost"'):
        errs = parse_file(f'[[rule]]\nname = "a"\nmatch = {{ comm = "x" }}\n{text}\n',
                          "b.toml").errors
        assert errs and "applies only in bench" in errs[0].message, errs
    bad = parse_file('[[rule]]\nname = "a"\nmatch = { comm = "x" }\ngroup_io = "rt"\n', "b.toml")
    assert bad.errors and "unknown group IO class" in bad.errors[0].message


def test_net_alone_is_a_setting_and_its_table_is_kept() -> None:
    """A rule may set nothing but its traffic's place; the [net] table says where, once."""
    a = parse_file('[[rule]]\nname = "dl"\nmatch = { comm = "apt-get" }\nnet = "background"\n'
                   '[net]\ndev = "wlan0"\nuplink = "2mbit"\n', "a.toml")
    assert not a.errors and a.rules[0].net == "background"
    assert a.rules[0].sets() == "network background"
    b = parse_file('[net]\ndev = "eth0"\n', "b.toml")
    ruleset, errs = combine([a, b])
    assert (ruleset.net.dev, ruleset.net.netns, ruleset.net.uplink) == ("wlan0", None, "2mbit")
    assert [str(e) for e in errs] == ["b.toml:1: a second [net] table (the first is in a.toml)"]


def test_nesting_a_file_5000_deep_is_one_error_not_a_recursion_error() -> None:
    """tomllib recurses once per level: 5,000 levels ended in a RecursionError (a traceback
    where a rule file's error belongs). Brackets in strings and comments do not count."""
    for deep in ("x = " + "[" * 5000 + "]" * 5000, "x = " + "{a = " * 5000 + "1" + "}" * 5000):
        (err,) = parse_file(deep, "deep.toml").errors
        assert (err.file, err.line) == ("deep.toml", 1) and "nested" in err.message
    quoted = ('# [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\n'
              '[[rule]]\nname = "a"\nio = "idle"\n'
              "match = { cmdline = '[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[x]' }\n")
    assert parse_file(quoted, "q.toml").errors == []


def test_values_in_errors_are_short_however_deep_or_long() -> None:
    text = ('[[rule]]\nname = "a"\nmatch = { comm = "x" }\nio = "idle"\nbroad = '
            + "[" * 30 + "]" * 30 + "\nnet = " + repr("x" * 100_000) + "\n")
    errs = parse_file(text, "v.toml").errors
    assert [e.line for e in errs] == [5, 6]
    assert all(len(str(e)) < 200 for e in errs), errs


def test_flush_behind_is_a_rule_key_with_the_idle_class() -> None:
    parsed = parse_file('[[rule]]\nname = "a"\nmatch = { comm = "x" }\n'
                        'policy = "background"\nflush_behind = true\n', "f.toml")
    assert parsed.errors == [] and parsed.rules[0].flush_behind
    assert "its files written back at the idle class" in parsed.rules[0].sets()
