"""`govern`: the daemon that puts known bulk work on the back burner, and its tools."""

from __future__ import annotations

import argparse
import json
import logging

from ..base import quantities
from .common import add_command, add_format, err, recover_if_needed


def _run(args: argparse.Namespace) -> int:
    from ..govern import daemon

    logging.getLogger("backburner.govern").setLevel(
        logging.WARNING if args.quiet else logging.INFO)
    if not args.dry_run:
        recover_if_needed()
    stopped = daemon.run(daemon.Options(rules_dir=args.rules, dry_run=args.dry_run,
                                        defaults=not args.no_defaults,
                                        ready_file=args.ready_file,
                                        no_exec_filter=args.no_exec_filter,
                                        quiet=args.quiet))
    err(f"govern: {stopped.reason}; "
        + ("nothing was changed (dry run)" if args.dry_run else
           "everything it changed is put back ("
           + quantities.plural(stopped.governed, "process was", "processes were") + " governed)"))
    return 0


def _net(args: argparse.Namespace) -> int:
    from ..net import service
    from ..system.bpf import bpf_program_settings
    from ..systemd.notify import sd_notify

    plan = service.check(args.dev, args.netns, args.uplink)
    recover_if_needed()
    where = f"{plan.target.dev}" + (f" in network namespace {plan.target.ns}"
                                    if plan.target.ns else "")

    def ready(_applied: object) -> None:
        err(f"govern net: the background policy on {where}; units attach "
            + ", ".join(f"BPFProgram={p}" for p in bpf_program_settings(plan.root)))
        sd_notify(f"READY=1\nSTATUS=the background policy on {where}")

    how = service.serve(plan, ready)
    err(f"govern net: {how}; the programs are unpinned and {where} is as it was")
    return 0


def _status(args: argparse.Namespace) -> int:
    from ..govern import state, views

    st = state.read()
    print(json.dumps(st, indent=1) if args.format == "json" else views.format_status(st))
    return 0


def _check(args: argparse.Namespace) -> int:
    from ..govern import views

    result = views.check(args.dir, defaults=not args.no_defaults)
    print(views.format_check(result))
    return 65 if result.errors else 0


def _explain(args: argparse.Namespace) -> int:
    from ..govern import views

    print(views.format_explain(views.explain_pid(args.pid, args.rules,
                                                 defaults=not args.no_defaults)))
    return 0


def _rules_options(p: argparse.ArgumentParser, positional: bool = False) -> None:
    if positional:
        p.add_argument("dir", nargs="?", metavar="DIR",
                       help="rules directory (default: /etc/backburner/rules.d)")
    else:
        p.add_argument("--rules", metavar="DIR",
                       help="rules directory (default: /etc/backburner/rules.d)")
    p.add_argument("--no-defaults", action="store_true",
                   help="leave out the built-in rules shipped with backburner")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("govern", help="a daemon that puts known bulk work on the back burner",
                       description="Watch every program started (kernel process events) and "
                       "put those the rules name on the back burner: priorities on every "
                       "thread, cgroup weights, pauses while interactive work is stalled on "
                       "IO. Everything is put back when it stops. See docs/guide/govern.md.")
    s = p.add_subparsers(dest="govern_cmd", metavar="ACTION", required=True)
    r = add_command(s, "run", _run, help="the daemon, in the foreground (the systemd unit "
                    "runs this)")
    _rules_options(r)
    r.add_argument("--dry-run", action="store_true",
                   help="log what would be done and change nothing")
    r.add_argument("--ready-file", metavar="PATH",
                   help="create PATH (a new file, in a directory only root can write) once "
                   "subscribed to process events and /proc is scanned")
    r.add_argument("-q", "--quiet", action="store_true",
                   help="log only problems, not each governed process and each pause, and no "
                   "warning when the rules' IO class or weight does nothing on / or /var")
    r.add_argument("--no-exec-filter", action="store_true",
                   help="take every exec from the process connector instead of having the "
                   "kernel filter them by program name (a perf tracepoint)")
    n = add_command(s, "net", _net, help="the network background policy for systemd units "
                    "(the unit backburner-net.service runs this)",
                    description="Pin the network background policy's BPF programs in bpffs "
                    "for units' BPFProgram= (`backburner apply --unit UNIT --net background` "
                    "writes those lines), put its HTB classes on DEV, and pace the traffic of "
                    "every group the programs are attached to, until SIGTERM or ^C; then "
                    "everything is put back. See docs/guide/network.md.")
    n.add_argument("--dev", metavar="DEV", help="the interface (default: the one the "
                   "default route leaves by)")
    n.add_argument("--netns", metavar="NAME", help="DEV is in this network namespace "
                   "(`ip netns`)")
    n.add_argument("--uplink", metavar="RATE", help="the uplink's rate (e.g. 1mbit): DEV is "
                   "shaped just below it and the units' uploads go behind everything else")
    st = add_command(s, "status", _status,
                     help="each governed process: rule, what was set, since when")
    add_format(st, ("text", "json"), what="text, or the status file as it is (JSON)")
    c = add_command(s, "check", _check, help="validate rules; show which running processes "
                    "each would match")
    _rules_options(c, positional=True)
    e = add_command(s, "explain", _explain,
                    help="which rule matches this process and why (or why none does)")
    e.add_argument("pid", type=int, help="a process ID")
    _rules_options(e)
