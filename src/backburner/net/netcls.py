"""The job's traffic attributed by cgroup v1, where no cgroup v2 hierarchy is mounted: its
group in the net_cls controller.

No cgroup program can be attached without a cgroup v2 group to attach it to. What cgroup
v1 offers instead is a class id for every socket made by (or moved with) a process of a
net_cls group, which a classifier on the interface reads (`tcbpf.classid_program`): on the
way out only, since a packet on its way in has no socket yet. So here the policy holds the
job's downloads back by their ACKs alone (the "acks" mechanism; the window clamp and
ingress shaping need programs on a v2 group), and with `--net-uplink` keeps its uploads
behind everything else; a per-job congestion control (TCP-LP) needs a v2 group too.

net_prio, the other v1 network controller, is no substitute: its priority map names only
the interfaces of the first network namespace, and it gives all the job's packets one
priority, ACKs and uploads alike.

The hierarchy is used where the system mounts it (`/sys/fs/cgroup/net_cls,net_prio` on
most v1 systems), and otherwise mounted by us on a private directory for the run; the
group, the mount and the directory are changes of the caller's transaction.
"""

from __future__ import annotations

import os

from .. import procfs, system

CONTROLLER = "net_cls"
#: The job's class id: major 0x6262 ("bb"), a handle no qdisc of ours has, so a `cgroup`
#: filter someone else adds cannot mistake it for one of its classes.
TAG = 0x6262_0010


def available(proc_cgroups: str = "/proc/cgroups") -> bool:
    """Whether this kernel has the net_cls controller, enabled."""
    try:
        with open(proc_cgroups) as f:
            rows = [line.split() for line in f if not line.startswith("#")]
    except OSError:
        return False
    return any(len(r) >= 4 and r[0] == CONTROLLER and r[3] == "1" for r in rows)


def mounted() -> str | None:
    """Where a cgroup v1 hierarchy holding net_cls is mounted (None: nowhere)."""
    return next((m.mountpoint for m in procfs.mounts()
                 if m.fstype == "cgroup" and CONTROLLER in m.all_options), None)


def group(tx: system.Transaction, tag: str) -> str:
    """The job's net_cls group (`backburner-net-TAG`), its class id TAG, made in the
    mounted hierarchy or in one we mount for the run; returns its directory."""
    root = mounted()
    if root is None:
        root = tx.apply(system.PrivateDir(str(system.work_root()), "netcls-"))
        tx.apply(system.Mount("backburner", root, "cgroup", CONTROLLER))
    path = os.path.join(root, f"backburner-net-{tag}")
    tx.apply(system.CgroupDir(path, {"net_cls.classid": str(TAG)}))
    return path
