"""The job's traffic attributed by cgroup v1, where no cgroup v2 hierarchy is mounted: its
group in the net_cls controller.

No cgroup program can be attached without a cgroup v2 group to attach it to. What cgroup
v1 offers instead is a class id for every socket made by (or moved with) a process of a
net_cls group, which a classifier on the interface reads (`tc_programs.classid_program`): on the
way out only, since a packet on its way in has no socket yet. So here the policy holds the
job's downloads back by their ACKs alone (the "acks" mechanism; the window clamp and
ingress shaping need programs on a v2 group), and with `--net-uplink` keeps its uploads
behind everything else; a per-job congestion control (TCP-LP) needs a v2 group too.

net_prio, the other v1 network controller, is no substitute: its priority map names only
the interfaces of the first network namespace, and it gives all the job's packets one
priority, ACKs and uploads alike.

The hierarchy is used where the system mounts it (`/sys/fs/cgroup/net_cls,net_prio` on
most v1 systems: a hierarchy's own root, on top at its mount point, in directories only
root controls, with no controller but net_cls and net_prio, since joining a group there
moves the job in every controller of it), and otherwise mounted by us on a private
directory for the run; the group, the mount and the directory are changes of the
caller's transaction.
"""

from __future__ import annotations

import os
import secrets

from .. import system
from ..base.errors import BackburnerError, UnavailableError
from ..files import safepath
from ..kernel import procfs

CONTROLLER = "net_cls"
#: Controllers a hierarchy we use may have beside net_cls (the usual co-mount).
COMOUNTED = frozenset({"net_cls", "net_prio"})
#: The job's class id: major 0x6262 ("bb"), a handle no qdisc of ours has, so a `cgroup`
#: filter someone else adds cannot mistake it for one of its classes.
TAG = 0x6262_0010
_CONTROLLERS = frozenset({"cpu", "cpuacct", "cpuset", "memory", "devices", "freezer",
                          "blkio", "pids", "perf_event", "hugetlb", "rdma", "misc",
                          "net_cls", "net_prio"})


def available(proc_cgroups: str = "/proc/cgroups") -> bool:
    """Whether this kernel has the net_cls controller, enabled."""
    try:
        with open(proc_cgroups) as f:
            rows = [line.split() for line in f if not line.startswith("#")]
    except OSError:
        return False
    return any(len(r) >= 4 and r[0] == CONTROLLER and r[3] == "1" for r in rows)


def mounted() -> str | None:
    """Where a cgroup v1 hierarchy holding net_cls is mounted (None: nowhere); a mount we
    must not use is one line and 69 (`usable`)."""
    table = procfs.mounts()
    found = next((m for m in table if m.fstype == "cgroup"
                  and CONTROLLER in m.all_options), None)
    if found is None:
        return None
    usable(found, table)
    return found.mountpoint


def usable(m: procfs.MountInfo, table: list[procfs.MountInfo]) -> None:
    """Refuse (69) a net_cls mount whose group we would make in a place another user
    could control, or that would move the job in other controllers too."""
    where = f"net_cls is mounted at {m.mountpoint}"
    if m.root != "/":
        raise UnavailableError(f"{where} from one of its groups ({m.root}), not its root")
    if [x for x in table if x.mountpoint == m.mountpoint][-1] is not m:
        raise UnavailableError(f"{where}, under another mount")
    others = (m.all_options & _CONTROLLERS) - COMOUNTED
    if others:
        raise UnavailableError(f"{where} together with {', '.join(sorted(others))}: "
                               "a group there would move the job in those too")
    safepath.check_chain(m.mountpoint, "net_cls hierarchy")


def check() -> None:
    """What the net_cls path needs, before anything changes (one line and 69): the
    controller; a hierarchy we may use, or one we can mount (the controller may be
    bound, out of sight, with options we cannot know); and the classifier, which the
    kernel must load and cls_bpf take. Both are tried in a transaction of their own,
    undone at once, the classifier on a throwaway namespace's loopback."""
    if not available():
        raise UnavailableError("this kernel has no net_cls controller")
    try:
        with system.Transaction("net-check") as tx:
            if mounted() is None:
                _mount(tx)
            probe = f"bbq{secrets.token_hex(3)}"
            tx.apply(system.NetNamespace(probe))
            tx.apply(system.Qdisc(probe, "lo", "root", "1", "htb", []))
            tx.apply(system.ClassidClassifier(probe, "lo", "1:", 1, TAG, 0x10010, 0x10030))
    except UnavailableError:
        raise
    except BackburnerError as err:
        raise UnavailableError(f"the net_cls path cannot be set up here: {err}") from None


def _mount(tx: system.Transaction) -> str:
    root = tx.apply(system.PrivateDir(str(system.work_root()), "netcls-"))
    tx.apply(system.V1Hierarchy("backburner", root, options=CONTROLLER))
    return root


def group(tx: system.Transaction, tag: str) -> str:
    """The job's net_cls group (`backburner-net-TAG`), its class id TAG, made in the
    mounted hierarchy or in one we mount for the run; returns its directory."""
    root = mounted() or _mount(tx)
    path = os.path.join(root, f"backburner-net-{tag}")
    tx.apply(system.CgroupDir(path, {"net_cls.classid": str(TAG)}))
    return path
