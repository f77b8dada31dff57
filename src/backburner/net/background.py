"""`run --net background`: one job's traffic on the back burner on a real interface.

The interface is the user's (or the one the default route leaves by); the job runs in a
cgroup v2 group of its own, whose packets and sockets the policy (`policy.background`,
adaptive: the link's rate is not known here) holds back: its ACKs paced, its window
clamped, its sockets on TCP-LP where the kernel has it, and with `--net-uplink` its uploads
behind everything else. Where no cgroup v2 hierarchy is mounted, the job's group is one of
the v1 net_cls controller instead (`netcls`): its ACKs paced and its uploads behind,
known by its class id. Everything is checked
before anything changes, and every piece is a change of the caller's transaction, so the
interface is as before after the job, ^C or SIGTERM, and after a SIGKILL `restore` puts
it back.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from .. import system, systemd
from ..base.errors import ExistsError, NotFoundError, UnavailableError, UsageError
from ..kernel import cgroups
from ..kernel.bpf import calls as bpf
from ..kernel.bpf import cgroup_programs
from ..system.change import run_tool
from . import link, netcls, policy, tcpopts, testbed

MODES = ("background",)


@dataclass(frozen=True)
class Target:
    """Where the policy goes: `dev` in the named network namespace `ns` (None: ours);
    `cc`: the job's sockets' congestion control (TCP-LP where the kernel has it);
    `uplink_bit`: the uplink's rate, when the user gave it (the interface is then shaped
    just below it, the job's uploads behind everything else); `attribution`: how the
    job's packets are known (`policy.ATTRIBUTIONS`)."""

    dev: str
    ns: str | None = None
    cc: str | None = None
    uplink_bit: int | None = None
    attribution: str = "cgroup2"

    @property
    def netns_path(self) -> str | None:
        return system.netns_path(self.ns) if self.ns else None


def default_dev(ns: str | None) -> str:
    """The interface the default route leaves by."""
    res = run_tool(["ip", *(["-n", ns] if ns else []), "-j", "route", "show", "default"])
    routes = json.loads(res.stdout or "[]") if res.status == 0 else []
    for route in routes:
        if route.get("dev"):
            return str(route["dev"])
    raise NotFoundError("no default route to find the interface by", "give --net-dev DEV")


#: The options that name the interface, its namespace and the uplink's rate, as `run`
#: spells them (`govern net` passes its own)
RUN_OPTIONS = ("--net-dev", "--netns", "--net-uplink")


def check_given(dev: str | None, ns: str | None, uplink: str | None,
                options: tuple[str, str, str] = RUN_OPTIONS) -> int | None:
    """What the user gave, checked before anything else (root included): an empty value
    is refused (one line, 64), never taken as "the default" (`--net-dev "$UNSET"` would
    shape the default route's interface); returns the uplink's rate in bit/s."""
    for value, option in zip((dev, ns, uplink), options, strict=True):
        if value is not None and not value.strip():
            raise UsageError(f"{option} is empty", f"give a value, or leave {option} out")
    if dev is not None and not _interface_name(dev):
        raise UsageError(f"{options[0]} {dev!r} is not an interface name",
                         "at most 15 characters, no '/', ':' or white space; see `ip link`")
    if ns is not None and (ns in (".", "..") or "/" in ns or "\0" in ns or len(ns) > 255):
        raise UsageError(f"{options[1]} {ns!r} is not a network namespace's name",
                         "see `ip netns list`")
    if uplink is None:
        return None
    uplink_bit = link.parse_rate(uplink, f" ({options[2]})")
    policy.check_uplink(uplink_bit, f"{uplink!r} ({options[2]})")
    return uplink_bit


def _interface_name(name: str) -> bool:
    """What the kernel takes as an interface's name (dev_valid_name)."""
    return (0 < len(name) < 16 and name not in (".", "..")
            and not any(c in "/:" or c.isspace() or c == "\0" for c in name))


def check(mode: str, dev: str | None, ns: str | None, uplink: str | None = None, *,
          what: str = "--net", probe_parent: str | None = None,
          options: tuple[str, str, str] = RUN_OPTIONS) -> Target:
    """Everything `run --net` needs, asked before anything changes; one line otherwise.
    `what` names who asks; `probe_parent`: where the kernel probe's throwaway group goes
    (`tcpopts.check`); `options`: the options that gave `dev`, `ns` and `uplink`."""
    if mode not in MODES:
        raise UsageError(f"unknown --net mode {mode!r}: {', '.join(MODES)}")
    uplink_bit = check_given(dev, ns, uplink, options)
    if ns is not None and system.net.netns_identity(ns) is None:
        raise NotFoundError(f"no network namespace {ns!r}", "see `ip netns list`")
    system.require_root("shaping a job's traffic on an interface")
    under_systemd = probe_parent is None and systemd.manages_cgroups(systemd.read_facts())
    # without a cgroup2 mount systemd (if it is PID 1) runs on v1 alone: no BPFProgram=
    by_classid = attribution() == "net_cls"
    target = Target(dev or default_dev(ns), ns,
                    None if by_classid else tcpopts.low_priority_cc(), uplink_bit,
                    "net_cls" if by_classid else "cgroup2")
    if system.link_info(ns, target.dev) is None:
        where = f" in network namespace {ns}" if ns else ""
        raise NotFoundError(f"no such interface: {target.dev}{where}", "see `ip link`")
    for q in system.qdiscs(ns, target.dev):
        if q.get("root") and q.get("handle") not in ("0:", None):
            raise ExistsError(f"{target.dev} already has a root qdisc ({q.get('kind')} "
                              f"{q.get('handle')}): not replacing someone's shaping",
                              "another run or an administrator put it there: remove it "
                              "first, or give another --net-dev")
    if by_classid:
        require_net_cls(what)
        return target
    scope_pins = None
    if under_systemd:
        # no group of ours there: the job gets a transient scope with the programs
        # pinned for systemd to attach, and the kernel probe likewise
        if not bpf.bpffs_mounted(bpf.BPFFS):
            raise UnavailableError(f"{what} where systemd owns the cgroup tree needs a BPF "
                                   f"filesystem at {bpf.BPFFS}, and none is mounted")
        scope_pins = bpf.BPFFS
    require_kernel(what, target.cc, probe_parent, scope_pins)
    return target


def require_kernel(what: str, cc: str | None = None, probe_parent: str | None = None,
                   scope_pins: str | None = None) -> None:
    """What the policy needs of this machine on any interface (one line and 69 when it
    lacks it): `what` names who asks (`run --net`, bench's background policy); `cc`: the
    congestion control the job's sockets are to get; `probe_parent`, `scope_pins`: where
    the kernel probe runs (`tcpopts.check`)."""
    if cgroups.unified_root() is None:
        raise UnavailableError(f"{what} needs a cgroup v2 hierarchy to attribute the job's "
                               "packets, and none is mounted")
    if not testbed.qdisc_known("htb"):
        raise UnavailableError(f"{what} needs the htb qdisc, which this kernel lacks")
    os.close(cgroup_programs.load_priority_program(policy.BULK_PRIORITY))  # 69 when refused
    tcpopts.check(cc, probe_parent, scope_pins)  # the clamp (and the cc) take effect


def attribution() -> str:
    """How a job's packets are known here (`policy.ATTRIBUTIONS`): by programs on a cgroup
    v2 group where a cgroup2 hierarchy is mounted, else by the net_cls class id (and a
    system without either is refused by `require_net_cls`)."""
    return "cgroup2" if cgroups.unified_root() is not None else "net_cls"


def require_net_cls(what: str) -> None:
    """What the policy needs where no cgroup v2 hierarchy is mounted (one line and 69
    when the machine lacks it): the net_cls controller, HTB, and a classifier the kernel
    takes (`tc_programs.classid_program`)."""
    if not netcls.available():
        raise UnavailableError(f"{what} needs a cgroup v2 hierarchy or the v1 net_cls "
                               "controller to attribute the job's packets, and this "
                               "system has neither")
    if not testbed.qdisc_known("htb"):
        raise UnavailableError(f"{what} needs the htb qdisc, which this kernel lacks")
    netcls.check()


def group_path(tag: str) -> str:
    root = cgroups.unified_root()
    if root is None:  # checked before; a mount gone since is the machine's doing
        raise UnavailableError("no cgroup v2 hierarchy is mounted")
    return os.path.join(root, f"backburner-net-{tag}")


def apply(tx: system.Transaction, target: Target, tag: str) -> tuple[policy.Applied, str]:
    """The job's group and the policy on the target; returns them and the group's
    cgroup.procs file for the job to be placed in. The caller stops the pacer
    (`policy.stop`) before the transaction ends."""
    if target.attribution == "net_cls":
        group = netcls.group(tx, tag)
    else:
        group = group_path(tag)
        tx.apply(system.CgroupDir(group))
    applied = policy.background(tx, target.ns, target.dev, None, group, adaptive=True,
                                cc=target.cc, uplink_bit=target.uplink_bit,
                                attribution=target.attribution)
    return applied, cgroups.procs_file(group)
