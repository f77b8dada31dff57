"""govern/broad.py: rules that would match PID 1, a shell or any process are refused unless
marked `broad = true`, checked against this machine's PID 1 too."""

from __future__ import annotations

import pytest

from backburner.govern import broad
from backburner.govern.rulefile import combine, parse_file

from .test_rules import facts, one


@pytest.mark.parametrize("match, why", [
    ('comm = "bash"', "interactive shell"),
    ('exe = "/usr/bin/*"', "interactive shell"),
    ('cmdline = "."', "PID 1"),
    ('user = "root"', "PID 1"),
    ('parent = "systemd"', "any process"),
    ('cgroup = "/*"', "PID 1"),
    ('unit = "*.service"', "any process"),
    ('comm = "systemd"', "PID 1"),
])
def test_broad_rules_are_refused_unless_marked(match: str, why: str) -> None:
    text = f'[[rule]]\nname = "wide"\nmatch = {{ {match} }}\nio = "idle"\n'
    ruleset, errs = combine([parse_file(text, "w.toml")])
    assert errs == []
    (err,) = broad.broad_errors(ruleset)
    assert err.line == 1 and "too broad" in err.message and why in err.message, err
    marked, _ = combine([parse_file(text + "broad = true\n", "w.toml")])
    assert broad.broad_errors(marked) == []


def test_broad_check_uses_the_real_pid1_too() -> None:
    rule = one('[[rule]]\nname = "r"\nio = "idle"\nmatch = { comm = "my-init" }\n')
    pid1 = facts(pid=1, comm="my-init", exe="/sbin/my-init", user="root", uid=0)
    assert broad.broad_reasons(rule) == []
    assert broad.broad_reasons(rule, pid1) == ["it would match PID 1"]


def test_a_parent_named_for_this_machines_pid1_matches_any_process() -> None:
    """Every process descends from PID 1, whatever it is called here (a container's or a
    sandbox's own init): `parent = "<its name>"` governs everything."""
    rule = one('[[rule]]\nname = "r"\nio = "idle"\nmatch = { parent = "process_api" }\n')
    pid1 = facts(pid=1, comm="process_api", exe="/opt/sandbox/process_api", user="root",
                 uid=0)
    assert broad.broad_reasons(rule) == []
    assert broad.broad_reasons(rule, pid1) == ["it would match any process"]
