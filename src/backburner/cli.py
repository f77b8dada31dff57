"""Command line: parse, validate into typed options, call one function, print, map errors.

No business logic and no system paths here.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import sys
from collections.abc import Callable, Sequence

from . import __version__, priority, system
from .errors import BackburnerError, DataError, IOFailure, UsageError

COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {}


def _err(msg: str) -> None:
    print(f"backburner: {msg}", file=sys.stderr, flush=True)


class _Parser(argparse.ArgumentParser):
    """argparse exits 2 on bad input; we want UsageError's status and our one-line format."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}", "see --help")


def command(name: str) -> Callable[[Callable[[argparse.Namespace], int]], Callable[..., int]]:
    def register(fn: Callable[[argparse.Namespace], int]) -> Callable[..., int]:
        COMMANDS[name] = fn
        return fn

    return register


def _policy_from_args(args: argparse.Namespace) -> priority.Policy:
    base = priority.parse_policy(args.policy or "default")
    return base.with_overrides(
        io=priority.IOPrio.parse(args.io) if args.io else None,
        cpu=priority.CPUPolicy.parse(args.cpu) if args.cpu else None,
        io_weight=priority.parse_weight(args.io_weight, "IO weight", 1000)
        if args.io_weight is not None else None,
        cpu_weight=priority.parse_weight(args.cpu_weight, "CPU weight", 10000)
        if args.cpu_weight is not None else None,
    )


def add_policy_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--policy", help="a named policy (see `backburner policies`)")
    p.add_argument("--io", metavar="CLASS", help="IO class: idle, be:0-7, rt:0-7, none")
    p.add_argument("--cpu", metavar="POLICY", help="CPU: idle, batch[:N], nice:N, normal")
    p.add_argument("--io-weight", metavar="N", help="cgroup IO weight 1-1000 (BFQ honours it)")
    p.add_argument("--cpu-weight", metavar="N", help="cgroup CPU weight 1-10000 (100 default)")
    p.add_argument("--no-cgroup", action="store_true", help="do not create a cgroup")


def recover_if_needed() -> None:
    """A crash mid-run is recovered by the next invocation that changes state."""
    if system.is_root() and system.journal_dir().is_dir():
        system.recover(report=_err)


@command("run")
def cmd_run(args: argparse.Namespace) -> int:
    from . import job, spawn

    policy = _policy_from_args(args)
    report = _err if args.verbose else (lambda _m: None)
    if args.pid is not None:
        if args.command:
            raise UsageError("give either --pid or a command, not both")
        done = job.reprioritise(args.pid, policy, use_cgroup=not args.no_cgroup, report=report)
        print(f"backburner: PID {done.pid}: {len(done.threads)} threads re-prioritised"
              + (f", cgroup {', '.join(done.cgroups)}" if done.cgroups else ""), file=sys.stderr)
        return 0
    argv = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not argv:
        raise UsageError("no command to run", "put it after --, e.g. backburner run -- tar xf a")
    if policy.needs_cgroup and not args.no_cgroup:
        recover_if_needed()
    outcome = job.run_job(argv, policy, use_cgroup=not args.no_cgroup, report=report)
    if args.verbose:
        _err(f"job {outcome.pid} {outcome.describe()} after {outcome.wall_s:.3f}s "
             f"(user {outcome.user_s:.3f}s, sys {outcome.sys_s:.3f}s, "
             f"max RSS {outcome.max_rss_kb} KiB)")
    spawn.die_like(outcome)
    return outcome.shell_status  # not reached


@command("policies")
def cmd_policies(args: argparse.Namespace) -> int:
    for name, pol in priority.BUILTIN.items():
        sets = "  ".join(f"{k}={v}" for k, v in pol.settings().items())
        print(f"{name:<11} {sets}")
        print(f"{'':<11} {pol.description}")
    return 0


@command("restore")
def cmd_restore(args: argparse.Namespace) -> int:
    from . import job

    system.require_root("restoring system state")
    undone = system.restore_stale(report=print)
    pruned = job.prune_pid_cgroups(report=print)
    if not undone and not pruned:
        print("nothing to restore: no journal of an interrupted run was found")
    return 0


#: bench options that define the matrix (argparse dest -> flag): --resume takes them from
#: the database, so giving any of them with it is refused rather than silently ignored.
_MATRIX_OPTIONS = {
    "preset": "--preset", "probe": "--probe", "ready_line": "--ready-line",
    "ready_file": "--ready-file", "load": "--load", "policy": "--policy",
    "scheduler": "--scheduler", "device": "--device", "trials": "--trials", "cold": "--cold",
    "warm": "--warm", "seed": "--seed", "settle": "--settle", "timeout": "--timeout",
    "abort_factor": "--abort-factor", "rotational": "--rotational", "output": "--output",
}


@command("bench")
def cmd_bench(args: argparse.Namespace) -> int:
    from .bench import runner, ui

    if args.resume:
        given = [flag for dest, flag in _MATRIX_OPTIONS.items()
                 if getattr(args, dest) not in (None, False)]
        if given:
            raise UsageError("--resume continues the stored configuration; other matrix "
                             "options are not allowed", f"drop {', '.join(given)}")
        job = runner.Resume(args.resume)
        try:
            if job.complete:
                job.run(lambda _p: None, _err)  # marks it finished if needed; builds nothing
                _err(f"{args.resume}: the run is complete ({job.total} trials); "
                     "nothing to resume")
            else:
                system.require_root("bench --resume")
                _err(job.header())
                recover_if_needed()
                with ui.progress_bar() as reporter:
                    job.run(reporter, _err)
        finally:
            job.store.close()
        path = args.resume
    else:
        cfg = runner.config_from_options(
            preset=args.preset, probe=args.probe, loads=args.load, policies=args.policy,
            schedulers=args.scheduler, device=args.device, trials=args.trials, seed=args.seed,
            settle_s=args.settle, timeout_s=args.timeout, abort_factor=args.abort_factor,
            rotational=args.rotational, ready_line=args.ready_line, ready_file=args.ready_file,
            cold=True if args.cold else False if args.warm else None)
        system.require_root("bench (switching IO schedulers, dropping caches, loop devices)")
        path = runner.prepare_output(args.output)
        recover_if_needed()
        _err(runner.header(cfg, path))
        with ui.progress_bar() as reporter:
            store, _ = runner.start(cfg, path, reporter, _err)
        store.close()
    return _show_report(path, html=args.html if args.html else _default_html(path))


def _default_html(db: str) -> str:
    return os.path.splitext(db)[0] + ".html"


def _show_report(path: str, html: str | None = None) -> int:
    from rich.console import Console

    from . import report

    data = report.load(path)
    Console().print(report.render_terminal(data))
    if html:
        report.write_html(data, html)
        print(f"results: {path}\nreport:  {html}")
    return 0


@command("report")
def cmd_report(args: argparse.Namespace) -> int:
    import contextlib

    from rich.console import Console

    from . import plot, report

    formats = plot.parse_formats(args.format)  # a typo fails before anything is printed
    data = report.load(args.database)
    if args.export:
        with (open(args.output, "w") if args.output else contextlib.nullcontext(sys.stdout)
              ) as out:
            report.export(data, args.export, out, tolerance=args.tolerance)
        return 0
    Console().print(report.render_terminal(data, tolerance=args.tolerance))
    if args.html:
        report.write_html(data, args.html, tolerance=args.tolerance)
        print(f"report: {args.html}")
    if args.plot:
        for f in plot.write_plots(data, args.plot, formats, violin=args.violin):
            print(f"plot: {f}")
    return 0


@command("compare")
def cmd_compare(args: argparse.Namespace) -> int:
    from . import report

    a, b = report.load(args.before), report.load(args.after)
    print(report.render_compare(report.compare(a, b, tolerance=args.tolerance)))
    return 0


def _fraction(text: str) -> float:
    """A --tolerance: strictly between 0 and 1 (0.10 is ±10%)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a fraction between 0 and 1 "
                                         "(exclusive), e.g. 0.1 for 10%")
    return value


def _add_bench(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="start-up latency under background load, as a matrix",
                       description="Loads: none, readers:N:seq|rand[:direct|buffered], "
                       "writers:N:seq|rand[:direct|buffered], A+B, "
                       "install-loop[:shell-loop|long-lived], copy, cmd:'COMMAND'. "
                       "Devices: testbed:SIZE, slowdisk:PROFILE:SIZE, or a path.")
    p.add_argument("--preset", help="a named configuration (quick)")
    p.add_argument("--probe", help="the command whose start-up is timed")
    p.add_argument("--ready-line", help="regex on the probe's stdout that means 'started'")
    p.add_argument("--ready-file", help="a file whose appearance means 'started'")
    p.add_argument("--load", action="append", help="background load (repeatable)")
    p.add_argument("--policy", action="append", help="policy for the load (repeatable)")
    p.add_argument("--scheduler", action="append", help="IO scheduler (repeatable)")
    p.add_argument("--device", help="testbed:SIZE, slowdisk:PROFILE:SIZE or a path")
    p.add_argument("--trials", type=int, help="counted trials per cell (plus one warm-up)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--cold", action="store_true", help="drop caches before each counted "
                      "trial (the default; the warm-up round runs warm, as the reference)")
    mode.add_argument("--warm", action="store_true", help="do not drop caches")
    p.add_argument("--seed", type=int, help="seed of the trial order (default: drawn at "
                   "random and recorded)")
    p.add_argument("--settle", type=float, help="seconds the load runs before the probe")
    p.add_argument("--timeout", type=float, help="per-trial timeout in seconds")
    p.add_argument("--abort-factor", type=float,
                   help="a trial over this multiple of the unloaded median is a timeout")
    p.add_argument("--rotational", type=int, choices=(0, 1),
                   help="the testbed's rotational flag (default 1)")
    p.add_argument("--output", "-o", help="result database to create (never overwritten)")
    p.add_argument("--resume", metavar="DB", help="continue an interrupted run (its stored "
                   "configuration: no matrix options)")
    p.add_argument("--html", help="where to write the HTML report (default: next to the DB)")

    r = sub.add_parser("report", help="statistics, plots and exports of a result database")
    r.add_argument("database")
    r.add_argument("--html", help="write a self-contained HTML report here")
    r.add_argument("--plot", metavar="DIR", help="write plots into DIR")
    r.add_argument("--format", default="png", help="plot formats: png, svg, pdf (e.g. png,svg)")
    r.add_argument("--violin", action="store_true", help="violin plots instead of boxes")
    r.add_argument("--export", choices=("csv", "json", "markdown"))
    r.add_argument("--output", "-o", help="file for --export (default: stdout)")
    r.add_argument("--tolerance", type=_fraction, default=0.10,
                   help="'indistinguishable from idle' band, as a fraction (default 0.10)")

    c = sub.add_parser("compare", help="the same cells in two result databases")
    c.add_argument("before")
    c.add_argument("after")
    c.add_argument("--tolerance", type=_fraction, default=0.10,
                   help="'indistinguishable' band, as a fraction between 0 and 1 (default 0.10)")


_EXTENSIONS_BUILTIN = [_add_bench]


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="backburner", description="Keep bulk work on the back burner.")
    parser.add_argument("--version", action="version", version=f"backburner {__version__}")
    parser.add_argument("--debug", action="store_true", help="log details and show tracebacks")
    sub = parser.add_subparsers(dest="cmd", metavar="COMMAND", parser_class=_Parser)

    p = sub.add_parser("run", help="run a bulk job (or re-prioritise one) on the back burner")
    add_policy_options(p)
    p.add_argument("--pid", type=int, help="re-prioritise a running process and its tree")
    p.add_argument("-v", "--verbose", action="store_true", help="say what was applied")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")

    sub.add_parser("policies", help="list the built-in policies and what each sets")
    sub.add_parser("restore", help="undo system changes left by an interrupted run")
    for extend in _EXTENSIONS_BUILTIN + _EXTENSIONS:
        extend(sub)
    return parser


_EXTENSIONS: list[Callable[[argparse._SubParsersAction], None]] = []


# --- slowdisk ---------------------------------------------------------------------------------


@command("slowdisk")
def cmd_slowdisk(args: argparse.Namespace) -> int:
    return _SLOWDISK[args.slowdisk_cmd](args)


def _slowdisk_create(args: argparse.Namespace) -> int:
    from .bench.devices import parse_size
    from .slowdisk import device

    opts = device.CreateOptions(profile=args.profile, image=args.image,
                                size=parse_size(args.size) if args.size else None,
                                read_only=args.read_only, scheduler=args.scheduler)
    device.validate(opts)
    recover_if_needed()
    disk = device.create(opts)
    print(disk.device, flush=True)
    _err(f"{disk.profile} slowdisk {disk.device} on {disk.image} "
         f"({device.human_size(disk.size_bytes)}, {'read-only' if disk.read_only else 'rw'}, "
         f"rotational {int(disk.rotational)}, scheduler {disk.scheduler}); "
         f"remove it with: backburner slowdisk remove {disk.device}")
    return 0


def _slowdisk_remove(args: argparse.Namespace) -> int:
    from .slowdisk import device

    entry = device.remove(args.device)
    what = f"{entry.disk.profile} slowdisk on {entry.disk.image}" if entry.disk else "slowdisk"
    print(f"removed {entry.device} ({what})")
    return 0


def _slowdisk_stats(args: argparse.Namespace) -> int:
    import json

    from .slowdisk import device

    stats = device.read_stats(args.device)
    print(json.dumps(stats, indent=1, sort_keys=True) if args.json
          else device.format_stats(stats))
    return 0


def _slowdisk_profiles(args: argparse.Namespace) -> int:
    import json

    from .slowdisk import device

    print(json.dumps(device.profiles_json(), indent=1) if args.json
          else device.format_profiles())
    return 0


def _slowdisk_list(args: argparse.Namespace) -> int:
    from .slowdisk import device

    found = device.entries()
    for e in found:
        d = e.disk
        info = f"{d.profile:<9} {d.image}  daemon {d.daemon_pid}" if d else ""
        print(f"{e.device or '?':<12} {e.state:<22} {info}".rstrip())
    if not found:
        print("no slowdisk is set up")
    return 0


_SLOWDISK: dict[str, Callable[[argparse.Namespace], int]] = {
    "create": _slowdisk_create, "remove": _slowdisk_remove, "stats": _slowdisk_stats,
    "profiles": _slowdisk_profiles, "list": _slowdisk_list,
}


def _add_slowdisk(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("slowdisk", help="simulated slow hardware: HDD, DVD, SD card",
                       description="A loop device whose IO takes as long as on a slow device: "
                       "a FUSE daemon serves the image with a seek-aware timing model.")
    s = p.add_subparsers(dest="slowdisk_cmd", metavar="ACTION", required=True)
    c = s.add_parser("create", help="serve an image as a slow loop device; prints /dev/loopN")
    c.add_argument("image", help="image file (created sparse if missing and --size is given)")
    c.add_argument("--profile", required=True,
                   help="hdd-5400, hdd-7200, dvd, sdcard or flat:MS (see `slowdisk profiles`)")
    c.add_argument("--size", help="image size, e.g. 8G (a new image is made this big; an "
                   "existing one must be at least this big)")
    c.add_argument("--read-only", action="store_true",
                   help="serve the image read-only (dvd always is)")
    c.add_argument("--scheduler", default="mq-deadline",
                   help="IO scheduler of the loop device: mq-deadline (default), bfq, kyber, "
                   "none")
    r = s.add_parser("remove", help="detach the loop device, stop the daemon, unmount")
    r.add_argument("device", help="/dev/loopN as printed by create")
    st = s.add_parser("stats", help="requests, seeks and modelled busy time, live")
    st.add_argument("device", help="/dev/loopN")
    st.add_argument("--json", action="store_true", help="the raw counters as JSON")
    pr = s.add_parser("profiles", help="the built-in profiles, their parameters and sources")
    pr.add_argument("--json", action="store_true", help="as JSON")
    s.add_parser("list", help="the slowdisks set up now")


_EXTENSIONS.append(_add_slowdisk)


def _debug_before_command(args: Sequence[str]) -> bool:
    """--debug among the options before the command only: a job's own `--debug` (after
    `run --`) or an argument of a subcommand is not ours."""
    for arg in args:
        if arg == "--debug":
            return True
        if arg == "--" or not arg.startswith("-"):
            return False
    return False


def _os_error_message(err: OSError) -> str:
    what = err.strerror or str(err)
    if err.filename is None:
        return what
    names = str(err.filename) + (f" -> {err.filename2}" if err.filename2 is not None else "")
    return f"{names}: {what}"


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    debug = _debug_before_command(args_list)  # until the arguments are parsed
    try:
        args = build_parser().parse_args(args_list)
        debug = args.debug
        logging.basicConfig(level=logging.DEBUG if debug else logging.WARNING,
                            format="backburner: %(name)s: %(message)s")
        if not args.cmd:
            build_parser().print_help()
            return 64
        system.install_termination_handlers()
        return COMMANDS[args.cmd](args)
    except BackburnerError as err:
        if debug:
            raise
        _err(str(err))
        return err.exit_status
    except KeyboardInterrupt:
        _err("interrupted; system state restored")
        return 130
    except system.Terminated as term:
        _err(f"terminated by {term}; system state restored")
        return 128 + term.signum
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except OSError as err:  # a file we were told to read or write: one line, not a traceback
        if debug:
            raise
        failure = IOFailure(_os_error_message(err))
        _err(str(failure))
        return failure.exit_status
    except Exception as err:
        sqlite3 = sys.modules.get("sqlite3")  # not imported unless a database was opened
        if debug or sqlite3 is None or not isinstance(err, sqlite3.Error):
            raise
        data_error = DataError(f"result database: {err}",
                               "the file may be damaged or not written by backburner")
        _err(str(data_error))
        return data_error.exit_status


if __name__ == "__main__":
    sys.exit(main())
