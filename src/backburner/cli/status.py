"""`status`: everything on the back burner now, from every source, as the kernel has it."""

from __future__ import annotations

import argparse
import sys

from .common import add_command, add_format

DESCRIPTION = """\
Every process and unit on the back burner now, whoever put it there: jobs of `run`, trees
re-prioritised by `run --pid`, processes a running `govern` governs, and the files `apply`
installed. For each: what was set, by whom, since when, what the kernel has in force now
(IO class, CPU policy and nice, cgroups), and where the two differ. Then the IO scheduler
in force on each disk. It changes nothing."""


def cmd_status(args: argparse.Namespace) -> int:
    from ..status import sources, view

    found = sources.gather()
    sys.stdout.write((view.render_json if args.format == "json" else view.render)(found))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "status", cmd_status, description=DESCRIPTION,
                    help="what is on the back burner now (run, run --pid, govern, apply), "
                    "what the kernel has in force, and where it differs")
    add_format(p, ("text", "json"), what="text, or JSON for machines")
