"""`report` and `compare`: statistics, plots and exports of result databases, and two
databases (or the machines, kernels or runs of one) side by side."""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import TYPE_CHECKING

from ..base.errors import DataError, UsageError
from ..files import outfile
from ..report.names import EXPORT_FORMATS, GROUPINGS
from .common import add_command, add_format, deprecated, err, finite, fraction

if TYPE_CHECKING:
    from ..store import Filter

DB_ENV = "BACKBURNER_DB"
#: what --format can send to the terminal: the table, or an export format
TERMINAL = ("text", *EXPORT_FORMATS)
EXPORT_HELP = {"json": "JSON (docs/reference/json-schema.md)", "markdown": "Markdown tables",
               "csv": "CSV (one row per trial)", "hyperfine-json": "hyperfine's JSON"}


def database(args: argparse.Namespace, given: str | None) -> str:
    """The database named on the command line, else $BACKBURNER_DB."""
    target = given or os.environ.get(DB_ENV)
    if not target:
        raise UsageError("no result database given", f"name one, or set {DB_ENV}")
    return target


def selection(args: argparse.Namespace) -> Filter | None:
    if args.run is None and args.machine is None and args.since is None:
        return None
    from ..store import Filter

    return Filter(run=args.run, machine=args.machine, since=args.since)


def percent(text: str) -> float:
    """--fail-if-slower: a percentage, 0 to 1000 (10 means 10%)."""
    return finite(0.0, 1000.0)(text) / 100


def _date(text: str) -> float:
    """--since: YYYY-MM-DD or YYYY-MM-DDTHH:MM, local time."""
    for fmt in ("%Y-%m-%d", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M"):
        try:
            return time.mktime(time.strptime(text, fmt))
        except ValueError:
            continue
    raise argparse.ArgumentTypeError(f"{text!r} is not a date (use YYYY-MM-DD)")


def cmd_report(args: argparse.Namespace) -> int:
    from .. import report
    from ..report.plot_formats import parse_formats

    terminal, plot_formats = _formats(args)
    formats = parse_formats(plot_formats)  # a typo fails before anything is printed
    exports = _exports(args)
    for _fmt, path in exports:
        outfile.check_target(path)  # a device or a directory: refused before the work
    if args.plot or args.export_html:
        # matplotlib only for what draws, imported here so that a missing one stops the
        # command before anything is printed
        from ..report import plot
    data = report.load(database(args, args.database), selection(args))
    if args.tolerance is None:
        args.tolerance = data.asked_tolerance
    if args.recommend:
        from ..report import recommend

        if terminal != "text":
            raise UsageError("--recommend prints text", "drop --format, or --recommend")
        print(recommend.render(recommend.recommend(data, tolerance=args.tolerance)), end="")
        return 0
    if args.export:  # the old spelling, as it was: only the export, to -o or stdout
        with outfile.text_output(args.output) as out:
            report.export_to(data, args.export, out, tolerance=args.tolerance)
        return 0
    if terminal == "text":
        report.console_for().print(report.render_terminal(data, tolerance=args.tolerance))
    else:
        with outfile.text_output(None) as out:
            report.export_to(data, terminal, out, tolerance=args.tolerance)
    notice = print if terminal == "text" else err  # stdout carries only the data then
    for fmt, path in exports:
        with outfile.text_output(path) as out:
            report.export_to(data, fmt, out, tolerance=args.tolerance)
    if args.export_html:
        from ..report import html

        html.write_html(data, args.export_html, tolerance=args.tolerance)
        notice(f"report: {args.export_html}")
    if args.plot:
        for f in plot.write_plots(data, args.plot, formats, violin=args.violin,
                                  tolerance=args.tolerance):
            notice(f"plot: {f}")
    return 0


def _formats(args: argparse.Namespace) -> tuple[str, str]:
    """(what the terminal gets, the plot formats). --format png,svg is the old spelling of
    --plot-format: it still works, with a note."""
    if args.format in TERMINAL:
        return args.format, args.plot_format
    err("--format with plot formats is deprecated; use --plot-format")
    return "text", args.format


def _exports(args: argparse.Namespace) -> list[tuple[str, str]]:
    if args.output and not args.export:
        raise UsageError("-o goes with --export", "use --export-FORMAT FILE")
    return exports(args)


def exports(args: argparse.Namespace) -> list[tuple[str, str]]:
    """(format, file) of every --export-FORMAT FILE given (--export-html apart)."""
    return [(fmt, getattr(args, _export_dest(fmt))) for fmt in EXPORT_FORMATS
            if getattr(args, _export_dest(fmt))]


def _export_dest(fmt: str) -> str:
    return "export_" + fmt.replace("-", "_")


def cmd_compare(args: argparse.Namespace) -> int:
    from .. import report

    color = sys.stdout.isatty()
    if args.by:
        if args.after:
            raise UsageError("--by compares the groups of one database", "give one database")
        data = report.load(database(args, args.before), selection(args))
        results = report.compare_groups(data, args.by, tolerance=args.tolerance)
        for result in results:
            print(report.render_compare(result, color=color))
        if args.plot:
            from ..report import plot_groups

            for f in plot_groups.write_group_plots(data, args.by, args.plot):
                print(f"plot: {f}")
    else:
        if not args.after:
            raise UsageError("compare needs two databases, or one with --by machine|kernel|run")
        a = report.load(database(args, args.before), selection(args))
        b = report.load(args.after, selection(args))
        results = [report.compare_reports(a, b, tolerance=args.tolerance)]
        print(report.render_compare(results[0], color=color))
    if (args.fail_if_slower is not None or args.fail_if_changed) \
            and any(not result.rows for result in results):
        raise DataError("the gate compared nothing: no cell in common",
                        "a gate that compares nothing must not pass: run the same cells "
                        "(probe, scheduler, load, policy, preparation) in both")
    failing = [f for result in results for f in report.gate(
        result, slower_than=args.fail_if_slower, changed=args.fail_if_changed)]
    if failing:
        err(f"{len(failing)} cell(s) fail the gate: " + "; ".join(failing))
        return 1
    return 0


def _filters(p: argparse.ArgumentParser) -> None:
    p.add_argument("--run", type=int, help="only this run (its id in the database)")
    p.add_argument("--machine", help="only runs of this machine (host name, or 6+ characters "
                   "of its machine id)")
    p.add_argument("--since", type=_date, help="only runs started on or after this date "
                   "(YYYY-MM-DD)")


class _TerminalFormats(tuple):
    """--format's choices: what the terminal can get. A list of plot formats (png,svg: what
    --format meant before --plot-format) passes argparse's check too, for `_formats` to
    take with a deprecation note; help and completion show only the real choices."""

    def __contains__(self, value: object) -> bool:
        if tuple.__contains__(self, value):
            return True
        from ..report.plot_formats import FORMATS as PLOTS

        words = str(value).lower().split(",")
        return bool(value) and all(w.strip() in PLOTS for w in words)


def add_exports(p: argparse.ArgumentParser) -> None:
    """--export-FORMAT FILE for every export format, and --export-html FILE (report and
    bench): each file written whole, replaced if it exists (as hyperfine's exports are)."""
    for fmt in EXPORT_FORMATS:
        p.add_argument(f"--export-{fmt}", dest=_export_dest(fmt), metavar="FILE",
                       help=f"also write the results as {EXPORT_HELP[fmt]} to FILE")
    p.add_argument("--export-html", metavar="FILE",
                   help="also write a self-contained HTML report (tables, plots) to FILE")


def register(sub: argparse._SubParsersAction) -> None:
    r = add_command(sub, "report", cmd_report,
                    help="statistics, plots and exports of a result database")
    r.add_argument("database", nargs="?",
                   help=f"a result file, or a postgresql:// address (default: ${DB_ENV})")
    _filters(r)
    r.add_argument("--recommend", action="store_true",
                   help="the best scheduler and policy for each load, with the evidence, "
                   "the commands that apply it and what this machine limits")
    add_format(r, _TerminalFormats(TERMINAL), what="what is printed: the table (text), or "
               "the results as JSON, Markdown, CSV or hyperfine's JSON")
    add_exports(r)
    r.add_argument("--plot", metavar="DIR", help="write plots into DIR")
    r.add_argument("--plot-format", default="png", metavar="FMT,...",
                   help="plot formats: png, svg, pdf (e.g. png,svg)")
    r.add_argument("--violin", action="store_true", help="violin plots instead of boxes")
    # the old spellings, kept for the scripts that use them (docs/reference/cli.md)
    r.add_argument("--html", dest="export_html", help=argparse.SUPPRESS,
                   action=deprecated(argparse._StoreAction, "--export-html"))
    r.add_argument("--export", choices=EXPORT_FORMATS, help=argparse.SUPPRESS,
                   action=deprecated(argparse._StoreAction,
                                     "--export-FORMAT FILE, or --format FORMAT for stdout"))
    r.add_argument("--output", "-o", help=argparse.SUPPRESS,
                   action=deprecated(argparse._StoreAction, "--export-FORMAT FILE"))
    r.add_argument("--tolerance", type=fraction,
                   help="the verdicts' band 1±X, as a fraction (default: the one the "
                   "runs were decided with, if they gave one; else what a person notices "
                   "for the start's length: more than 10%% and 100 ms, at most ±25%%)")

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
                   help="'equivalent' band, as a fraction between 0 and 1")
    c.add_argument("--fail-if-slower", type=percent, metavar="PCT",
                   help="exit 1 if a cell of B is slower than A by more than PCT percent "
                   "(its whole B/A interval above 1 + PCT/100): a CI regression gate; "
                   "exit 65 if no cell is in common (nothing was compared)")
    c.add_argument("--fail-if-changed", action="store_true",
                   help="exit 1 if a cell changed either way beyond the tolerance (65 if "
                   "no cell is in common)")
