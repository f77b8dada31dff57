"""`bench`: start-up latency of a real program under background load, as a matrix."""

from __future__ import annotations

import argparse
import logging
import os

from .. import system
from ..errors import UsageError
from .common import add_command, err, recover_if_needed

log = logging.getLogger(__name__)

#: Options that define the run (argparse dest -> config field; None: not a config field):
#: --resume takes them from the database, so giving one with it is refused, not ignored.
_RUN_OPTIONS = {
    "preset": None, "probe": "probes", "ready_line": "ready_line", "ready_file": "ready_file",
    "load": "loads", "policy": "policies", "scheduler": "schedulers", "device": "device",
    "trials": "trials", "cold": None, "warm": None, "seed": None, "settle": "settle_s",
    "timeout": "timeout_s", "abort_factor": "abort_factor", "rotational": "rotational",
    "output": None,
}


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def cmd_bench(args: argparse.Namespace) -> int:
    from ..bench import config, runner, ui

    if args.resume:
        given = [_flag(dest) for dest in _RUN_OPTIONS if getattr(args, dest) not in (None, False)]
        if given:
            raise UsageError("--resume continues the stored configuration; other matrix "
                             "options are not allowed", f"drop {', '.join(given)}")
        job = runner.Resume(args.resume)
        try:
            if job.complete:
                job.run(lambda _p: None, err)  # marks it finished if needed; builds nothing
                err(f"{args.resume}: the run is complete ({job.total} trials); "
                    "nothing to resume")
            else:
                system.require_root("bench --resume")
                err(job.header())
                recover_if_needed()
                with ui.progress_bar() as reporter:
                    job.run(reporter, err)
        finally:
            job.store.close()
        path = args.resume
    else:
        options = {field: getattr(args, dest) for dest, field in _RUN_OPTIONS.items() if field}
        cfg = config.from_options(preset_name=args.preset, seed=args.seed,
                                  cold=True if args.cold else False if args.warm else None,
                                  **options)
        plan = config.plan(cfg)  # every option checked: nothing has been touched yet
        runner.preflight(plan)
        path = runner.prepare_output(args.output)
        recover_if_needed()
        err(runner.header(plan, path))
        with ui.progress_bar() as reporter:
            store, _ = runner.start(plan, path, reporter, err)
        store.close()
    return _show_report(path, html=args.html if args.html else _default_html(path))


def _default_html(db: str) -> str:
    return os.path.splitext(db)[0] + ".html"


def _show_report(path: str, html: str | None = None) -> int:
    from .. import report

    log.debug("phase: report")
    from ..report import html as html_report

    data = report.load(path)
    report.console_for().print(report.render_terminal(data))
    if html:
        html_report.write_html(data, html)
        print(f"results: {path}\nreport:  {html}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "bench", cmd_bench,
                    help="start-up latency under background load, as a matrix",
                    description="Loads: none, readers:N:seq|rand[:direct|buffered], "
                    "writers:N:seq|rand[:direct|buffered], A+B, "
                    "install-loop[:shell-loop|long-lived], copy, cmd:'COMMAND'. "
                    "Devices: testbed:SIZE, slowdisk:PROFILE:SIZE, or a path.")
    p.add_argument("--preset", help="a named configuration (quick)")
    p.add_argument("--probe", action="append",
                   help="the command whose start-up is timed, or NAME='COMMAND' to label it "
                   "(repeatable: probes are a matrix dimension)")
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
