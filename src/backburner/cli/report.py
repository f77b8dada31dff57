"""`report` and `compare`: statistics, plots and exports of result databases, and two
databases (or the machines, kernels or runs of one) side by side."""

from __future__ import annotations

import argparse
import os
import time

from .. import outfile
from ..errors import UsageError
from ..store import Filter
from .common import add_command, fraction

DB_ENV = "BACKBURNER_DB"


def database(args: argparse.Namespace, given: str | None) -> str:
    """The database named on the command line, else $BACKBURNER_DB."""
    target = given or os.environ.get(DB_ENV)
    if not target:
        raise UsageError("no result database given", f"name one, or set {DB_ENV}")
    return target


def selection(args: argparse.Namespace) -> Filter | None:
    if args.run is None and args.machine is None and args.since is None:
        return None
    return Filter(run=args.run, machine=args.machine, since=args.since)


def _date(text: str) -> float:
    """--since: YYYY-MM-DD or YYYY-MM-DDTHH:MM, local time."""
    for fmt in ("%Y-%m-%d", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M"):
        try:
            return time.mktime(time.strptime(text, fmt))
        except ValueError:
            continue
    raise argparse.ArgumentTypeError(f"{text!r} is not a date (use YYYY-MM-DD)")


def cmd_report(args: argparse.Namespace) -> int:
    from .. import plot, report
    from ..report import html

    formats = plot.parse_formats(args.format)  # a typo fails before anything is printed
    data = report.load(database(args, args.database), selection(args))
    if args.export:
        with outfile.text_output(args.output) as out:
            report.export(data, args.export, out, tolerance=args.tolerance)
        return 0
    report.console_for().print(report.render_terminal(data, tolerance=args.tolerance))
    if args.html:
        html.write_html(data, args.html, tolerance=args.tolerance)
        print(f"report: {args.html}")
    if args.plot:
        for f in plot.write_plots(data, args.plot, formats, violin=args.violin,
                                  tolerance=args.tolerance):
            print(f"plot: {f}")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from .. import report

    if args.by:
        if args.after:
            raise UsageError("--by compares the groups of one database", "give one database")
        data = report.load(database(args, args.before), selection(args))
        results = report.compare_groups(data, args.by, tolerance=args.tolerance)
        for result in results:
            print(report.render_compare(result))
        if args.plot:
            from .. import plot

            for f in plot.write_group_plots(data, args.by, args.plot):
                print(f"plot: {f}")
        return 0
    if not args.after:
        raise UsageError("compare needs two databases, or one with --by machine|kernel|run")
    a = report.load(database(args, args.before), selection(args))
    b = report.load(args.after, selection(args))
    print(report.render_compare(report.compare(a, b, tolerance=args.tolerance)))
    return 0


def _filters(p: argparse.ArgumentParser) -> None:
    p.add_argument("--run", type=int, help="only this run (its id in the database)")
    p.add_argument("--machine", help="only runs of this machine (host name, or 6+ characters "
                   "of its machine id)")
    p.add_argument("--since", type=_date, help="only runs started on or after this date "
                   "(YYYY-MM-DD)")


def register(sub: argparse._SubParsersAction) -> None:
    from ..report.data import GROUPINGS
    from ..report.export.registry import FORMATS

    r = add_command(sub, "report", cmd_report,
                    help="statistics, plots and exports of a result database")
    r.add_argument("database", nargs="?",
                   help=f"a result file, or a postgresql:// address (default: ${DB_ENV})")
    _filters(r)
    r.add_argument("--html", help="write a self-contained HTML report here")
    r.add_argument("--plot", metavar="DIR", help="write plots into DIR")
    r.add_argument("--format", default="png", help="plot formats: png, svg, pdf (e.g. png,svg)")
    r.add_argument("--violin", action="store_true", help="violin plots instead of boxes")
    r.add_argument("--export", choices=FORMATS)
    r.add_argument("--output", "-o", help="file for --export (default: stdout)")
    r.add_argument("--tolerance", type=fraction, default=0.10,
                   help="'indistinguishable from idle' band, as a fraction")

    c = add_command(sub, "compare", cmd_compare,
                    help="the same cells in two result databases, or across the machines, "
                    "kernels or runs of one")
    c.add_argument("before", nargs="?", help=f"database A (default: ${DB_ENV})")
    c.add_argument("after", nargs="?", help="database B")
    c.add_argument("--by", choices=GROUPINGS,
                   help="compare the groups of one database: each against the first")
    _filters(c)
    c.add_argument("--plot", metavar="DIR", help="with --by: one box per group, per cell")
    c.add_argument("--tolerance", type=fraction, default=0.10,
                   help="'indistinguishable' band, as a fraction between 0 and 1")
