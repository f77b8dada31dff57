"""The parser a command line gets: a command's own module alone parses it exactly as the
whole parser does (its help, its errors, its values), and the table that says which module
registers which command is the one the modules make."""

from __future__ import annotations

import argparse
import contextlib
import io

import pytest

from backburner import cli
from backburner.base.errors import UsageError
from backburner.cli.shells import _parsers


def _helps(parser: argparse.ArgumentParser, command: str) -> dict[str, str]:
    return {path: p.format_help() for path, p in _parsers(parser)
            if path == command or path.startswith(command + " ")}


def test_the_table_names_every_command_its_module_registers() -> None:
    whole = cli.build_parser()
    sub = next(a for a in whole._actions if isinstance(a, argparse._SubParsersAction))
    assert list(sub.choices) == list(cli.COMMANDS)  # every command, in --help's order
    for command, module in cli.COMMANDS.items():
        if command in cli.WHOLE:
            continue
        alone = cli.build_parser(command)
        mine = next(a for a in alone._actions if isinstance(a, argparse._SubParsersAction))
        assert command in mine.choices
        assert {c: cli.COMMANDS[c] for c in mine.choices} == {
            c: module for c in mine.choices}, command


@pytest.mark.parametrize("command", list(cli.COMMANDS))
def test_a_command_alone_has_the_whole_parsers_help(command: str) -> None:
    assert _helps(cli.build_parser(command), command) == _helps(cli.build_parser(), command)


def _outcome(parser: argparse.ArgumentParser, argv: list[str]) -> tuple[object, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            args = vars(parser.parse_args(argv))
        except SystemExit as exit_:  # --help, --version
            return exit_.code, err.getvalue()
        except UsageError as error:  # what `main` prints in one line, and its status
            return error.exit_status, str(error)
    args.pop("parser")  # the parser itself: a different object by construction
    return args, err.getvalue()


@pytest.mark.parametrize("argv", [
    ["run", "--", "true"], ["--debug", "run", "--io", "idle", "--", "true"], ["run", "--bogus"],
    ["policies"], ["status", "--json"], ["bench", "--preset", "quick"], ["bench", "--nope"],
    ["report", "r.db", "--json"], ["compare", "a.db"], ["layout", "check", "i"],
    ["readahead", "show", "p"], ["slowdisk", "create"], ["trace", "diff", "a"],
    ["apply", "--status"], ["govern"], ["extents"], ["store", "copy", "a.db", "b.db"]])
def test_a_command_line_parses_alike_with_its_module_alone(argv: list[str]) -> None:
    """Values, or the status and message of a usage error, the same either way."""
    assert len(cli.parser_for(argv)._subparsers._actions[-1].choices) < len(cli.COMMANDS)
    assert _outcome(cli.parser_for(argv), argv) == _outcome(cli.build_parser(), argv)


@pytest.mark.parametrize("argv", [["--help"], ["-h", "run"], ["--version", "run"],
                                  ["nope"], [], ["completion", "bash"]])
def test_lines_that_need_every_command_get_the_whole_parser(argv: list[str]) -> None:
    """The program's own help lists every command; an unknown one is told the choices;
    completion describes the whole program."""
    sub = next(a for a in cli.parser_for(argv)._actions
               if isinstance(a, argparse._SubParsersAction))
    assert list(sub.choices) == list(cli.COMMANDS)
