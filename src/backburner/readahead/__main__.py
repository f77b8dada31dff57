"""`python -S -m backburner.readahead [--deadline S] [--order O] [--budget N] [--io C]
[--rebase OLD NEW] -- PACK`:
the background replay's lean entry point. It loads neither the CLI nor site packages, so
the child a background `readahead replay` starts costs as little as it can while the
start it prepares runs. Its output goes nowhere (the parent checked the pack already);
its exit status is that of the CLI for the same error."""

from __future__ import annotations

import sys

from ..errors import BackburnerError, UsageError
from . import packfile, replay


def parse(argv: list[str]) -> tuple[str, replay.ReplayOptions]:
    """The arguments `replay.background_argv` writes. Not argparse: its help formatter
    imports shutil, and with it three compression libraries, in a process whose whole
    point is to start cheaply. Raises UsageError (64)."""
    opts: dict[str, object] = {}
    args = list(argv)
    try:
        while args and args[0] != "--":
            flag = args.pop(0)
            if flag == "--deadline":
                opts["deadline_s"] = float(args.pop(0))
            elif flag == "--order" and args[0] in replay.ORDERS:
                opts["order"] = args.pop(0)
            elif flag == "--budget":
                opts["budget"] = int(args.pop(0))
            elif flag == "--io":
                opts["io"] = args.pop(0)
            elif flag == "--rebase":
                opts["rebase"] = (args.pop(0), args.pop(0))
            else:
                raise UsageError(f"unknown argument {flag!r}")
        if len(args) != 2:
            raise UsageError("expected -- PACK at the end")
    except (IndexError, ValueError):
        raise UsageError(f"bad arguments: {' '.join(argv)}") from None
    return args[1], replay.ReplayOptions(**opts)  # type: ignore[arg-type]


def main(argv: list[str] | None = None) -> int:
    try:
        pack, opts = parse(sys.argv[1:] if argv is None else argv)
        report = replay.replay(packfile.load(pack), opts)
    except BackburnerError as err:
        print(f"backburner: {err}", file=sys.stderr)
        return err.exit_status
    print(replay.describe(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
