"""`trace`: record what a command asked of the kernel; show it; diff two recordings."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from ..base.errors import UsageError
from ..files import outfile
from .common import (
    add_command,
    add_force,
    add_format,
    bounded_int,
    deprecated,
    err,
    quiet,
    recover_if_needed,
)

if TYPE_CHECKING:
    from ..trace import record

FORMATS = ("text", "markdown", "json")


def _split_command(words: list[str], what: str) -> list[str]:
    argv = words[1:] if words[:1] == ["--"] else words
    if not argv:
        raise UsageError(f"no command to {what}", "put it after --, e.g. -- make -j4")
    return argv


def _check_output(path: str, force: bool = True) -> None:
    """Before anything runs: the file must be a regular one (or none yet), new unless
    --force (an export is replaced: force), and its folder writable."""
    outfile.check_new(path, force)


def _options(args: argparse.Namespace) -> record.Options:
    from ..trace import record

    return record.Options(runs=args.runs, engine=args.engine, overhead=args.overhead,
                          sample_interval=args.sample_ms / 1000)


def _record(args: argparse.Namespace) -> int:
    from .. import spawn
    from ..trace import profile, record

    argv = _split_command(args.command, "trace")
    _check_output(args.output, args.force)
    recover_if_needed()
    report = quiet if args.quiet else err
    prof, last = record.record(argv, _options(args), report=report)
    profile.save(prof, args.output)
    if not args.quiet:
        err(f"{len(prof.runs)} run(s) traced with {prof.engine['name']} into {args.output}; "
            f"see it with: backburner trace show {args.output}")
    spawn.die_like(last)
    return last.shell_status  # not reached


def _emit(fmt: str, lines: list[str], tables: list, data: dict) -> None:
    from ..trace import render

    if fmt == "json":
        sys.stdout.write(render.to_json(data))
    elif fmt == "markdown":
        sys.stdout.write(render.to_markdown(lines, tables))
    else:
        render.write_text(lines, tables)


def _show(args: argparse.Namespace) -> int:
    from ..trace import profile, render

    prof = profile.load(args.file)
    if args.run > len(prof.runs):
        raise UsageError(f"--run {args.run}: {args.file} has {len(prof.runs)} run(s)")
    tables = render.show_tables(prof, by=args.by, run=args.run - 1, top=args.top)
    _emit(args.format, render.header_lines(prof), tables, render.show_json(prof, args.top))
    return 0


def _write_diff(d, args: argparse.Namespace) -> None:
    from ..trace import render

    if args.export_html:
        with outfile.replaced(args.export_html) as f:  # a report: PUBLIC, like bench's
            f.write(render.to_html(d, args.top))
    _emit(args.format, render.diff_header(d), render.diff_tables(d, args.top), d.to_dict())
    if args.export_html:
        err(f"HTML report written to {args.export_html}")


def _diff(args: argparse.Namespace) -> int:
    from ..trace import diff, profile

    if args.export_html:
        _check_output(args.export_html)
    a, b = profile.load(args.a), profile.load(args.b)
    _write_diff(diff.diff(a, b), args)
    return 0


def split_two(words: list[str]) -> tuple[list[str], list[str]]:
    """`-- CMD_A ... -- CMD_B ...` -> the two commands (A may not contain a bare --)."""
    argv = words[1:] if words[:1] == ["--"] else words
    if "--" not in argv:
        raise UsageError("compare needs two commands", "-- CMD_A ARGS -- CMD_B ARGS")
    cut = argv.index("--")
    a, b = argv[:cut], argv[cut + 1:]
    if not a or not b:
        raise UsageError("compare needs two commands, both non-empty",
                         "-- CMD_A ARGS -- CMD_B ARGS")
    return a, b


def _compare(args: argparse.Namespace) -> int:
    from ..trace import diff, profile, record

    argv_a, argv_b = split_two(args.commands)
    outputs = [f"{args.output}-a.json", f"{args.output}-b.json"] if args.output else []
    for path in outputs:
        _check_output(path, args.force)
    if args.export_html:
        _check_output(args.export_html)
    recover_if_needed()
    a, b = record.compare(argv_a, argv_b, _options(args), report=quiet if args.quiet else err)
    for prof, path in zip((a, b), outputs, strict=False):
        profile.save(prof, path)
    if outputs and not args.quiet:
        err(f"traces written to {outputs[0]} and {outputs[1]}")
    _write_diff(diff.diff(a, b), args)
    return 0


def _engines(args: argparse.Namespace) -> int:
    from ..trace import engines

    default = engines.default_name()
    for name, why in engines.status():
        mark = "default" if name == default else "unavailable" if why else "available"
        print(f"{name:<7} {mark:<12} {why or engines.ENGINES[name].note}")
    return 0


#: `compare`'s default: the fewest runs a side that can call a change at p < 0.05 (fully
#: separated, p = 2 / C(8, 4) = 0.029; 3 a side reach only 0.10): its diff is its point.
COMPARE_RUNS = 4


def _add_record_options(p: argparse.ArgumentParser, runs: int = 1) -> None:
    p.add_argument("--runs", type=bounded_int(1, 1000), default=runs,
                   help=f"run each command this many times (default: {runs}; 4 or more a "
                   "side let diff call changes)")
    p.add_argument("--engine", default="auto", choices=("auto", "perf", "strace", "none"),
                   help="tracer: auto = the cheapest that can run here (perf, then strace); "
                   "none = counters only")
    p.add_argument("--overhead", action="store_true",
                   help="also run the command untraced as often, to measure the tracer's "
                   "overhead (traced / untraced wall time)")
    p.add_argument("--sample-ms", type=bounded_int(5, 1000), default=50,
                   help="how often each thread's run-queue wait (schedstat) is sampled")
    add_force(p, "existing trace files")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")


def _add_view_options(p: argparse.ArgumentParser, html: bool = False) -> None:
    add_format(p, FORMATS, what="what is printed: tables, Markdown or JSON")
    p.add_argument("--top", type=bounded_int(1, 100_000), default=25,
                   help="rows per table (changed metrics are always all shown)")
    if html:
        p.add_argument("--export-html", metavar="FILE",
                       help="also write an HTML page with a bar chart (replaced if it exists)")
        p.add_argument("--html", dest="export_html", metavar="FILE", help=argparse.SUPPRESS,
                       action=deprecated(argparse._StoreAction, "--export-html"))


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("trace", help="syscalls and kernel counters of a command; diff two runs",
                       description="What a program asked of the kernel (syscalls per thread, "
                       "with errors per errno) and what the kernel counted meanwhile "
                       "(context switches, page faults, IPIs, PSI, run-queue wait); and "
                       "which of it changed between two programs beyond run-to-run noise.")
    s = p.add_subparsers(dest="trace_cmd", metavar="ACTION", required=True)
    r = add_command(s, "record", _record, help="run a command traced; write a trace file",
                    description="Runs CMD under a tracer and writes a trace file. Exits "
                    "with the command's status (the last run's), or dies of its signal. "
                    "Each run has a PID namespace (and /proc) of its own: what it leaves "
                    "running when it ends is stopped. ^C or SIGTERM to backburner stops "
                    "every run (the command gets SIGTERM), writes nothing and exits 130 / "
                    "143.")
    r.add_argument("-o", "--output", required=True,
                   help="trace file to write (JSON; an existing one only with --force)")
    _add_record_options(r)
    r.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD [ARGS...]")
    sh = add_command(s, "show", _show, help="a trace's syscalls and counters as tables")
    sh.add_argument("file", help="trace file")
    sh.add_argument("--by", choices=("merged", "process", "thread"), default="merged",
                    help="syscalls of all threads merged, or per process / per thread")
    sh.add_argument("--run", type=bounded_int(1, 1_000_000), default=1,
                    help="which run the per-process/thread and interrupt tables show")
    _add_view_options(sh)
    d = add_command(s, "diff", _diff, help="two traces side by side, significant changes first")
    d.add_argument("a", help="trace A (the reference)")
    d.add_argument("b", help="trace B")
    _add_view_options(d, html=True)
    c = add_command(s, "compare", _compare,
                    help="record two commands interleaved, then diff them",
                    description="Runs CMD_A and CMD_B alternately (A B B A ...), each --runs "
                    f"times ({COMPARE_RUNS} by default: the fewest that can show a change), "
                    "traced the same way, then prints the diff (A is the reference). "
                    "Exits 0 once the diff is printed; runs that failed are named in its "
                    "notes. ^C or SIGTERM stops every run and exits 130 / 143 with "
                    "nothing written. CMD_A cannot contain a bare -- (wrap it in sh -c).")
    _add_record_options(c, runs=COMPARE_RUNS)
    c.add_argument("-o", "--output", metavar="PREFIX",
                   help="also keep the traces as PREFIX-a.json and PREFIX-b.json")
    _add_view_options(c, html=True)
    c.add_argument("commands", nargs=argparse.REMAINDER, help="-- CMD_A [ARGS] -- CMD_B [ARGS]")
    add_command(s, "engines", _engines, help="which tracers can run here, cheapest first")
