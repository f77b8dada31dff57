"""`completion SHELL`: print a completion script for bash, zsh or fish, generated from this
program's own parser (see `backburner.cli.shells`)."""

from __future__ import annotations

import argparse
import sys

from .common import add_command

#: The shells a script is generated for. `shells`, which writes the scripts, is imported by
#: the command alone: it needs dataclasses, which no parser does.
SHELLS = ("bash", "zsh", "fish")

DESCRIPTION = """\
Print a completion script generated from this program's parser. Use it with
  eval "$(backburner completion bash)"                       # bash, this shell
  source <(backburner completion zsh)                         # zsh, this shell
  backburner completion fish | source                         # fish, this shell
or install it where each shell looks (scripts/build-extras writes all three):
  backburner completion bash > /usr/share/bash-completion/completions/backburner
  backburner completion zsh > /usr/share/zsh/vendor-completions/_backburner
  backburner completion fish > /usr/share/fish/vendor_completions.d/backburner.fish"""


def cmd_completion(args: argparse.Namespace) -> int:
    from . import shells

    sys.stdout.write(shells.script(args.parser, args.shell))  # the program's own parser
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "completion", cmd_completion,
                    help="print a shell completion script (bash, zsh, fish)",
                    description=DESCRIPTION)
    p.add_argument("shell", choices=SHELLS, help="the shell")
