"""`bench`: start-up latency of a real program under background load, as a matrix."""

from __future__ import annotations

import argparse
import logging
import os

from ..base.errors import UnavailableError, UsageError
from ..bench.names import LOAD_LIFETIMES, PROBE_LAYOUTS
from ..bench.presets import PRESETS
from .common import add_command, deprecated, err, quiet, recover_if_needed
from .report import DB_ENV, add_exports, exports

log = logging.getLogger(__name__)

#: Options that define the run (argparse dest -> config field; None: not a config field):
#: --resume takes them from the database, so giving one with it is refused, not ignored.
_RUN_OPTIONS = {
    "preset": None, "study": None, "probe": "probes", "ready_line": "ready_line",
    "ready_file": "ready_file", "ready": "ready_window", "load": "loads", "policy": "policies",
    "scheduler": "schedulers", "device": "device", "trials": "trials", "warmup": "warmup",
    "cold": None, "warm": None, "seed": None, "settle": "settle_s", "timeout": "timeout_s",
    "abort_factor": "abort_factor", "rotational": "rotational",
    "prepare": "prepare_commands", "setup_variant": None, "setup_variant_during": None,
    "setup_variant_tune": None,
    "shell": "shell", "load_lifetime": "load_lifetime", "block": "block",
    "probe_layout": "probe_layout", "probe_root": "probe_root", "trace": "trace",
    "ignore_failure": "ignore_failure", "output": None, "min_runs": "min_runs",
    "max_runs": "max_runs", "max_time": "max_time_s", "tolerance": "tolerance",
    "net_link": "net_link",
}

DESCRIPTION = """\
Times the cold start of a program (the probe) under background load, for every
combination of IO scheduler x policy of the load x load x probe x setup variant, with
every trial kept, and reports each cell against the same probe unloaded.

The probe runs without a shell, its command split into words (hyperfine's -N, the only
mode: a shell's own cold start would read from the device under test and be timed with
it). The --prepare and --setup-variant commands run through `sh -c` unless --shell says
otherwise; -N (--shell=none) runs them without a shell too, as in hyperfine.

loads (--load, repeatable; "none", the unloaded baseline, is always added):
  readers:N:seq|rand[:OPTION...]         N fio jobs reading their own files
  writers:N:seq|rand[:OPTION...]         N fio jobs writing their own files
      OPTION: direct|buffered; a request size (4k, 1m: default 1m seq, 4k rand);
      passes (whole-file passes, cache dropped before each); s-suite (the BFQ
      authors' S suite's fio settings: buffered:4k:passes)
  A+B                                    several of the above at once
  install-loop[:shell-loop|long-lived]   unpack thousands of small files with fsync
  copy                                   one large file copied over and over
  dpkg-loop[:FILES:SIZE]                 dpkg --root installs and purges a generated .deb
  flatpak-loop[:FILES:SIZE]              flatpak installs and uninstalls a generated bundle
  flatpak-api[:FILES:SIZE]               the same in one process through libflatpak
                                         (an app of 3000 files, 96m by default; on the
                                         device under test, never the system's own)
  cmd:'COMMAND'                          any command (append numbers to
                                         $BACKBURNER_PROGRESS to report its progress)
devices (--device): testbed:SIZE (a loop device made for the run), slowdisk:PROFILE:SIZE
  (simulated slow hardware), or a directory on the disk to test
policies (--policy): a name from `backburner policies`, or io=...,cpu=...,io-weight=...

a network study (--net-link RATE:DELAY[:BUFFER], e.g. 1mbit:0ms:300ms) times, over a
slow link between network namespaces made for the run (real packets, the link's deep
queue), what a user waits for while bulk downloads run; verdicts are against the same
probe over the same link unloaded:
  probes: net:page (a 10 kB page fetched on a new connection; the default),
          net:handshake (a TCP handshake's round trip)
  loads: download:N (N endless downloads at once)
  policies: default (unprotected), background (the downloads' ACKs paced, by cgroup)
  disk options (--scheduler, --device, --cold, --probe-layout, ...) do not apply
"""

EXAMPLES = """\
examples:
  backburner bench --preset quick
  backburner bench --probe 'python3 -c "import json"' --load readers:10:seq \\
      --policy default --policy background --scheduler mq-deadline --scheduler bfq
  backburner bench --probe app='lowriter --terminate_after_init' --load install-loop \\
      --device slowdisk:hdd-5400:8G -r 15 -o results.db
  backburner bench --probe gimp --prepare 'rm -rf ~/.cache/gimp' --load copy
  backburner bench --study office.toml --output postgresql://bench@db.lab/backburner
  backburner bench --net-link 1mbit:0ms --probe net:page --probe net:handshake \\
      --load download:1 --load download:4 --policy default --policy background
  backburner bench --resume results.db
"""


def _duration(text: str) -> float:
    from ..base.quantities import parse_duration

    try:
        return parse_duration(text)
    except UsageError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def _given(args: argparse.Namespace, dest: str) -> bool:
    value = getattr(args, dest)
    return value is not None and value is not False  # (0 is given: `0 in (None, False)`)


def cmd_bench(args: argparse.Namespace) -> int:
    from .. import system
    from ..bench import runner, ui

    report = quiet if args.quiet else err
    if args.no_html and args.export_html:
        raise UsageError("--no-html and --export-html contradict each other",
                         "drop one of them")
    if args.resume:
        given = [_flag(dest) for dest in _RUN_OPTIONS if _given(args, dest)]
        if given:
            raise UsageError("--resume continues the stored configuration; other matrix "
                             "options are not allowed", f"drop {', '.join(given)}")
        job = runner.Resume(args.resume)
        try:
            if job.complete:
                job.run(lambda _p: None, report)  # marks it finished if needed
                report(f"{args.resume}: the run is complete ({job.total} trials); "
                       "nothing to resume")
            else:
                system.require_root("bench --resume")
                report(job.header())
                recover_if_needed()
                with ui.progress_bar(enabled=not args.quiet) as reporter:
                    job.run(reporter, report, show_output=args.show_output)
        finally:
            job.store.close()
        path = args.resume
    else:
        plan, study = _plan(args)
        runner.preflight(plan)
        path = runner.prepare_output(args.output or os.environ.get(DB_ENV))
        recover_if_needed()
        report(runner.header(plan, path))
        path = _start(plan, study, path, args, report)
    return _finish(path, args)


def _plan(args: argparse.Namespace):  # noqa: ANN202 - (Plan, Study | None)
    from ..bench import config, study

    loaded = study.load(args.study) if args.study else None
    for note in loaded.notes if loaded else ():
        err(note)
    options = dict(loaded.options) if loaded else {}
    for dest, field in _RUN_OPTIONS.items():
        if field and _given(args, dest):
            options[field] = getattr(args, dest)
    prepares = [f"before:{p}" for p in args.setup_variant or []]
    prepares += [f"during:{p}" for p in args.setup_variant_during or []]
    prepares += [f"tune:{p}" for p in args.setup_variant_tune or []]
    if prepares:
        options["prepares"] = prepares
    if args.cold or args.warm:
        options["cold"] = bool(args.cold)
    seed = args.seed if args.seed is not None else options.pop("seed", None)
    preset = args.preset or (loaded.preset if loaded else None)
    cfg = config.from_options(preset_name=preset, seed=seed, **options)
    return config.plan(cfg), loaded  # every option checked: nothing touched yet


def _start(plan, study, path: str, args: argparse.Namespace, report) -> str:  # noqa: ANN001
    from ..bench import runner, ui
    from ..store import Unreachable

    extra = {"study": {"path": study.path, "text": study.text}} if study else None
    try:
        with ui.progress_bar(enabled=not args.quiet) as reporter:
            store, _ = runner.start(plan, path, reporter, report, environment=extra,
                                    show_output=args.show_output)
    except UnavailableError as error:
        if isinstance(error, Unreachable) and not args.fallback:
            raise Unreachable(error.message, f"{error.hint}, or give --fallback FILE.db to "
                              "keep the results locally") from None
        if not args.fallback or "://" not in path:
            raise
        report(f"{error}; keeping the results in {args.fallback} instead")
        path = runner.prepare_output(args.fallback)
        with ui.progress_bar(enabled=not args.quiet) as reporter:
            store, _ = runner.start(plan, path, reporter, report, environment=extra,
                                    show_output=args.show_output)
    store.close()
    return path


def _finish(path: str, args: argparse.Namespace) -> int:
    """The report, the exports asked for, and the exit status: 1 when a cell has no
    successful trial (unless --ignore-failure), as hyperfine fails a benchmark that fails."""
    from .. import report
    from ..files import outfile
    from ..report import html as html_report

    log.debug("phase: report")
    data = report.load(path, _this_run(path))
    tolerance = data.runs[-1].config.get("tolerance")  # what the run decided on (None: the
    # band a person notices for each start, `stats.band`)
    if not args.quiet:
        report.console_for().print(report.render_terminal(data, tolerance=tolerance))
    html = args.export_html or (None if "://" in path or args.no_html
                                else os.path.splitext(path)[0] + ".html")
    if html:
        html_report.write_html(data, html, tolerance=tolerance)
    for fmt, target in exports(args):
        with outfile.text_output(target) as out:
            report.export_to(data, fmt, out, tolerance=tolerance)
    if not args.quiet:
        print(f"results: {path}" + (f"\nreport:  {html}" if html else ""))
        print(_answer(data, tolerance), end="")
    failed = [c.label for c in data.cells if not c.samples()]
    if failed and not (args.ignore_failure or data.runs[-1].config.get("ignore_failure")):
        err(f"{len(failed)} cell(s) without a successful trial: {'; '.join(failed[:3])}"
            + ("; ..." if len(failed) > 3 else ""))
        return 1
    return 0


def _answer(data, tolerance: float) -> str:  # noqa: ANN001 - report.ReportData
    """The run's last lines: the comparison it was run for and the commands that apply it
    (`report --recommend`'s; nothing where it has no loaded cell to recommend from)."""
    from ..base.errors import DataError
    from ..report import recommend

    try:
        return recommend.answer(recommend.recommend(data, tolerance=tolerance))
    except DataError:
        return ""


def _this_run(path: str):  # noqa: ANN202 - Filter | None
    """In a shared database, the report after a run is of this machine's last run."""
    if "://" not in path:
        return None
    from ..store import Filter, Store, machine_id

    store = Store.open(path, readonly=True)
    try:
        mine = [r for r in store.runs() if r.machine_id == machine_id()]
    finally:
        store.close()
    return Filter(run=mine[-1].id) if mine else None


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "bench", cmd_bench,
                    help="start-up latency under background load, as a matrix",
                    description=DESCRIPTION, epilog=EXAMPLES)
    what = p.add_argument_group("what is measured")
    what.add_argument("--preset", choices=sorted(PRESETS), help="a named configuration")
    what.add_argument("--study", metavar="FILE.toml", help="the whole matrix from a study "
                      "file (keys named like these options; options given here override it)")
    what.add_argument("--probe", action="append", metavar="[NAME=]COMMAND",
                      help="the command whose start-up is timed; NAME= labels it "
                      "(repeatable: probes are a matrix dimension)")
    what.add_argument("--ready-line", metavar="REGEX",
                      help="a line on the probe's stdout that means 'started' (for programs "
                      "that do not exit by themselves)")
    what.add_argument("--ready-file", metavar="PATH",
                      help="a file whose appearance means 'started'")
    what.add_argument("--ready", metavar="window[:TITLE-REGEX]",
                      help="'started' is the probe's first top-level window shown (whose "
                      "title matches), on a private headless X server (Xvfb)")
    what.add_argument("--load", action="append", metavar="SPEC",
                      help="background load (repeatable; grammar above)")
    what.add_argument("--policy", action="append", metavar="POLICY",
                      help="priority policy of the load (repeatable)")
    what.add_argument("--scheduler", action="append", metavar="NAME",
                      help="IO scheduler: mq-deadline, bfq, kyber, none (repeatable)")
    what.add_argument("--device", metavar="DEVICE", help="testbed:SIZE (default testbed:4G), "
                      "slowdisk:PROFILE:SIZE, or a directory on the disk to test")
    what.add_argument("--net-link", metavar="RATE:DELAY[:BUFFER]",
                      help="a network study instead of a disk one: over a slow link of this "
                      "rate, one-way delay and queue (default 300ms), in namespaces made "
                      "for the run (probes net:page, net:handshake; loads download:N)")
    what.add_argument("-p", "--prepare", action="append", metavar="CMD",
                      help="a command run before every trial (warm-up and counted), un-timed, "
                      "before the cache drop and the load, as hyperfine's --prepare: once "
                      "for every probe, or once per --probe in their order; if it fails, "
                      "so does that trial (with its last lines of stderr)")
    what.add_argument("--setup-variant", action="append", metavar="NAME=COMMAND",
                      help="a setup step after the cache drop, before the probe "
                      "(repeatable: a matrix dimension, 'none' is always added; the command "
                      "gets $BACKBURNER_ROOT and $BACKBURNER_DEVICE)")
    what.add_argument("--setup-variant-during", action="append", metavar="NAME=COMMAND",
                      help="a setup step started together with the probe (as a "
                      "readahead replay at boot)")
    what.add_argument("--setup-variant-tune", action="append",
                      metavar="NAME=SCHEDULER:KEY=VALUE[,...]",
                      help="a scheduler's tunables as a setup variant, e.g. "
                      "si0=bfq:slice_idle=0: written to the device's queue/iosched/ before "
                      "the cell's load and probe (put back after the run); its cells exist "
                      "only under that scheduler")
    what.add_argument("--prepare-during", dest="setup_variant_during", metavar="NAME=COMMAND",
                      action=deprecated(argparse._AppendAction, "--setup-variant-during"),
                      help=argparse.SUPPRESS)
    how = p.add_argument_group("how it is measured")
    how.add_argument("-r", "--runs", "--trials", dest="trials", type=int, metavar="N",
                     help="a fixed number of counted trials per cell: the default mode, "
                     "with 10 (a --preset may choose the other mode, until decided)")
    how.add_argument("-m", "--min-runs", type=int, metavar="N",
                     help="the other mode: run each cell until its verdict is decided "
                     "(slower, or at most a difference a person would notice, ...), with "
                     "at least N trials (default 6); -m, -M or --max-time choose it")
    how.add_argument("-M", "--max-runs", type=int, metavar="N",
                     help="until decided, with at most N trials per cell (default 100)")
    how.add_argument("--max-time", type=_duration, metavar="DURATION",
                     help="until decided, within this much time of trials (90s, 5m, 1h30m); "
                     "a cell still undecided then is reported so")
    how.add_argument("--tolerance", type=float, metavar="X",
                     help="judge cells against the band 1±X instead of the one a person "
                     "notices for the start's length (more than 10%% and 100 ms, at most "
                     "±25%%)")
    how.add_argument("-w", "--warmup", type=int, metavar="N",
                     help="warm-up rounds, run and stored but not counted (default 1)")
    mode = how.add_mutually_exclusive_group()
    mode.add_argument("--cold", action="store_true", help="drop caches before each counted "
                      "trial (the default; warm-up rounds run warm, as the reference)")
    mode.add_argument("--warm", action="store_true", help="do not drop caches")
    how.add_argument("--seed", type=int, help="seed of the trial order (default: drawn at "
                     "random and recorded)")
    how.add_argument("-S", "--shell", metavar="SHELL",
                     help="what the --prepare and --setup-variant commands run in: a shell "
                     "(default sh; a command line such as 'bash --norc'), or none: split into "
                     "words and run directly")
    how.add_argument("-N", dest="shell", action="store_const", const="none",
                     help="--shell=none, as in hyperfine (the probe never has a shell)")
    how.add_argument("--settle", type=float, metavar="S",
                     help="seconds the load runs before the probe (default 2)")
    how.add_argument("--load-lifetime", choices=LOAD_LIFETIMES,
                     help="trial: the load starts and stops around every trial (default); "
                     "cell: it runs through a block of a cell's trials, past BFQ's "
                     "weight-raising time, as a long update does")
    how.add_argument("--block", type=int, metavar="N",
                     help="with --load-lifetime cell: consecutive trials per block (default 4)")
    how.add_argument("--probe-layout", choices=PROBE_LAYOUTS,
                     help="on a testbed: touched (only the files the probe opens, "
                     "contiguous; default), directories (their whole directories, as a "
                     "package install writes them), aged (the same among filler files and "
                     "deletions: fragmented free space)")
    how.add_argument("--probe-root", metavar="DIR|IMAGE",
                     help="use this tree or filesystem image as the probe's root, as it is")
    how.add_argument("--timeout", type=float, metavar="S",
                     help="per-trial timeout in seconds (default 60)")
    how.add_argument("--abort-factor", type=float, metavar="X",
                     help="a trial over X times the unloaded median is a timeout (default 30)")
    how.add_argument("--rotational", type=int, choices=(0, 1),
                     help="the testbed's rotational flag (default 1)")
    how.add_argument("--trace", action="store_true", help="record kernel counters and who "
                     "issued the device's IO during every probe (perf; costs time)")
    out = p.add_argument_group("results")
    out.add_argument("--output", "-o", metavar="DB", help="result database to create (never "
                     "replaced: it holds measurements), or a postgresql:// address (default: "
                     f"${DB_ENV}, else results/bench-DATE.db); the HTML report goes next to a "
                     "file as DB.html unless --export-html says where")
    out.add_argument("--fallback", metavar="FILE.db",
                     help="if the --output server is unreachable, keep the results here")
    out.add_argument("--resume", metavar="DB",
                     help="continue an interrupted run (its stored configuration)")
    add_exports(out)  # --export-html's default: next to a database file
    out.add_argument("--no-html", action="store_true",
                     help="no HTML report next to the database (its plots are most of the time "
                     "a short run takes on a slow machine); `backburner report DB "
                     "--export-html FILE` writes it later")
    out.add_argument("--show-output", action="store_true",
                     help="show the probe's output instead of keeping its stderr's last lines")
    out.add_argument("--ignore-failure", action="store_true",
                     help="exit 0 even when a cell has no successful trial")
    out.add_argument("-q", "--quiet", action="store_true",
                     help="no progress and no table (errors only)")
