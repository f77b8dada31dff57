"""`doctor`: what this machine can do and why not, read-only; 0 only when the main job can
run."""

from __future__ import annotations

import argparse
import os
import sys

from ..base.errors import UnavailableError
from .common import add_command, add_format
from .report import DB_ENV

EPILOG = f"""\
exit status:
  0   the main job (backburner bench --preset quick) can run here
  {UnavailableError.exit_status}  it cannot: the missing lines of "What the main job needs" say why
It changes nothing: it reads sysfs, procfs and PATH, and only asks systemd's D-Bus API
and the result database whether they answer."""


def cmd_doctor(args: argparse.Namespace) -> int:
    from .. import doctor

    target = args.db or os.environ.get(DB_ENV)
    report = doctor.evaluate(doctor.read(target, db_from_env=args.db is None))
    render = doctor.render_json if args.format == "json" else doctor.render_text
    sys.stdout.write(render(report))
    return 0 if report.can_run else UnavailableError.exit_status


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "doctor", cmd_doctor, epilog=EPILOG,
                    help="what this machine can do, and the fix for what it cannot",
                    description="One line per capability (root, IO schedulers, cgroups, "
                    "systemd, the network policy, loop devices, FUSE, fanotify, perf, "
                    "strace, fio, the report extras, a configured PostgreSQL): ok or "
                    "missing, what it is for, and the fix.")
    add_format(p, ("text", "json"), what="text, or JSON for machines")
    p.add_argument("--db", metavar="URL", help="also check that this result database "
                   f"opens (default: ${DB_ENV}, when it is a postgresql:// address)")
