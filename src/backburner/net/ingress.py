"""Ingress shaping: the job's downloads held back on their way in, on an IFB device.

Everything arriving on the interface is redirected (tc `mirred`) to an IFB device, whose
HTB sends it on into the stack: the job's segments (known by their socket, `kernel.bpf.tc_programs`)
through a class whose rate is a budget, everything else through a class of its own,
unshaped. The budget is set below the rate the link delivers, so the job's data queues
here, in a short queue of its own, instead of in the link's buffer that every other packet
crosses: the job's sender is clocked by what this class lets through (its ACKs follow its
data), and what overflows the short queue is dropped, which its congestion control reads
as the signal to slow down. The budget follows the queueing delay the pacer measures
(`pacer`): below the link's rate the link's buffer stays empty, above it the buffer
grows, so the budget settles just under the link's rate without being told it.

What it cannot do: a new connection's first flight, and every increase of the sender's
window, still arrive at the link at the sender's pace; the link's queue takes those before
this class can drop anything, so ingress shaping is a step slower than holding the
receiver's own clock and window (`policy`'s mechanisms) — it was measured against them.
"""

from __future__ import annotations

from .. import system
from .link import MTU_BYTES
from .pacer import Knob, Rule

#: The share of the link's rate the job's data gets to start with (or for good, with a
#: fixed budget): below it, so the queue is here.
SHARE = 0.9
#: The IFB's classes: the job's data, and everything else (the default).
JOB_CLASS = "1:10"
OTHER_CLASS = "1:20"
JOB_CLASSID = 0x10010
#: The socket priority the job's sockets get when made (a value no qdisc's class takes:
#: its major number 0x6262 is no handle of ours, nor, in practice, anyone's; its low bits
#: are 0, the best-effort band of pfifo_fast and VLAN priority maps).
SOCKET_PRIORITY = 0x6262_0000
#: The job's own queue on the IFB, as time at its budget: short, so that excess is
#: dropped (the sender's signal) rather than kept.
JOB_QUEUE_S = 0.1
#: The filters' priorities: the redirect on the interface's ingress, the classifier on
#: the IFB.
REDIRECT_PREF = 1
CLASSIFY_PREF = 1


def ifb_name(dev: str) -> str:
    """The IFB device's name: the interface's, marked (within IFNAMSIZ)."""
    return f"{dev[:11]}-ibb"


def _job_args(budget_bit: int) -> list[str]:
    return ["rate", f"{budget_bit}bit", "ceil", f"{budget_bit}bit", "prio", "1"]


def shape(tx: system.Transaction, ns: str | None, dev: str, group: str,
          budget_bit: int) -> str:
    """Redirect `dev`'s ingress (in namespace `ns`) to a new IFB device whose HTB holds
    the sockets of cgroup `group` to `budget_bit`; every piece a change of `tx`.
    Returns the IFB's name."""
    ifb = ifb_name(dev)
    tx.apply(system.Link(ns, ifb, "ifb"))
    tx.apply(system.LinkUp(ns, ifb))
    tx.apply(system.Qdisc(ns, ifb, "root", "1", "htb", ["default", OTHER_CLASS[2:]]))
    tx.apply(system.TcClass(ns, ifb, "1:", "1:1", "htb", ["rate", "10gbit"]))
    tx.apply(system.TcClass(ns, ifb, "1:1", JOB_CLASS, "htb", _job_args(budget_bit)))
    tx.apply(system.TcClass(ns, ifb, "1:1", OTHER_CLASS, "htb",
                            ["rate", "10gbit", "prio", "0"]))
    limit = max(4, int(budget_bit * JOB_QUEUE_S / 8 / MTU_BYTES))
    tx.apply(system.Qdisc(ns, ifb, JOB_CLASS, "10", "pfifo", ["limit", str(limit)]))
    tx.apply(system.BpfClassifier(ns, ifb, "1:", CLASSIFY_PREF, SOCKET_PRIORITY,
                                  JOB_CLASSID))
    tx.apply(system.CgroupSocketPriority(group, SOCKET_PRIORITY))
    tx.apply(system.Qdisc(ns, dev, "ingress", "ffff:", "ingress"))
    tx.apply(system.TcFilter(ns, dev, "ffff:", REDIRECT_PREF,
                             ["protocol", "all", "u32", "match", "u32", "0", "0",
                              "action", "mirred", "egress", "redirect", "dev", ifb]))
    return ifb


def knob(ns: str | None, ifb: str, budget_bit: float, rule: Rule) -> Knob:
    """The job class's rate, moved by the pacer as the ACK class's is."""

    def put(bit: float, _conns: int) -> None:
        system.change_class(ns, ifb, "1:1", JOB_CLASS, "htb", _job_args(int(bit)))

    return Knob("ingress-rate", budget_bit, lambda v, q, _n: rule.next_rate(v, q), put)
