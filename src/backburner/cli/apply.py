"""`apply`: install what a distribution would ship (a udev scheduler rule, systemd drop-ins
for bulk-work services), print it (--dry-run), or take it out again (--remove)."""

from __future__ import annotations

import argparse
import os

from ..apply.names import DEFAULT_KERNEL, DEVICE_CLASSES, NET_MODES, NET_SERVICE
from ..base.errors import NotFoundError, UnavailableError, UsageError
from .common import add_command, add_format, err, recover_if_needed, warn_levers

EPILOG = """\
examples:
  backburner apply --scheduler bfq                       # BFQ for every spinning disk
  backburner apply --scheduler recommended               # a rule per class of disk
  backburner apply --scheduler bfq --devices nvme --iocost   # NVMe: BFQ, and io.cost on
  backburner apply --scheduler bfq --devices all --unit apt-daily-upgrade --unit backup.service
  backburner apply --unit packagekit --policy gentle --dry-run
  backburner apply --unit apt-daily-upgrade --net background   # its downloads too
  backburner apply --root image/ --scheduler bfq --unit apt-daily-upgrade   # an image build
  backburner apply --status                              # installed? as apply writes it? live?
  backburner apply --remove

files:
  /etc/udev/rules.d/65-backburner-scheduler.rules
  /etc/udev/rules.d/66-backburner-iocost.rules   (with --iocost)
  /etc/systemd/system/UNIT.d/50-backburner.conf
  /etc/systemd/system/backburner.slice      (with drop-ins of a policy with weights)

exit status of --status:
  0   every file apply wrote is as it writes it now, and live (on the running system)
  1   installed, not live: a disk without the rule's scheduler, a drop-in systemd has not
      loaded, a running unit's processes not at the policy
  2   drifted: a file is not what apply would write now (edited, another version)
  3   nothing installed
"""


def cmd_apply(args: argparse.Namespace) -> int:
    from ..apply import diskrules
    from ..apply import install as apply
    from ..kernel import priorities
    from ..policy import grammar

    if args.status:
        return _status(args)
    if args.format != "text":
        raise UsageError("--format/--json is for the output of --status")
    if args.remove:
        if args.scheduler or args.unit or args.net or args.iocost:
            raise UsageError("--remove takes every file apply wrote; give no "
                             "--scheduler/--unit/--net/--iocost")
        recover_if_needed()
        removed = apply.remove(args.root, report=print)
        if not removed:
            print(f"nothing to remove: no file written by backburner apply under {args.root}")
        elif args.root == "/":
            err(apply.REMOVE_HINT)
        return 0
    if args.scheduler:
        apply.check_scheduler(args.scheduler, force=args.force)
    rules = diskrules.scheduler_rules(args.scheduler, args.devices, args.kernel) \
        if args.scheduler else []
    if args.iocost_model is not None and not args.iocost:
        raise UsageError("--iocost-model goes with --iocost")
    costs = diskrules.iocost_rules(args.devices, args.kernel, args.iocost_model) \
        if args.iocost else []
    if args.devices is not None and not (rules or costs):
        raise UsageError("--devices says which disks --scheduler or --iocost is for")
    policy = grammar.parse_policy(args.policy).with_overrides(
        io=priorities.IOPrio.parse(args.io) if args.io else None,
        cpu=priorities.CPUPolicy.parse(args.cpu) if args.cpu else None,
        io_weight=args.io_weight, cpu_weight=args.cpu_weight)
    files = apply.plan(rules, args.unit, policy, args.net, costs)
    # a dry run refuses what the run refuses (it only need not be root)
    if costs and os.path.abspath(args.root) == "/" and not args.force:
        from ..kernel import cgroups

        diskrules.check_iocost(cgroups.unified_root())
    if args.net and os.path.abspath(args.root) == "/" and not args.force:
        _check_net_here()
    if args.unit and not args.force:
        _check_units([*args.unit, *([NET_SERVICE] if args.net else [])], args.root)
    if args.dry_run:
        apply.preflight(files, args.root, force=args.force, as_root=False)
        print(apply.render(files, args.root), end="")
        return 0
    recover_if_needed()
    apply.install(files, args.root, force=args.force, report=print)
    if args.root == "/":
        err(apply.RELOAD_HINT)
        if args.unit:  # a unit's working directory is / unless it says otherwise
            changed = [d.name for r in [*rules, *costs]
                       for d in diskrules.matches(r.kernel, r.rotational)]
            warn_levers([policy], None, silent=args.quiet, skip=changed)
    return 0


def _check_net_here() -> None:
    """systemd attaches a unit's BPFProgram= only on its cgroup2 tree: on this system's
    cgroup v1 alone the drop-ins would hold nothing back."""
    from ..net import background

    if background.attribution() != "cgroup2":
        raise UnavailableError("--net background: systemd attaches the programs "
                               "(BPFProgram=) only on a cgroup2 tree, and none is mounted "
                               "here", "on cgroup v1 alone: backburner run --net background "
                               "(--force writes the files anyway)")


def _check_units(units: list[str], root: str) -> None:
    """Every unit exists: asked of systemd on the running system, looked for under root."""
    from ..apply import install as apply
    from ..apply import status as applied

    if os.path.abspath(root) != "/":
        apply.check_units(units, root)
        return
    with applied.running_systemd() as view:
        apply.check_units(units, root, applied.unit_known(view) if view else None)


def _status(args: argparse.Namespace) -> int:
    from ..apply import status as applied

    if args.scheduler or args.unit or args.net or args.remove or args.dry_run or args.iocost:
        raise UsageError("--status reads what apply installed; give no --scheduler, --unit, "
                         "--iocost, --remove or --dry-run")
    if not os.path.isdir(args.root):
        raise NotFoundError(f"root {args.root} is not a directory")
    if os.path.abspath(args.root) != "/":
        st = applied.status(args.root, live=False)
    else:
        with applied.running_systemd() as view:
            st = applied.status("/", view)
    print((applied.render_json if args.format == "json" else applied.render)(st), end="")
    return st.exit_status


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "apply", cmd_apply, epilog=EPILOG,
                    help="install a udev IO-scheduler rule and systemd drop-ins for bulk work",
                    description="Write what a distribution would ship: a udev rule selecting "
                    "an IO scheduler for matching disks, and a drop-in per bulk-work service "
                    "with the IO class, CPU policy and weights of a policy. All or nothing; "
                    "`backburner restore` undoes an interrupted apply.")
    p.add_argument("--scheduler", metavar="NAME", help="IO scheduler for the matching disks "
                   "(bfq, mq-deadline, kyber, none), or `recommended`: a rule per class of "
                   "disk with the scheduler docs/measurements/ssd.md recommends for it")
    p.add_argument("--devices", metavar="CLASS", type=_disk_class,
                   choices=sorted(DEVICE_CLASSES),
                   help="the class of disk the rules match: "
                   + ", ".join(DEVICE_CLASSES) + " (default: rotational for a "
                   "scheduler; every class for recommended and --iocost)")
    p.add_argument("--iocost", action="store_true",
                   help="turn on cgroup v2's io.cost for the matching disks (a udev rule "
                   "writing io.cost.qos at every boot): io.weight then acts whatever the "
                   "scheduler, on buffered writeback too")
    p.add_argument("--iocost-model", metavar="PARAMS",
                   help="with --iocost: io.cost.model's linear parameters, e.g. "
                   "'rbps=500000000 rseqiops=60000 rrandiops=30000 wbps=400000000 "
                   "wseqiops=50000 wrandiops=25000' (default: the kernel's model)")
    p.add_argument("--kernel", metavar="GLOBS",
                   help="kernel device names the rules match, globs joined by | (default: "
                   "the class's: " + DEFAULT_KERNEL + ", without nvme* for "
                   "non-rotational, nvme* for nvme)")
    p.add_argument("--unit", action="append", default=[], metavar="UNIT",
                   help="a bulk-work service to put on the back burner (repeatable)")
    p.add_argument("--net", metavar="MODE", choices=NET_MODES,
                   help="the units' network traffic: background (their groups get the "
                   f"network service's BPF programs, and want {NET_SERVICE})")
    p.add_argument("--policy", default="background",
                   help="the policy of the drop-ins (see `backburner policies`)")
    p.add_argument("--io", metavar="CLASS", help="IO class: idle, be:0-7, rt:0-7")
    p.add_argument("--cpu", metavar="POLICY", help="CPU: idle, batch[:N], nice:N, normal")
    p.add_argument("--io-weight", metavar="N", type=_weight(1000), help="IOWeight= (1-1000)")
    p.add_argument("--cpu-weight", metavar="N", type=_weight(10000),
                   help="CPUWeight= (1-10000)")
    p.add_argument("--root", metavar="DIR", default="/",
                   help="install under DIR instead of / (a staging root for an image)")
    p.add_argument("--dry-run", action="store_true", help="print the files, change nothing "
                   "(refusing what apply would refuse, with the same exit status)")
    p.add_argument("--force", action="store_true",
                   help="replace a file at our paths that backburner did not write; take a "
                   "scheduler name neither mainline Linux nor this machine has, or a unit "
                   "that does not exist (yet)")
    p.add_argument("--remove", action="store_true", help="take out every file apply wrote")
    p.add_argument("-q", "--quiet", action="store_true", help="no warning when the policy's "
                   "IO class or weight does nothing on the disk of / or /var")
    p.add_argument("--status", action="store_true",
                   help="what apply installed, whether it is what apply writes now, and "
                   "whether it is live (exit status 0 live, 1 not live, 2 drifted, 3 none)")
    add_format(p, ("text", "json"), what="the output of --status: text, or JSON for machines")


def _disk_class(text: str) -> str:
    """--devices: a class of disk, or one line naming the classes (before argparse's own
    list of choices, which completion offers)."""
    from ..apply import diskrules

    try:
        diskrules.class_match(text)
    except UsageError as error:
        raise argparse.ArgumentTypeError(f"{error.message}; {error.hint}") from None
    return text


def _weight(top: int):  # noqa: ANN202 - an argparse type
    def parse(text: str) -> int:
        from ..policy import grammar

        try:
            return grammar.parse_weight(text, "weight", top)
        except UsageError as error:
            raise argparse.ArgumentTypeError(error.message) from None

    return parse
