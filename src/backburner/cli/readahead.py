"""`readahead` (record, show, replay) and `layout` (order, build-ext4, check): cold starts
on slow media read in one sweep, or laid out so they need none."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from ..base import quantities
from ..base.errors import UsageError
from ..files import outfile
from .common import add_command, add_force, bounded_int, err, finite, recover_if_needed

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..readahead.record import RecordResult
    from ..readahead.replay import ReplayOptions
    from ..readahead.watched import Watched


def _argv(args: argparse.Namespace) -> list[str]:
    return args.command[1:] if args.command[:1] == ["--"] else list(args.command)


def _record(args: argparse.Namespace) -> int:
    from .. import spawn
    from ..readahead import record

    opts = record.RecordOptions(
        output=args.output, mounts=tuple(args.mount or ()),
        read_ahead_kb=None if args.keep_read_ahead else args.read_ahead_kb,
        drop_caches=args.drop_caches, hash=args.hash, force=args.force,
        lookups=args.lookups)
    argv = _argv(args)
    if args.system:
        if argv:
            raise UsageError("give either --system or a command, not both")
        if args.seconds is None:
            raise UsageError("--system needs --seconds", "e.g. --seconds 60")
        if args.lookups:
            raise UsageError("--lookups records a command's start, not the whole system")
        recover_if_needed()

        def ready(watched: Sequence[Watched]) -> None:
            err(f"recording what is read on {', '.join(w.mountpoint for w in watched)} for "
                f"{quantities.fmt_s(args.seconds)} s (SIGTERM or ^C ends it early)")

        err(_recorded(record.record_system(args.seconds, opts, ready)))
        return 0
    if args.seconds is not None:
        raise UsageError("--seconds goes with --system", "a command is recorded until it ends")
    if not argv:
        raise UsageError("no command to record", "put it after --, or use --system")
    recover_if_needed()
    result, outcome = record.record_command(argv, opts)
    err(_recorded(result) + f"; the command {outcome.describe()}")
    spawn.die_like(outcome)
    return outcome.shell_status  # not reached


def _recorded(r: RecordResult) -> str:
    ranges = sum(len(e.ranges) for e in r.pack.entries)
    lost = []
    if r.overflows:
        lost.append(f"{r.overflows} event queue overflows")
    if r.forks_lost:
        lost.append("fork events lost: the process tree may be incomplete")
    if r.gone:
        lost.append(f"{r.gone} files gone before the end")
    if r.order:
        lost.append(f"no order of reads: {r.order}")
    asked = ""
    if r.pack.lookups or r.pack.steps:
        from ..readahead.summary import lookup_counts

        asked = f", {lookup_counts(r.pack)}"
    return (f"recorded {quantities.plural(len(r.pack.entries), 'file')}, "
            f"{quantities.human_size(r.pack.bytes)} in {quantities.plural(ranges, 'range')}{asked} "
            f"into {r.output} ({quantities.human_size(r.size)}) in {quantities.fmt_s(r.seconds)} s"
            + (f" ({'; '.join(lost)})" if lost else ""))


def _show(args: argparse.Namespace) -> int:
    from ..readahead import packfile, summary, verdict

    pack = packfile.load(args.pack)
    print(summary.format_summary(summary.summarize(pack, verify=args.verify), files=args.files))
    found = verdict.load(args.pack)
    if found is not None:
        print(f"verdict   {verdict.describe(found)}")
    return 0


def _replay_options(args: argparse.Namespace) -> ReplayOptions:
    from ..readahead import replay

    return replay.ReplayOptions(
        budget=quantities.parse_size(args.budget, what="--budget") if args.budget else None,
        deadline_s=args.deadline, order=args.order, io=args.io,
        rebase=tuple(args.rebase) if args.rebase else None)


def _replay(args: argparse.Namespace) -> int:
    from ..readahead import replay, verdict

    opts = _replay_options(args)
    found, report, child = verdict.replay_unless_slower(args.pack, opts, args.force,
                                                        background=not args.wait)
    if report is None and child is None:
        assert found is not None
        print(verdict.describe_skip(found))
        return 0
    if child is not None:
        print(f"replaying {args.pack} in the background (PID {child.pid}, deadline "
              f"{quantities.fmt_s(opts.deadline_s)} s)")
    else:
        assert report is not None
        print(replay.describe(report))
    if found is not None:
        print(f"  {verdict.describe(found)}")
    return 0


def _measure(args: argparse.Namespace) -> int:
    from ..readahead import measure, verdict

    argv = _argv(args)
    recover_if_needed()
    v = measure.measure(args.pack, argv, measure.MeasureOptions(args.rounds, args.mode,
                                                                 args.deadline))
    print(verdict.describe(v))
    for note in v.notes:
        err(note)
    return 0


def _order(args: argparse.Namespace) -> int:
    from ..readahead import layout, packfile

    if args.output:
        outfile.check_new(args.output, args.force)
    done = layout.order(packfile.load(args.pack), args.emit, args.root, null=args.null)
    if args.output:  # it names the files of a pack: private, as the pack is
        outfile.write_bytes(args.output, done.emitted.data, outfile.PRIVATE)
    else:
        sys.stdout.buffer.write(done.emitted.data)
        sys.stdout.flush()
    notes = []
    if done.outside:
        notes.append(f"{done.outside} outside {done.root.decode(errors='replace')}")
    if done.emitted.skipped:
        notes.append(f"{done.emitted.skipped} whose names {args.emit} cannot hold"
                     + (" (use list --null)" if args.emit == "list" else ""))
    if notes:
        err(f"{quantities.plural(done.emitted.files, 'file')} ordered; left out: "
            + ", ".join(notes))
    return 0


def _build(args: argparse.Namespace) -> int:
    from ..readahead import ext4image, layout, packfile

    pack = packfile.load(args.pack)
    size = quantities.parse_size(args.size, what="--size", minimum=16 << 20) if args.size else None
    recover_if_needed()
    res = ext4image.build_ext4(pack, ext4image.BuildOptions(args.src, args.image, size,
                                                          args.root, args.hot_region,
                                                          not args.whole_files))
    nodes = ", ".join(f"{n} {k}" for k, n in sorted(res.nodes.items()))
    print(f"built {res.image}: {quantities.human_size(res.size)} ext4 ({nodes}); "
          f"{quantities.plural(res.hot_files, 'hot file')} "
          f"({quantities.human_size(res.hot_bytes)}) "
          + (f"first, from a {quantities.human_size(res.first_pass)} first pass"
             if res.region_at is None else
             f"at the end, from {quantities.human_size(res.region_at)} on")
          + (f"; {quantities.plural(res.split_files, 'file')} in pieces, "
             f"{quantities.human_size(res.split_out)} unread by the start outside the hot region"
             if res.split_files else "")
          + "; verified equal to "
          f"{args.src} in {quantities.fmt_s(res.seconds)} s"
          + (f"; {res.missing} pack files are not in the source" if res.missing else ""))
    for c in (res.before, res.after):
        if c is not None:
            print(f"  {layout.describe_check(c)}")
    note = layout.read_ahead_note(pack)
    if note:
        err(note)
    return 0


def _check(args: argparse.Namespace) -> int:
    from ..readahead import layout, packfile

    pack = packfile.load(args.pack)
    recover_if_needed()
    profile = None if args.profile == "none" else args.profile
    for target in args.targets:
        print(layout.describe_check(layout.check(target, pack, args.root, profile)))
    note = layout.read_ahead_note(pack)
    if note:
        err(note)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    _register_readahead(sub)
    _register_layout(sub)


def _register_readahead(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("readahead", help="record what a start reads; replay it in disk order",
                       description="Record which files and ranges a program's start (or a "
                       "boot) reads into a pack; replay it before or during the next start, "
                       "in physical order on rotating disks.")
    s = p.add_subparsers(dest="readahead_cmd", metavar="ACTION", required=True)
    r = add_command(s, "record", _record, help="record a command's start (or --system)")
    r.add_argument("-o", "--output", required=True,
                   help="the pack to write (an existing one only with --force)")
    add_force(r, "an existing pack")
    r.add_argument("--system", action="store_true",
                   help="record everything read on the machine (but by backburner)")
    r.add_argument("--seconds", type=finite(0, 86400, low_open=True),
                   help="with --system: how long (SIGTERM ends it early)")
    r.add_argument("--mount", action="append", metavar="PATH",
                   help="watch only the filesystem holding PATH (repeatable; default: every "
                   "block-device filesystem)")
    r.add_argument("--read-ahead-kb", type=bounded_int(0, 1 << 20), default=16,
                   help="the devices' read-ahead while recording (put back afterwards)")
    r.add_argument("--keep-read-ahead", action="store_true",
                   help="leave the devices' read-ahead alone")
    r.add_argument("--drop-caches", action="store_true",
                   help="drop the page cache first, so the pack holds only this start")
    r.add_argument("--hash", action="store_true",
                   help="store a digest of each file's recorded bytes")
    r.add_argument("--lookups", action="store_true",
                   help="also record what the start looks up, stats and lists (strace) and "
                   "the order it reads in (perf), for a layout true to it")
    r.add_argument("command", nargs=argparse.REMAINDER, help="-- PROGRAM [ARGS...]")
    sh = add_command(s, "show", _show, help="what a pack holds, stale entries, seeks saved")
    sh.add_argument("pack")
    sh.add_argument("--files", action="store_true", help="list every file")
    sh.add_argument("--verify", action="store_true",
                    help="read the recorded ranges and check their digests (record --hash)")
    rp = add_command(s, "replay", _replay, help="prefetch a pack's ranges in disk order")
    rp.add_argument("pack")
    rp.add_argument("--wait", action="store_true",
                    help="replay in this process and report (default: in the background)")
    rp.add_argument("--budget", metavar="SIZE",
                    help="read at most this much, first-accessed first (default: half the "
                    "available memory)")
    rp.add_argument("--deadline", type=finite(0, 86400, low_open=True), default=30.0,
                    metavar="SECONDS", help="stop by then, whatever is left")
    rp.add_argument("--order", choices=("auto", "physical", "access"), default="auto",
                    help="auto: physical on rotating disks, access order elsewhere")
    rp.add_argument("--io", metavar="CLASS",
                    help="IO class of the replay (default: be:4 for a physical sweep, "
                    "idle for access order)")
    rp.add_argument("--rebase", nargs=2, metavar=("RECORDED", "NOW"),
                    help="look for the files recorded under directory RECORDED under NOW "
                    "(the same filesystem or a copy of its image, mounted elsewhere)")
    rp.add_argument("--force", action="store_true",
                    help="replay even a pack `readahead measure` found to make the start "
                    "slower")
    m = add_command(s, "measure", _measure,
                    help="time the start cold with and without a replay; keep the verdict")
    m.add_argument("pack")
    m.add_argument("--rounds", type=bounded_int(3, 1000), default=5,
                   help="starts each way (default 5)")
    m.add_argument("--mode", choices=("with", "before"), default="with",
                   help="with: the replay launched with the start, as at boot (default); "
                   "before: run to its end first, its time counted")
    m.add_argument("--deadline", type=finite(0, 86400, low_open=True), default=120.0,
                   metavar="SECONDS", help="each replay's deadline")
    m.add_argument("command", nargs=argparse.REMAINDER, help="-- PROGRAM [ARGS...]")


def _register_layout(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("layout", help="images with a pack's files first and contiguous",
                       description="Order a pack's files for mksquashfs or xorriso, build an "
                       "ext4 image with them first (two passes, verified), or check where "
                       "they are in an image.")
    s = p.add_subparsers(dest="layout_cmd", metavar="ACTION", required=True)
    o = add_command(s, "order", _order, help="the pack's files as a sort/weights/list file")
    o.add_argument("pack")
    o.add_argument("--emit", required=True, choices=("mksquashfs-sort", "xorriso-weights",
                                                     "list"))
    o.add_argument("--root", help="the directory that is the image's root (default /)")
    o.add_argument("--null", action="store_true", help="list: NUL-terminated names")
    o.add_argument("-o", "--output",
                   help="write here instead of stdout (an existing file only with --force)")
    add_force(o)
    b = add_command(s, "build-ext4", _build, help="an ext4 image of SRC_DIR, hot files first")
    b.add_argument("--pack", required=True)
    b.add_argument("src", metavar="SRC_DIR")
    b.add_argument("image", metavar="IMAGE", help="the image to create (never overwritten)")
    b.add_argument("--size", help="image size, e.g. 10G (default: the tree plus a quarter)")
    b.add_argument("--root", help="the directory the pack was recorded under that SRC_DIR "
                   "stands for (default: guessed)")
    b.add_argument("--hot-region", choices=("start", "end"), default="start",
                   help="where the hot files go: the image's start (default) or its end, "
                   "with their inodes and directories (a disc's fast outer edge)")
    b.add_argument("--whole-files", action="store_true",
                   help="put large hot files in the hot region whole, not only the ranges "
                   "the start read")
    c = add_command(s, "check", _check, help="how contiguous and ordered the pack's files are")
    c.add_argument("targets", nargs="+", metavar="IMAGE_OR_DIR",
                   help="images (loop-mounted read-only) or directories; several compare")
    c.add_argument("--pack", required=True)
    c.add_argument("--root", help="the pack's directory that the image root stands for "
                   "(default: guessed)")
    c.add_argument("--profile", default="dvd", metavar="NAME",
                   help="predict the cold start's time on a slowdisk of this profile "
                   "(default dvd; none: no prediction)")
