"""`store`: result databases themselves (copying runs between them)."""

from __future__ import annotations

import argparse

from .common import add_command


def _copy(args: argparse.Namespace) -> int:
    """A server that cannot be reached (or a driver that is missing) stops the copy where it
    is: whatever was copied stays, and the same copy, run again, adds the rest."""
    from ..store import Unreachable

    try:
        return _copy_all(args)
    except Unreachable as error:
        raise Unreachable(error.message, f"{error.hint}; then run the same copy again (it "
                          "adds only what the destination lacks)") from None


def _copy_all(args: argparse.Namespace) -> int:
    from ..store import Store
    from ..store.copy import copy

    src = Store.open(args.source, readonly=True)
    try:
        dst = Store.create(args.destination) if _new(args.destination) \
            else Store.open(args.destination)
        try:
            result = copy(src, dst, report=print)
        finally:
            dst.close()
    finally:
        src.close()
    print(f"copied: {result.runs_added} run(s) added, {result.runs_completed} completed, "
          f"{result.runs_unchanged} already there; {result.trials_added} trial(s) added, "
          f"{result.trials_present} already there")
    return 0


def _new(target: str) -> bool:
    """A file that does not exist yet is created; an address gets the schema if it lacks it."""
    import os

    from ..store import looks_like_url

    return looks_like_url(target) or not os.path.exists(target)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("store", help="result databases: copy runs between them",
                       description="Result databases (SQLite files, or PostgreSQL): copy "
                       "the runs of one into another, to pool the results of several "
                       "machines. See docs/guide/store.md.")
    s = p.add_subparsers(dest="store_cmd", metavar="ACTION", required=True)
    c = add_command(s, "copy", _copy, help="copy every run of SOURCE into DESTINATION "
                    "(idempotent: no trial twice; an interrupted copy is finished by "
                    "running it again)")
    c.add_argument("source", help="a result file or postgresql:// address")
    c.add_argument("destination", help="a result file (created if missing) or a "
                   "postgresql:// address")
