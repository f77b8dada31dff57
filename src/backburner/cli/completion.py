"""`completion bash`: print a bash completion script generated from this parser."""

from __future__ import annotations

import argparse
import sys

from .. import completion
from .common import PROG, add_command

#: The options `build_parser` gives the program itself (the sub-parser action cannot see its
#: parent; tests/test_completion.py checks this against the real parser).
TOP_OPTIONS = (argparse.Action(["-h", "--help"], "help", nargs=0),
               argparse.Action(["-V", "--version"], "version", nargs=0),
               argparse.Action(["--debug"], "debug", nargs=0))


def register(sub: argparse._SubParsersAction) -> None:
    def cmd_completion(args: argparse.Namespace) -> int:
        nodes = completion.walk(sub._name_parser_map, TOP_OPTIONS)
        sys.stdout.write(completion.bash(nodes, PROG))
        return 0

    p = add_command(sub, "completion", cmd_completion,
                    help="print a shell completion script",
                    description="Print a bash completion script. Use it with\n"
                    "  eval \"$(backburner completion bash)\"              # this shell\n"
                    "  backburner completion bash > /etc/bash_completion.d/backburner")
    p.add_argument("shell", choices=["bash"], help="the shell")
