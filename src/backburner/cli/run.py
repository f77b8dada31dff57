"""`run`, `policies` and `restore`: one bulk job on the back burner, and putting things back."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..base.errors import UsageError
from .common import add_command, err, quiet, recover_if_needed, warn_levers

if TYPE_CHECKING:
    from ..policy import grammar


def policy_from_args(args: argparse.Namespace) -> grammar.Policy:
    from ..kernel import priorities
    from ..policy import grammar

    base = grammar.parse_policy(args.policy or "default")
    return base.with_overrides(
        io=priorities.IOPrio.parse(args.io) if args.io else None,
        cpu=priorities.CPUPolicy.parse(args.cpu) if args.cpu else None,
        io_weight=grammar.parse_weight(args.io_weight, "IO weight", 1000)
        if args.io_weight is not None else None,
        cpu_weight=grammar.parse_weight(args.cpu_weight, "CPU weight", 10000)
        if args.cpu_weight is not None else None,
    )


def add_policy_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--policy", help="a named policy (see `backburner policies`)")
    p.add_argument("--io", metavar="CLASS", help="IO class: idle, be:0-7, rt:0-7, none")
    p.add_argument("--cpu", metavar="POLICY", help="CPU: idle, batch[:N], nice:N, normal")
    p.add_argument("--io-weight", metavar="N", help="cgroup IO weight 1-1000 (BFQ honours it)")
    p.add_argument("--cpu-weight", metavar="N", help="cgroup CPU weight 1-10000 (100 default)")
    p.add_argument("--no-cgroup", action="store_true", help="do not create a cgroup")


def cmd_run(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from .. import spawn, systemd
    from ..run import job

    text = args.policy or "default"
    flush = _take_flush_behind(args)
    policy = policy_from_args(args)
    if flush:
        _check_flush_behind(args, policy, text)
    systemd.check_slice_name(args.slice)  # bad input is refused on every machine alike
    report = err if args.verbose else quiet
    asked = replace(policy, io_weight=None, cpu_weight=None) if args.no_cgroup else policy
    if args.pid is not None:
        if args.command:
            raise UsageError("give either --pid or a command, not both")
        done = job.reprioritise(args.pid, policy, use_cgroup=not args.no_cgroup,
                                force=args.force, report=err)
        print(f"backburner: PID {done.pid}: {len(done.threads)} threads re-prioritised"
              + (f", cgroup {', '.join(done.cgroups)}" if done.cgroups else ""), file=sys.stderr)
        warn_levers([asked], _cwd_of(args.pid), silent=args.quiet)
        return 0
    argv = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not argv:
        raise UsageError("no command to run", "put it after --, e.g. backburner run -- tar xf a")
    net = None
    if args.net is not None:
        from ..net import background

        net = background.check(args.net, args.net_dev, args.netns, args.net_uplink)
    elif any(x is not None for x in (args.net_dev, args.netns, args.net_uplink)):
        raise UsageError("--net-dev, --netns and --net-uplink go with --net background")
    if (policy.needs_cgroup and not args.no_cgroup) or net is not None:
        recover_if_needed()
    outcome = job.run_job(argv, policy, use_cgroup=not args.no_cgroup,
                          report=_warning_first(report, asked, quiet=args.quiet
                                                or not _starts(argv, asked)),
                          slice_name=args.slice, net=net, flush_behind=flush)
    if args.verbose:
        err(f"job {outcome.pid} {outcome.describe()} after {outcome.wall_s:.3f}s "
            f"(user {outcome.user_s:.3f}s, sys {outcome.sys_s:.3f}s, "
            f"max RSS {outcome.max_rss_kb} KiB)")
    spawn.die_like(outcome)
    return outcome.shell_status  # not reached


def _take_flush_behind(args: argparse.Namespace) -> bool:
    """The flush-behind item of --policy (``io=idle,flush-behind``), taken out of it."""
    from ..policy import flush_behind

    if not args.policy:
        return False
    rest, on = flush_behind.split(args.policy)
    args.policy = rest
    return on


def _check_flush_behind(args: argparse.Namespace, policy: grammar.Policy, text: str) -> None:
    """What flush-behind needs, in one line before anything starts: a job of ours (not
    --pid), an IO class to write at, and fanotify (root)."""
    from ..policy import flush_behind
    from ..run import flushing

    if args.pid is not None:
        raise UsageError("flush-behind watches the files of a job run starts, not of --pid",
                         "run the job with `backburner run --policy ... -- COMMAND`")
    flush_behind.check_class(text, policy, "the job's")
    flushing.require()


def _warning_first(report: Callable[[str], None], policy: grammar.Policy, quiet: bool
                   ) -> Callable[[str], None]:
    """`run_job` reports what it applies ("applying ...") once everything is in place,
    right before the job starts: the lever warning goes first then, once, so that none of
    run's own refusals (a policy only bench applies, a control this kernel lacks, no root)
    gets a second line beside it."""
    said = False

    def say(message: str) -> None:
        nonlocal said
        if not said and message.startswith("applying"):
            said = True
            warn_levers([policy], os.getcwd(), silent=quiet)
        report(message)

    return say


def _starts(argv: list[str], policy: grammar.Policy) -> bool:
    """Whether run gets as far as starting the job: the warning is not said beside one of
    run's own failures (not root where a group is made, a command not found or not
    executable: one line, as every failure)."""
    if policy.needs_cgroup and os.geteuid() != 0:
        return False
    path = argv[0] if "/" in argv[0] else shutil.which(argv[0])
    return bool(path) and os.path.isfile(path) and os.access(path, os.X_OK)


def _cwd_of(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return None


def cmd_policies(args: argparse.Namespace) -> int:
    from ..policy import grammar

    width = max(11, *(len(name) for name in grammar.BUILTIN))
    for name, pol in grammar.BUILTIN.items():
        sets = "  ".join(f"{k}={v}" for k, v in pol.settings().items())
        print(f"{name:<{width}} {sets}")
        print(f"{'':<{width}} {pol.description}")
    return 0


def cmd_restore(args: argparse.Namespace) -> int:
    from .. import system
    from ..run import job

    if args.pid is not None:
        job.restore_reprioritised(args.pid, report=print)
        return 0
    system.require_root("restoring system state")
    undone = system.restore_stale(report=print)
    pruned = system.prune_empty_cgroups(report=print)
    running = job.still_reprioritised()
    for pid in running:
        print(f"PID {pid} (re-prioritised by `run --pid`) still runs: left as it is; "
              f"`backburner restore --pid {pid}` puts it back now")
    if not undone and not pruned and not running:
        print("nothing to restore: no journal of an interrupted run was found")
    return 0


RUN_DESCRIPTION = """\
Run COMMAND with a lower IO class, CPU policy and cgroup weights (a policy, or the parts
given), or re-prioritise a running process tree with --pid. stdin, stdout, stderr and the
environment pass through; SIGINT, SIGTERM, SIGHUP and SIGQUIT are forwarded to the job."""

RUN_EPILOG = """\
exit status (as nice, env, chroot and timeout):
  the job's        the job's exit status, exactly; a job killed by a signal makes
                   backburner die of the same signal (a shell shows 128+N)
  125              backburner run itself failed: a bad option, no root, a missing
                   cgroup controller, systemd refusing the scope; one line on stderr,
                   and the job was not started
  126              COMMAND was found but cannot be executed
  127              COMMAND was not found
  130, 143         ^C or SIGTERM before the job started (nothing left changed)
with --pid: 0 once the process tree is re-prioritised, 125 when it cannot be.

examples:
  backburner run --policy background -- tar xf big.tar
  backburner run --io idle --cpu idle -- flatpak update
  backburner run --net background -- apt-get -y dist-upgrade
  backburner run --pid 1234 --io idle"""


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "run", cmd_run,
                    help="run a bulk job (or re-prioritise one) on the back burner",
                    description=RUN_DESCRIPTION, epilog=RUN_EPILOG)
    add_policy_options(p)
    p.add_argument("--pid", type=int, help="re-prioritise a running process and its tree "
                   "(its old priorities are journaled: `restore --pid PID` puts them back; "
                   "once it exits, `restore` removes what is left)")
    p.add_argument("--force", action="store_true", help="with --pid: allow PID 1, kernel "
                   "threads and backburner's own ancestors")
    p.add_argument("--slice", metavar="NAME", default="backburner.slice",
                   help="where systemd owns the cgroups: the slice the job's scope goes in, "
                   "beside user.slice, carrying the weights (default: backburner.slice)")
    p.add_argument("--net", metavar="MODE", help="the job's network traffic: background "
                   "(its downloads yield to everything else on a slow link: their ACKs are "
                   "paced and their window clamped by the queueing delay the link shows; "
                   "its sockets use TCP-LP where the kernel has it)")
    p.add_argument("--net-dev", metavar="DEV", help="with --net: the interface (default: "
                   "the one the default route leaves by)")
    p.add_argument("--netns", metavar="NAME", help="with --net: the job runs in this "
                   "network namespace (`ip netns`), and DEV is one of its interfaces")
    p.add_argument("--net-uplink", metavar="RATE", help="with --net: the uplink's rate "
                   "(e.g. 1mbit); DEV is shaped just below it and the job's uploads go "
                   "behind everything else")
    p.add_argument("-v", "--verbose", action="store_true", help="say what was applied")
    p.add_argument("-q", "--quiet", action="store_true", help="no warning when the IO class "
                   "or weight does nothing on the disk of the working directory, / or /var")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    add_command(sub, "policies", cmd_policies,
                help="list the built-in policies and what each sets",
                description="List the built-in policies that `run --policy`, `apply "
                "--policy` and govern's rules take: for each, the IO class, CPU policy and "
                "cgroup weights it sets, and what it is for.")
    r = add_command(sub, "restore", cmd_restore,
                    help="undo system changes left by an interrupted run",
                    description="Put back what an interrupted run left changed (scheduler "
                    "settings, cgroups, mounts, loop devices, priorities), from the journals "
                    "under the state directory, and remove the empty groups of jobs that "
                    "have ended. A process re-prioritised by `run --pid` that still runs is "
                    "left as it is unless named with --pid. Every command that changes the "
                    "machine does this first; `restore` does it now.")
    r.add_argument("--pid", type=int, help="put back now what `run --pid PID` changed on a "
                   "process that still runs")
