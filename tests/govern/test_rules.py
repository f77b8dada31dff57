"""govern/rules.py: matching, the rule index, explanations, the built-in rules; exact and
fast (no /proc, no root)."""

from __future__ import annotations

import random
import re
import string

import pytest

from backburner.govern import broad, rules, rulesources
from backburner.govern.pattern import Pattern
from backburner.govern.rulefile import combine, parse_file
from backburner.govern.rules import StaticFacts

GOOD = """\
# a comment
[[rule]]
name = "indexers"
match = { comm = ["updatedb", "plocate"] }
policy = "background"
throttle = true

[[rule]]
name = "custom"
match = { exe = "/opt/*/bin/backup", user = ["root", 1000] }
policy = "gentle"
io = "idle"
cpu_weight = 20

[[rule]]
name = "under-apt"
match = { comm = "dpkg", parent = "apt" }
io = "be:7"
"""


def facts(**kw: object) -> StaticFacts:
    return StaticFacts(**kw)  # type: ignore[arg-type]


def one(text: str) -> rules.Rule:
    parsed = parse_file(text, "f.toml")
    assert parsed.errors == []
    (rule,) = parsed.rules
    return rule


@pytest.mark.parametrize("pattern, comm, expected", [
    ("updatedb", "updatedb", True),
    ("updatedb", "updatedb2", False),
    ("unattended-upgrades", "unattended-upgr", True),  # the kernel keeps 15 characters
    ("unattended-upgrades", "unattended-upgrades", True),
    ("unattended-upgrades", "unattended-upg", False),
    ("tracker-*", "tracker-miner-f", True),
    ("tracker-*", "xtracker-", False),
    ("x", "", False),
])
def test_comm_matching(pattern: str, comm: str, expected: bool) -> None:
    assert rules.comm_matches(pattern, comm) is expected


def test_every_key_must_hold_and_any_value_of_a_key() -> None:
    rule = one('[[rule]]\nname="r"\nio="idle"\nmatch = { comm = ["a", "b"], '
               'exe = "/usr/bin/*", cmdline = "--full\\\\b", parent = ["cron", "/usr/sbin/*"], '
               'unit = "*.timer-job.service", cgroup = "/system.slice/*", user = "backup" }\n')
    ok = facts(comm="b", exe="/usr/bin/b", cmdline=["b", "--full", "x"],
               ancestors=[("sh", "/bin/sh"), ("cron", "/usr/sbin/cron")],
               unit="x.timer-job.service", cgroup="/system.slice/x.timer-job.service",
               user="backup", uid=34)
    assert rule.holds(ok)
    for change in [dict(comm="c"), dict(exe="/opt/b"), dict(cmdline=["b", "--fullx"]),
                   dict(ancestors=[("sh", "/bin/sh")]), dict(unit="x.service"),
                   dict(cgroup="/user.slice/x"), dict(user="alice", uid=1000),
                   dict(cmdline=[]), dict(exe="")]:
        assert not rule.holds(facts(**{**vars(ok), **change})), change
    # a parent given as a path matches an ancestor's exe, as a name its comm
    assert rule.holds(facts(**{**vars(ok), "ancestors": [("x", "/usr/sbin/anacron")]}))


def test_user_matches_name_or_uid() -> None:
    rule = one('[[rule]]\nname="r"\nio="idle"\nmatch = { comm = "x", user = 1000 }\n')
    assert rule.holds(facts(comm="x", user="alice", uid=1000))
    assert not rule.holds(facts(comm="x", user="bob", uid=1001))
    assert not rule.holds(facts(comm="x", user="", uid=-1))  # gone: never matches


def test_rules_error_is_one_line_with_the_first_and_a_count() -> None:
    err = rules.RulesError([rules.RuleError("a.toml", 3, "bad"),
                            rules.RuleError("b.toml", 4, "worse")])
    assert err.exit_status == 65
    assert str(err) == ("a.toml:3: bad; and 1 more error; `backburner govern check` lists "
                        "them all")


def test_builtin_rules_parse_are_not_broad_and_each_cites_why() -> None:
    found = rulesources.builtin_sources()
    assert len(found) >= 3
    ruleset, errors = rulesources.parse(found)
    assert errors == []
    names = {r.name for r in ruleset.rules}
    assert {"apt", "dnf-rpm", "packagekit", "flatpak-system-helper", "flatpak-update",
            "ostree-updaters", "snapd", "fwupd", "man-db", "locate", "tracker-localsearch",
            "baloo", "rsync", "backup-tools", "deja-dup"} <= names
    for src in found:  # a comment right above every [[rule]] says why
        lines = src.text.splitlines()
        for i, line in enumerate(lines):
            if line.strip() == "[[rule]]":
                assert lines[i + 1].startswith("#"), f"{src.name}:{i + 2} has no reason"
    # what they are for: known bulk workers match, shells and init do not
    for comm in ("unattended-upgr", "dpkg", "updatedb.plocat", "baloo_file", "restic",
                 "packagekitd", "tracker-miner-f", "localsearch-3"):
        assert ruleset.first_match(facts(comm=comm)) is not None, comm
    assert ruleset.first_match(facts(comm="flatpak", cmdline=["flatpak", "update", "-y"]))
    assert not ruleset.first_match(facts(comm="flatpak", cmdline=["flatpak", "run", "x"]))
    assert not ruleset.first_match(facts(comm="rclone", ancestors=[("bash", "/bin/bash")]))
    assert ruleset.first_match(facts(comm="rclone", ancestors=[("deja-dup", "/x")]))
    # flatpak and ostree are throttled, where it was measured to help; dpkg's start stayed
    # where the idle class left it (docs/measurements/startup.md, "Beyond the idle class");
    # the daemons that answer requests are not paused
    throttled = {r.name for r in ruleset.rules if r.throttle}
    assert {"flatpak-system-helper", "flatpak-update", "ostree-updaters"} <= throttled
    assert not {"apt", "dnf-rpm", "packagekit", "snapd", "fwupd"} & throttled


def test_candidates_index_and_first_match_order() -> None:
    text = ('[[rule]]\nname = "one"\nmatch = { comm = ["a", "b"] }\nio = "idle"\n'
            '[[rule]]\nname = "glob"\nmatch = { comm = "c*" }\nio = "idle"\n'
            '[[rule]]\nname = "two"\nmatch = { comm = "a", user = "x" }\ncpu = "idle"\n'
            '[[rule]]\nname = "exe"\nmatch = { exe = "/opt/*" }\nio = "idle"\n')
    ruleset, _ = combine([parse_file(text, "f.toml")])
    names = [r.name for r in ruleset.candidates("a")]
    assert names == ["one", "glob", "two", "exe"]  # file order kept
    assert [r.name for r in ruleset.candidates("zzz")] == ["glob", "exe"]
    assert ruleset.first_match(facts(comm="a", user="x", uid=1)).name == "one"
    assert ruleset.first_match(facts(comm="cat")).name == "glob"
    assert ruleset.first_match(facts(comm="q", exe="/opt/q")).name == "exe"
    assert ruleset.first_match(facts(comm="q", exe="/usr/bin/q")) is None


def test_index_agrees_with_trying_every_rule_seeded() -> None:
    """Seeded random rule sets and processes: the comm index never changes the verdict."""
    rng = random.Random(10)
    alphabet = string.ascii_lowercase[:6]
    for _ in range(200):
        body = []
        for i in range(rng.randint(1, 6)):
            comms = ["".join(rng.choices(alphabet, k=rng.randint(1, 18)))
                     for _ in range(rng.randint(1, 3))]
            if rng.random() < 0.2:
                comms.append(rng.choice(alphabet) + "*")
            keys = f"comm = {comms!r}".replace("'", '"')
            if rng.random() < 0.3:
                keys += ', user = "u"'
            body.append(f'[[rule]]\nname = "r{i}"\nmatch = {{ {keys} }}\nio = "idle"\n')
        ruleset, errs = combine([parse_file("\n".join(body), "r.toml")])
        assert errs == []
        for _ in range(30):
            comm = "".join(rng.choices(alphabet, k=rng.randint(1, 15)))
            if rng.random() < 0.5:  # often a name (cut to 15) of one of the rules
                comm = rng.choice([c for r in ruleset.rules for c in r.match.comm])[:15]
            f = facts(comm=comm, user=rng.choice(["u", "v"]), uid=1)
            brute = next((r for r in ruleset.rules if r.holds(f)), None)
            assert ruleset.first_match(f) == brute, (comm, body)


def test_explain_says_why_for_every_key() -> None:
    ruleset, _ = combine([parse_file(GOOD, "good.toml")])
    f = facts(comm="dpkg", exe="/usr/bin/dpkg", ancestors=[("apt", "/usr/bin/apt")],
              user="root", uid=0)
    verdicts = rules.explain(ruleset, f)
    assert [(v.rule.name, v.matched) for v in verdicts] == [
        ("indexers", False), ("custom", False), ("under-apt", True)]
    assert verdicts[0].reasons == (
        "comm 'dpkg' does not match ['updatedb', 'plocate']",)
    assert re.search(r"exe '/usr/bin/dpkg' does not match \['/opt/\*/bin/backup'\]",
                     verdicts[1].reasons[0])
    assert "user root (uid 0) matches" in verdicts[1].reasons[1]
    assert verdicts[2].reasons[1] == "parent ancestors apt matches ['apt']"


def test_sure_match_only_when_the_name_alone_decides() -> None:
    text = ('[[rule]]\nname = "both"\nmatch = { comm = "a", user = "x" }\nio = "idle"\n'
            '[[rule]]\nname = "name"\nmatch = { comm = ["a", "b", "a-very-long-program-name"] }'
            '\nio = "idle"\n'
            '[[rule]]\nname = "glob"\nmatch = { comm = "c*" }\nio = "idle"\n')
    ruleset, _ = combine([parse_file(text, "f.toml")])
    assert ruleset.sure_match("a") is None  # "both" comes first and asks for a user too
    assert ruleset.sure_match("b").name == "name"
    assert ruleset.sure_match("a-very-long-pro").name == "name"  # as the kernel cuts it
    assert ruleset.sure_match("cat") is None  # only indexed names are sure
    for comm in ("a", "b", "a-very-long-pro", "cat", "zz"):
        sure = ruleset.sure_match(comm)
        if sure is not None:
            assert ruleset.first_match(facts(comm=comm, user="y", uid=2)) == sure


def test_a_search_past_its_deadline_is_explained_as_no_match() -> None:
    slow = rules.Rule("slow", rules.Match(comm=("x",), cmdline=(Pattern(r"(a|aa)+$"),)),
                      one(GOOD.split("\n\n")[0]).policy, file="f.toml", line=1)
    (verdict,) = rules.explain(rules.Ruleset((slow,)), facts(comm="x", cmdline=["a" * 60 + "!"]))
    assert not verdict.matched
    assert verdict.reasons[1].endswith(
        "does not match ['(a|aa)+$'] ('(a|aa)+$' ran past the 10 ms deadline: no match)")


def _held(value: object) -> int:
    """How many references a rule set's tables hold (containers followed, rules not)."""
    if isinstance(value, dict):
        return sum(1 + _held(v) for v in value.values())
    if isinstance(value, tuple | list | frozenset | set):
        return sum(1 + _held(v) for v in value)
    return 0


def _operations(n: int, every: int, monkeypatch: pytest.MonkeyPatch) -> tuple[int, int]:
    """What combining `n` rules (each naming its program; with `every`, one in `every`
    names none) and checking them for breadth costs: the steps that can repeat per pair
    of rules (comparisons of rules, matches of a rule against a process, match-key lists),
    and the references the combined set holds."""
    count = 0

    def counted(name: str, cls: type) -> None:
        original = getattr(cls, name)

        def wrapper(*args: object, **kw: object) -> object:
            nonlocal count
            count += 1
            return original(*args, **kw)
        monkeypatch.setattr(cls, name, wrapper)

    text = "".join(f'[[rule]]\nname = "r{i}"\nmatch = {{ exe = "/opt/p{i}" }}\nio = "idle"\n'
                   if every and i % every == every - 1 else
                   f'[[rule]]\nname = "r{i}"\nmatch = {{ comm = "p{i}" }}\nio = "idle"\n'
                   for i in range(n))
    parsed = parse_file(text, "many.toml")
    counted("__eq__", rules.Rule)
    counted("holds", rules.Rule)
    counted("given", rules.Match)
    ruleset, errs = combine([parsed])
    assert errs == [] and len(ruleset.rules) == n
    assert broad.broad_errors(ruleset) == []
    monkeypatch.undo()
    return count, sum(_held(v) for v in vars(ruleset).values())


@pytest.mark.parametrize("every", [0, 10])
def test_combining_and_checking_rules_is_linear_in_their_number(
        every: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """20,000 rules took 81 s to combine: the index searched the list of rules for each
    name (list.index, comparing rules), and gave every name a copy of the rules without a
    name list. Counted, not timed: doubling the rules may at most double the work."""
    small, large = _operations(500, every, monkeypatch), _operations(1000, every, monkeypatch)
    for a, b in zip(small, large, strict=True):
        assert b <= 2 * a + 50, (small, large)
