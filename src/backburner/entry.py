"""The program's entry point (`backburner`, `python -m backburner`): the CLI, plus one clear
line when a command needs an optional dependency that is not installed.

`run`, `policies`, `restore`, `apply` and `completion` need nothing beyond the standard
library; the rest come as extras (`pip install 'backburner[report]'`), so a machine that only
runs bulk jobs politely does not carry numpy, matplotlib or FUSE bindings.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from .base.errors import UnavailableError

#: Optional import -> the extra that provides it (pyproject.toml's optional-dependencies).
EXTRAS = {"numpy": "report", "scipy": "report", "matplotlib": "report", "rich": "report",
          "mfusepy": "slowdisk", "psycopg": "postgres"}


def missing_extra(error: ModuleNotFoundError) -> UnavailableError | None:
    """The one-line error for an optional dependency that is missing, or None when the
    missing module is not one of ours to explain (then it is a bug: traceback)."""
    top = (error.name or "").split(".")[0]
    extra = EXTRAS.get(top)
    if extra is None:
        return None
    return UnavailableError(f"this command needs {top}, which is not installed",
                            f"install the {extra} extra: pip install 'backburner[{extra}]'")


def main(argv: Sequence[str] | None = None) -> int:
    try:
        from .cli import main as cli_main
    except KeyboardInterrupt:  # ^C while the program loads: nothing was done yet
        print("backburner: interrupted", file=sys.stderr)
        return 130
    try:
        status = cli_main(argv)
    except ModuleNotFoundError as error:
        explained = missing_extra(error)
        args = sys.argv[1:] if argv is None else list(argv)
        if explained is None or "--debug" in args[:1]:
            raise
        print(f"backburner: {explained}", file=sys.stderr)
        status = explained.exit_status
    if argv is None:  # the program itself, about to exit: nothing may change its status now
        from .base import interrupts

        interrupts.finished()
    return status
