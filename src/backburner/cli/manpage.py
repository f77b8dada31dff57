"""The manual page backburner(1), generated from the argparse parser with argparse-manpage,
so that it cannot drift from `--help`: one page, a section per command.

argparse-manpage is a build-time tool (`scripts/build-extras` runs
``python3 -m backburner.cli.manpage FILE``), not a dependency of the installed program. Two
things are added to what it renders: the layout of our raw-text descriptions (grammar blocks
and examples stay as typed, in no-fill blocks, instead of being run together) and the
sections a manual page needs that a parser does not hold (EXIT STATUS from errors.py,
ENVIRONMENT, FILES, SEE ALSO). The date comes from SOURCE_DATE_EPOCH when it is set (a
reproducible build), else today.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence

from .. import __version__
from ..base import errors
from . import build_parser

SUMMARY = "keep bulk work on the back burner: prove and apply background IO/CPU priorities"

ENVIRONMENT = [
    ("BACKBURNER_DB", "the result database of bench, report and compare when none is named "
                      "(a file, or a postgresql:// address)"),
    ("BACKBURNER_STATE_DIR", "where the undo journal and the work files are kept (default "
                             "/var/lib/backburner for root, ~/.local/state/backburner else)"),
    ("SOURCE_DATE_EPOCH", "the date this page carries, for reproducible builds"),
]

FILES = [
    ("/var/lib/backburner/journal/", "the undo journal of changes in progress; "
                                     "`backburner restore` puts back what a killed run left"),
    ("/etc/backburner/rules.d/", "rules of the govern daemon"),
    ("/etc/udev/rules.d/65-backburner-scheduler.rules", "written by `backburner apply`"),
    ("/etc/systemd/system/UNIT.d/50-backburner.conf", "written by `backburner apply`"),
]

SEE_ALSO = r"\fBionice\fR(1), \fBnice\fR(1), \fBchrt\fR(1), \fBsystemd-run\fR(1), " \
           r"\fBhyperfine\fR(1), \fBfio\fR(1), \fBperf\fR(1)"


def _escape(line: str) -> str:
    """One line of text for roff: backslashes and hyphens escaped (as argparse-manpage does
    for everything it writes), and a leading ' or . made text, not a request."""
    line = line.replace("\\", "\\\\").replace("-", r"\-")
    return r"\&" + line if line[:1] in (".", "'") else line


def roff_text(text: str) -> str:
    """A help or description text as roff: paragraphs filled, except those laid out by hand
    (an indented line: a grammar or a list of examples), which keep their lines."""
    blocks = []
    for para in re.split(r"\n[ \t]*\n", text.strip("\n")):
        lines = para.splitlines()
        if any(line[:1] in (" ", "\t") for line in lines):
            blocks.append(".nf\n" + "\n".join(_escape(line) for line in lines) + "\n.fi")
        else:
            blocks.append(_escape(" ".join(line.strip() for line in lines)))
    return "\n.sp\n".join(blocks)


def _tagged(items: Sequence[tuple[str, str]]) -> str:
    return "\n".join(f".TP\n.B {_escape(tag)}\n{_escape(text)}" for tag, text in items)


def exit_statuses() -> list[tuple[str, str]]:
    """0, 1 and every status of errors.py, with what it means (its class's docstring)."""
    rows = [("0", "success"),
            ("1", "a result that is not an error: a bench cell without a successful trial, "
                  "a compare gate that fails, an extents mismatch (see each command)")]
    seen = {errors.BackburnerError.exit_status}
    rows.append((str(errors.BackburnerError.exit_status),
                 "an internal error without a status of its own (a bug: please report it)"))
    for name, status in errors.EXIT_STATUSES.items():
        if status not in seen:  # the first class of a status says what it means
            seen.add(status)
            doc = " ".join((getattr(errors, name).__doc__ or "").split()).split(". ")[0]
            rows.append((str(status), doc.rstrip(".")))
    rows.append(("125", "run only: run's own failure (a bad option, no root, a missing cgroup "
                        "controller, systemd refusing); the job's status otherwise"))
    rows.sort(key=lambda row: int(row[0]))
    return rows


def _with_epilogs(parser: argparse.ArgumentParser) -> None:
    """argparse-manpage renders a command's description only: its epilog (the examples)
    joins it."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action._name_parser_map.values():
                if sub.epilog:
                    sub.description = f"{sub.description or ''}\n\n{sub.epilog}".strip("\n")
                    sub.epilog = None
                _with_epilogs(sub)


def render(date: str | None = None) -> str:
    """The whole page, as roff."""
    from argparse_manpage.manpage import Manpage

    parser = build_parser()
    _with_epilogs(parser)
    data = {"project_name": "backburner", "version": __version__, "description": SUMMARY,
            "manual_title": "backburner manual"}
    if date:
        data["date"] = date
    page = Manpage(parser, data, format="pretty")
    page.mf.format_text = roff_text  # on the instance: every text it renders goes through it
    page.add_section("exit status", ">", _tagged(exit_statuses()))
    page.add_section("environment", ">", _tagged(ENVIRONMENT))
    page.add_section("files", ">", _tagged(FILES))
    page.add_section("see also", ">", SEE_ALSO)
    return str(page)


def main(argv: Sequence[str] | None = None) -> int:
    """``python3 -m backburner.cli.manpage [FILE]``: write the page (to stdout without FILE)."""
    from ..files.outfile import text_output

    args = list(sys.argv[1:] if argv is None else argv)
    with text_output(args[0] if args else None) as out:
        out.write(render())
    return 0


if __name__ == "__main__":
    sys.exit(main())
