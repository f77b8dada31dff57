"""`python -S -m backburner.readahead [--deadline S] [--order O] [--budget N] [--io C]
[--rebase OLD NEW] PACK`:
the background replay's lean entry point. It loads neither the CLI nor site packages, so
the child a background `readahead replay` starts costs as little as it can while the
start it prepares runs. Its output goes nowhere (the parent checked the pack already);
its exit status is that of the CLI for the same error."""

from __future__ import annotations

import argparse
import sys

from ..errors import BackburnerError
from . import packfile, replay


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="backburner-readahead-replay")
    p.add_argument("--deadline", type=float, default=replay.DEFAULT_DEADLINE_S)
    p.add_argument("--order", default="auto", choices=replay.ORDERS)
    p.add_argument("--budget", type=int)
    p.add_argument("--io")
    p.add_argument("--rebase", nargs=2)
    p.add_argument("pack")
    args = p.parse_args(argv)
    try:
        report = replay.replay(packfile.load(args.pack), replay.ReplayOptions(
            budget=args.budget, deadline_s=args.deadline, order=args.order, io=args.io,
            rebase=tuple(args.rebase) if args.rebase else None))
    except BackburnerError as err:
        print(f"backburner: {err}", file=sys.stderr)
        return err.exit_status
    print(replay.describe(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
