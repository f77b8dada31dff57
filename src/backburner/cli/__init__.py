"""Command line: parse, call one function, print, map errors to exit statuses.

Each command lives in its own module here with a `register(sub)`; this module builds the
parser from them and turns every `BackburnerError` into one line and its exit status. No
business logic and no system paths live in the CLI.

A command line that names a command imports and registers that command's module alone
(`COMMANDS`, as pip does): building every command's parser was a third of each start
(~30 ms on the host, ~0.3 s in an emulated guest), paid thousands of times by whoever
scripts it. The whole parser is built when a line names no command, an unknown one, asks
the program's own --help or --version, or wants to describe the program (`completion`).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import signal
import sys
import traceback
from collections.abc import Sequence
from types import ModuleType

from .. import __version__
from ..base import interrupts
from ..base.errors import (
    BackburnerError,
    CommandNotExecutable,
    CommandNotFound,
    DataError,
    IOFailure,
    UsageError,
)
from ..base.quantities import one_line
from .common import PROG, HelpFormatter, Parser, err

#: Each command and the module of this package that registers it, in the order `--help`
#: lists them (tests/cli/test_commands.py holds the table to what the modules register).
COMMANDS = {
    "run": "run", "policies": "run", "restore": "run", "status": "status",
    "bench": "bench", "report": "report", "compare": "report", "store": "store",
    "slowdisk": "slowdisk", "govern": "govern", "readahead": "readahead",
    "layout": "readahead", "extents": "extents", "trace": "trace", "apply": "apply",
    "doctor": "doctor", "completion": "completion",
}
#: Commands whose work reads the whole parser.
WHOLE = frozenset({"completion"})


DESCRIPTION = """\
Keep bulk work on the back burner: measure what a fair IO scheduler (BFQ), the idle IO
class and cgroup weights do for the start-up time of a real program under background load
(bench, report, compare), then apply the answer to one job (run), to every known bulk
program by rule (govern), or as the udev rule and systemd drop-ins a distribution ships
(apply). What it changes on the machine is journaled and put back afterwards."""

EPILOG = "Each command has its own help: backburner COMMAND --help."


class OneLineFormatter(logging.Formatter):
    """Every log line one line, whatever a message carries (a process's name, a path): a
    daemon's stderr goes to the journal, where a newline would start a forged entry and an
    escape sequence would drive the terminal of whoever reads it (`units.one_line`)."""

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 (logging's)
        return one_line(super().formatMessage(record))


def command_modules(command: str | None = None) -> list[ModuleType]:
    """The command modules a parser for ``command`` needs: its own, or all of them (None,
    unknown, or a command that describes the whole program), in `--help`'s order."""
    if command in COMMANDS and command not in WHOLE:
        names = [COMMANDS[command]]
    else:
        names = list(dict.fromkeys(COMMANDS.values()))
    return [importlib.import_module(f"{__name__}.{name}") for name in names]


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The program's parser; with ``command``, one that parses that command's lines alone
    (see the module's docstring), as the whole parser does."""
    parser = Parser(prog=PROG, description=DESCRIPTION, epilog=EPILOG,
                    formatter_class=HelpFormatter)
    parser.add_argument("-V", "--version", action="version", version=f"{PROG} {__version__}")
    parser.add_argument("--debug", action="store_true", help="log details and show tracebacks")
    sub = parser.add_subparsers(title="commands", dest="cmd", metavar="COMMAND",
                                parser_class=Parser)
    for module in command_modules(command):
        module.register(sub)
    parser.set_defaults(parser=parser)  # for what describes the whole program (completion)
    return parser


def parser_for(args: Sequence[str]) -> argparse.ArgumentParser:
    """The parser for a command line: the named command's alone when nothing but --debug
    comes before it (the program's own --help and --version describe every command)."""
    for arg in args:
        if arg != "--debug":
            return build_parser(None if arg.startswith("-") else arg)
    return build_parser()


def _debug_before_command(args: Sequence[str]) -> bool:
    """--debug among the options before the command only: a job's own `--debug` (after
    `run --`) or an argument of a subcommand is not ours."""
    for arg in args:
        if arg == "--debug":
            return True
        if arg == "--" or not arg.startswith("-"):
            return False
    return False


#: `run`'s own failures (a bad option, no root, a missing controller, systemd refusing),
#: as nice, env, chroot and timeout report theirs: `run` exits with its job's status, so
#: sysexits 64-78 of its own would read like the job's. 126/127 stay the job's exec errors.
RUN_OWN_FAILURE = 125
JOB_STATUSES = (CommandNotExecutable.exit_status, CommandNotFound.exit_status)


def command_of(args: Sequence[str]) -> str | None:
    """The command word: the first argument that is not one of the program's own options
    (none of which takes a value)."""
    for arg in args:
        if arg == "--" or not arg.startswith("-"):
            return None if arg == "--" else arg
    return None


def _status(status: int, command: str | None) -> int:
    if command == "run" and status not in JOB_STATUSES:
        return RUN_OWN_FAILURE
    return status


def _os_error_message(error: OSError) -> str:
    what = error.strerror or str(error)
    if error.filename is None:
        return what
    names = str(error.filename) + (f" -> {error.filename2}" if error.filename2 is not None
                                   else "")
    return f"{names}: {what}"


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    debug = _debug_before_command(args_list)  # until the arguments are parsed
    command = command_of(args_list)
    try:
        return _main(args_list, debug, command)
    except Exception:
        if command != "run" or debug:
            raise
        traceback.print_exc()  # a bug, told as one; the status still says "run, not the job"
        return RUN_OWN_FAILURE


def _main(args_list: list[str], debug: bool, command: str | None) -> int:
    try:
        args = parser_for(args_list).parse_args(args_list)
        debug = args.debug
        # the module's name is for whoever debugs: a user reads "backburner: what happened"
        logging.basicConfig(level=logging.WARNING, format=f"{PROG}: %(name)s: %(message)s"
                            if debug else f"{PROG}: %(message)s")
        for handler in logging.getLogger().handlers:
            if type(handler.formatter) is logging.Formatter:  # basicConfig's, not a test's
                handler.setFormatter(OneLineFormatter(handler.formatter._fmt))
        if debug:  # ours only: a library's debug chatter is not what --debug is for
            logging.getLogger("backburner").setLevel(logging.DEBUG)
        if not args.cmd:
            raise UsageError("no command given", "see backburner --help")
        interrupts.install()
        status = args.handler(args)
        interrupts.settle()
        return status
    except BackburnerError as error:
        if debug:  # the traceback for whoever debugs; the status stays what it says
            traceback.print_exc()
        err(str(error))
        return _status(error.exit_status, command)
    except KeyboardInterrupt:
        err("interrupted; system state restored")
        return 130
    except interrupts.Terminated as term:
        err(f"terminated by {term}; system state restored")
        return 128 + term.signum
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except OSError as error:  # a file we were told to read or write: one line, no traceback
        if debug:
            traceback.print_exc()
        failure = IOFailure(_os_error_message(error))
        err(str(failure))
        return _status(failure.exit_status, command)
    except Exception as error:
        seen = interrupts.seen()
        if seen is not None:  # what ^C or SIGTERM turned into on its way out (see there)
            how = "interrupted" if seen == signal.SIGINT else (
                f"terminated by {signal.Signals(seen).name}")
            err(f"{how}; system state restored")
            return 128 + seen
        sqlite3 = sys.modules.get("sqlite3")  # not imported unless a database was opened
        if debug or sqlite3 is None or not isinstance(error, sqlite3.Error):
            raise
        data_error = DataError(f"result database: {error}",
                               "the file may be damaged or not written by backburner")
        err(str(data_error))
        return data_error.exit_status
