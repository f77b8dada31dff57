"""bench/commands: a probe's label and command, and how a command runs with and without a
shell.
"""

from __future__ import annotations

import pytest

from backburner.bench import commands


@pytest.mark.parametrize(("text", "label", "command"), [
    ("/bin/true", "/bin/true", "/bin/true"),
    ("py=python3 -c 'print(1)'", "py", "python3 -c 'print(1)'"),
    ("env FOO=1 true", "env FOO=1 true", "env FOO=1 true"),  # not a label: a space before =
    ("x=", "x=", "x="),
])
def test_probe_labels(text: str, label: str, command: str) -> None:
    assert commands.split_probe(text) == (label, command)


def test_how_commands_run_with_and_without_a_shell() -> None:
    assert commands.command_argv("sync; echo 3 > x", "sh") == ["sh", "-c", "sync; echo 3 > x"]
    assert commands.command_argv("true", "bash --norc") == ["bash", "--norc", "-c", "true"]
    assert commands.command_argv("rm -rf '/tmp/a b'", "none") == ["rm", "-rf", "/tmp/a b"]
