"""The network background policy for systemd units: the long-lived service that systemd's
`BPFProgram=` needs (`backburner govern net`, shipped as backburner-net.service).

Where systemd owns the cgroup tree, a unit's processes live in the unit's group, and a
group of ours beside it would take them out of systemd's accounting. What systemd can
express is to attach programs pinned in bpffs to the unit's own group
(`BPFProgram=egress:PATH`, `BPFProgram=sock_ops:PATH`, systemd >= 249). So this service
does the rest of what `run --net background` does for one job, once for every unit that
asks for it:

* it pins the policy's egress ACK-priority program and its sock_ops window program with
  its map (`system.PinnedPrograms`) for units' drop-ins to name (`apply --net`);
* it puts the HTB root and classes on the interface (`policy.classes`), so the units' ACKs
  go to the paced class;
* it runs the pacer for the processes of every group that has one of the pinned programs
  attached (and the groups below it): found by asking the kernel (BPF_PROG_QUERY) once a
  second, so a unit started or stopped later needs no word to us, and the pacer paces
  what the kernel attributes, never a list of unit names that might have drifted from
  the drop-ins. All such units share the ACK class and the window budget, as one
  background job.

Until SIGTERM or ^C; then everything is undone (the map released first, so a unit that
keeps the programs after we go is not left clamped). After a SIGKILL `restore` does it
(the unit's ExecStopPost=).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from .. import system, systemd
from ..base import interrupts
from ..base.errors import UnavailableError
from ..kernel import cgroups
from ..kernel.bpf import calls as bpf
from ..kernel.bpf import cgroup_programs
from ..system.bpf import PIN_DIR, PIN_EGRESS, PIN_SOCK_OPS, PIN_WINDOW
from . import background, policy
from .pacer import Pacer, Rule, WindowRule
from .tcpopts import cc_changes

WHAT = "the network service"
#: `govern net`'s options for the interface, its namespace and the uplink's rate
OPTIONS = ("--dev", "--netns", "--uplink")


@dataclass(frozen=True)
class Plan:
    """What the service puts where: the interface (and its namespace, the uplink's rate,
    the units' congestion control) and the bpffs the programs are pinned in."""

    target: background.Target
    root: str = bpf.BPFFS


def pin_path(name: str, root: str = bpf.BPFFS) -> str:
    return os.path.join(root, PIN_DIR, name)


def check(dev: str | None, ns: str | None, uplink: str | None = None,
          root: str = bpf.BPFFS) -> Plan:
    """Everything the service needs, before anything changes; one line otherwise (69 for
    what the machine lacks)."""
    background.check_given(dev, ns, uplink, OPTIONS)
    system.require_root("the network service")
    if background.attribution() != "cgroup2":
        raise UnavailableError(f"{WHAT} hands its programs to systemd (BPFProgram=), which "
                               "attaches them only on a cgroup2 tree, and none is mounted",
                               "on cgroup v1 alone, use backburner run --net background")
    if not bpf.bpffs_mounted(root):
        raise UnavailableError(f"{WHAT} needs a BPF filesystem at {root} to pin its programs "
                               "for systemd, and none is mounted there",
                               f"mount -t bpf -o mode=0700 bpf {root} (systemd mounts it)")
    parent = _own_delegated_group() if systemd.manages_cgroups(systemd.read_facts()) else None
    return Plan(background.check("background", dev, ns, uplink, what=WHAT,
                                 probe_parent=parent, options=OPTIONS), root)


def _own_delegated_group() -> str:
    """Our own group, where systemd has delegated it to us (Delegate=yes: systemd >= 251
    marks it with the trusted.delegate attribute): the kernel probe's throwaway group goes
    below it, not behind systemd's back."""
    root = cgroups.unified_root()
    own = cgroups.group_of(os.getpid(), root) if root else None
    try:
        delegated = own is not None and os.getxattr(own, "trusted.delegate") == b"1"
    except OSError:
        delegated = False
    if not delegated or own is None:
        raise UnavailableError(f"where systemd owns the cgroup tree {WHAT} runs as its unit, "
                               "whose group is delegated to it (for the kernel's probe)",
                               "systemctl start backburner-net.service")
    return own


def attached_groups(ids: set[int], root: str) -> list[str]:
    """Every group under the cgroup v2 `root` that has one of the programs `ids` attached
    (egress or sock_ops), and the groups below it (the programs act on them too)."""
    found: list[str] = []
    under: str | None = None  # the group with a program attached that the walk is below
    for top, _dirs, _files in os.walk(root):
        if under is not None and top.startswith(under + "/"):
            found.append(top)
            continue
        under = None
        here = cgroup_programs.policy_programs_on(top)
        if here & ids:
            found.append(top)
            under = top
    return found


def start(tx: system.Transaction, target: background.Target,
          root: str = bpf.BPFFS, name: str = PIN_DIR) -> policy.Applied:
    """Pin the programs (in `root`/`name`), put the classes on the target, and start the
    pacer for every group the programs get attached to; every piece a change of `tx`.
    The caller stops the pacer (`policy.stop`) before the transaction ends."""
    t = target
    unified = cgroups.unified_root()
    if unified is None:  # checked before; a mount gone since is the machine's doing
        raise UnavailableError("no cgroup v2 hierarchy is mounted")
    for change in cc_changes(t.cc):
        tx.apply(change)
    pins = tx.apply(system.PinnedPrograms(root, policy.BULK_PRIORITY,
                                          policy.UPLOAD_PRIORITY if t.uplink_bit else 0,
                                          t.cc, name))
    policy.classes(tx, t.ns, t.dev, policy.START_BIT, t.uplink_bit)
    applied = policy.Applied(t.ns, t.dev, os.path.join(root, name), cc=t.cc,
                             uplink=bool(t.uplink_bit))
    applied.window_map = bpf.pinned(os.path.join(root, name, PIN_WINDOW))
    try:
        acks = policy.ack_knob(applied, float(policy.START_BIT), Rule())
        ids = {pins["ids"][PIN_EGRESS], pins["ids"][PIN_SOCK_OPS]}
        applied.pacer = Pacer(t.ns, applied.group,
                              [acks, policy.window_knob(applied, WindowRule(), acks)],
                              groups=lambda: attached_groups(ids, unified))
        applied.pacer.start()
    except BaseException:
        policy.stop(applied)
        raise
    return applied


def serve(plan: Plan, ready: Callable[[policy.Applied], None] = lambda _a: None,
          until: Callable[[], bool] = lambda: False) -> str:
    """Pin, shape, pace, until a signal (or `until()` says so, asked twice a second);
    then undo everything. `ready` is called once everything is in place (systemd's
    READY=1). Returns how it ended."""
    try:
        with system.Transaction("net-serve") as tx:
            applied = start(tx, plan.target, plan.root)
            try:
                ready(applied)
                while not until():
                    time.sleep(0.5)
            finally:
                policy.stop(applied)
        return "stopped"
    except KeyboardInterrupt:
        return "interrupted"
    except interrupts.Terminated as term:
        return f"terminated by {term}"
