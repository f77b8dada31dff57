"""Command line: parse, validate into typed options, call one function, print, map errors.

No business logic and no system paths here.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Sequence

from . import __version__, priority, system
from .errors import BackburnerError, UsageError

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
        system.restore_stale(report=lambda m: _err(f"recovering: {m}"))


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


def _bench_config(args: argparse.Namespace):  # noqa: ANN202 - BenchConfig, imported lazily
    from .bench import presets, runner

    if args.preset:
        cfg = presets.get(args.preset)
    else:
        if not args.probe:
            raise UsageError("bench needs --probe COMMAND or --preset NAME")
        cfg = runner.BenchConfig(probe=args.probe, loads=["none"], policies=["default"],
                                 schedulers=["mq-deadline", "bfq"])
    overrides = {
        "probe": args.probe, "loads": args.load, "policies": args.policy,
        "schedulers": args.scheduler, "device": args.device, "trials": args.trials,
        "seed": args.seed, "settle_s": args.settle, "timeout_s": args.timeout,
        "abort_factor": args.abort_factor, "rotational": args.rotational,
        "ready_line": args.ready_line, "ready_file": args.ready_file,
    }
    for key, value in overrides.items():
        if value is not None:
            setattr(cfg, key, value)
    if args.warm:
        cfg.cold = False
    if args.load and "none" not in cfg.loads:
        cfg.loads.insert(0, "none")  # every loaded cell needs its unloaded baseline
    return cfg


@command("bench")
def cmd_bench(args: argparse.Namespace) -> int:
    import time

    from .bench import runner, ui

    if args.resume:
        recover_if_needed()
        with ui.progress_bar() as reporter:
            store, _ = runner.resume(args.resume, reporter, _err)
        path = args.resume
    else:
        cfg = _bench_config(args)
        cfg.validate()
        system.require_root("bench (switching IO schedulers, dropping caches, loop devices)")
        path = args.output or time.strftime("results/bench-%Y%m%d-%H%M%S.db")
        if os.path.exists(path):
            from .store import Store

            Store.create(path)  # raises the "never overwritten" error
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        recover_if_needed()
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
        formats = tuple(f.strip() for f in args.format.split(",") if f.strip())
        for f in plot.write_plots(data, args.plot, formats, violin=args.violin):
            print(f"plot: {f}")
    return 0


@command("compare")
def cmd_compare(args: argparse.Namespace) -> int:
    from . import report

    a, b = report.load(args.before), report.load(args.after)
    print(report.render_compare(report.compare(a, b, tolerance=args.tolerance)))
    return 0


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
    p.add_argument("--cold", action="store_true", help="drop caches before each trial "
                   "(the default)")
    p.add_argument("--warm", action="store_true", help="do not drop caches")
    p.add_argument("--seed", type=int, help="seed of the trial order")
    p.add_argument("--settle", type=float, help="seconds the load runs before the probe")
    p.add_argument("--timeout", type=float, help="per-trial timeout in seconds")
    p.add_argument("--abort-factor", type=float,
                   help="a trial over this multiple of the unloaded median is a timeout")
    p.add_argument("--rotational", type=int, choices=(0, 1),
                   help="the testbed's rotational flag (default 1)")
    p.add_argument("--output", "-o", help="result database to create (never overwritten)")
    p.add_argument("--resume", metavar="DB", help="continue an interrupted run")
    p.add_argument("--html", help="where to write the HTML report (default: next to the DB)")

    r = sub.add_parser("report", help="statistics, plots and exports of a result database")
    r.add_argument("database")
    r.add_argument("--html", help="write a self-contained HTML report here")
    r.add_argument("--plot", metavar="DIR", help="write plots into DIR")
    r.add_argument("--format", default="png", help="plot formats, e.g. png,svg")
    r.add_argument("--violin", action="store_true", help="violin plots instead of boxes")
    r.add_argument("--export", choices=("csv", "json", "markdown"))
    r.add_argument("--output", "-o", help="file for --export (default: stdout)")
    r.add_argument("--tolerance", type=float, default=0.10,
                   help="'indistinguishable from idle' band, as a fraction (default 0.10)")

    c = sub.add_parser("compare", help="the same cells in two result databases")
    c.add_argument("before")
    c.add_argument("after")
    c.add_argument("--tolerance", type=float, default=0.10)


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


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args_list
    logging.basicConfig(level=logging.DEBUG if debug else logging.WARNING,
                        format="backburner: %(name)s: %(message)s")
    try:
        args = build_parser().parse_args(args_list)
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


if __name__ == "__main__":
    sys.exit(main())
