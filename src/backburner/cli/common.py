"""What every command module of the CLI shares: the parser class, messages, option types.

A command module has one `register(sub)` that adds its parser(s) and sets
``handler=function``; the function gets the parsed namespace, calls into the library and
returns an exit status. No business logic and no system paths live in the CLI.

A command module imports at its top only what its parser needs (argparse, this module, the
words its options offer, from light modules such as `bench/names.py`); the work is imported
by the function that runs the command. Every invocation builds the whole parser, so what a
parser imports, every command pays for (`run`, thousands of times in a test suite or in an
emulated guest): tests/cli/test_imports.py keeps the parser light.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Sequence

from ..base.errors import UsageError
from ..base.quantities import one_line

Handler = Callable[[argparse.Namespace], int]
PROG = "backburner"


def err(msg: str) -> None:
    """One line on stderr with the tool's single prefix."""
    print(f"{PROG}: {one_line(msg)}", file=sys.stderr, flush=True)


def quiet(_msg: str) -> None:
    pass


def warn_levers(policies: Sequence[object], cwd: str | None, *, silent: bool = False,
                skip: Sequence[str] = ()) -> None:
    """The one warning line of run, govern and apply: a lever asked for does nothing on the
    disk holding the job's working directory, / or /var (`skip`: disks a rule being
    installed changes). `-q` silences it; the exit status is not the warning's."""
    if silent:
        return
    from .. import systemd
    from ..policy import disks

    owns = systemd.manages_cgroups(systemd.read_facts())
    line = disks.warning(policies, cwd, systemd_owns=owns, skip=skip)  # type: ignore[arg-type]
    if line:
        err(f"warning: {line}")


class Parser(argparse.ArgumentParser):
    """argparse exits 2 on bad input; we want UsageError's status and our one-line format.

    The message names the subcommand once ("report: …"), never the program twice.
    """

    def error(self, message: str) -> None:  # type: ignore[override]
        where = self.prog.removeprefix(PROG).strip()
        raise UsageError(f"{where}: {message}" if where else message, "see --help")


class HelpFormatter(argparse.RawDescriptionHelpFormatter,
                    argparse.ArgumentDefaultsHelpFormatter):
    """Descriptions keep their layout (grammar blocks, examples) and defaults are shown,
    except where the help already says what the default is, or there is nothing to say
    (a flag that is off, an option that is unset)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if "default" in text or action.default in (None, False):
            return text
        return super()._get_help_string(action)


_NOTED: set[str] = set()


def deprecated(base: type[argparse.Action], use: str) -> type[argparse.Action]:
    """An old spelling kept for the scripts that use it: it works as `base` does (e.g.
    argparse._AppendAction) and says once on stderr what replaces it. Hidden from --help,
    the man page and completion (give it help=argparse.SUPPRESS)."""

    class Deprecated(base):  # type: ignore[valid-type, misc]
        def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                      values: object, option_string: str | None = None) -> None:
            if option_string not in _NOTED:
                _NOTED.add(str(option_string))
                err(f"{option_string} is deprecated; use {use}")
            super().__call__(parser, namespace, values, option_string)

    return Deprecated


def add_format(p: argparse.ArgumentParser, choices: Sequence[str], default: str = "text",
               what: str = "what is printed") -> None:
    """The output convention, for the terminal: --format FMT (and --json, short for
    --format json where JSON is one of them). Files are --export-FORMAT FILE and -o FILE."""
    p.add_argument("--format", choices=choices, default=default, help=what)
    if "json" in choices:
        p.add_argument("--json", dest="format", action="store_const", const="json",
                       help="short for --format json")


def add_force(p: argparse.ArgumentParser, what: str = "the -o file") -> None:
    p.add_argument("--force", action="store_true", help=f"replace {what} if it exists")


def add_command(sub: argparse._SubParsersAction, name: str, handler: Handler,
                **kw: object) -> argparse.ArgumentParser:
    kw.setdefault("formatter_class", HelpFormatter)
    if kw.get("help") and not kw.get("description"):  # `COMMAND --help` says what it does
        text = str(kw["help"])
        kw["description"] = text[0].upper() + text[1:] + ("" if text.endswith(".") else ".")
    p = sub.add_parser(name, **kw)  # type: ignore[arg-type]
    p.set_defaults(handler=handler)
    return p


def recover_if_needed() -> None:
    """A crash mid-run is recovered by the next invocation that changes state."""
    from .. import system

    if system.is_root() and system.journal_dir().is_dir():
        system.recover(report=err)


def fraction(text: str) -> float:
    """A --tolerance: strictly between 0 and 1 (0.10 is ±10%)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a fraction between 0 and 1 "
                                         "(exclusive), e.g. 0.1 for 10%")
    return value


def finite(low: float | None = None, high: float | None = None, *,
           low_open: bool = False) -> Callable[[str], float]:
    """An argparse type for a finite float within [low, high] (or (low, high] if low_open)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        bad = (not math.isfinite(value) or (high is not None and value > high)
               or (low is not None and (value <= low if low_open else value < low)))
        if bad:
            lo = "" if low is None else f"{'above' if low_open else 'at least'} {low:g}"
            hi = "" if high is None else f"at most {high:g}"
            raise argparse.ArgumentTypeError(
                f"{text!r} is out of range (a finite number{', ' if lo or hi else ''}"
                f"{' and '.join(x for x in (lo, hi) if x)})")
        return value

    return parse


def bounded_int(low: int, high: int) -> Callable[[str], int]:
    """An argparse type for a whole number within [low, high]."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is out of range ({low}..{high})")
        return value

    return parse
