"""The background policy for a job's network traffic: its downloads yield to everything
else on a slow link whose queue is not on this machine.

A download's data is sent by a remote server, into the slow link's deep buffer; nothing
here can reorder that queue. What the receiver does control is the clock of the sender:
a TCP sender sends new data only as acknowledgements arrive. So the job's outgoing packets
(its ACKs, attributed by its cgroup v2 group through a cgroup BPF program that sets their
priority to an HTB class, never by guessing from ports) go through a class of their own
whose rate lets through acknowledgements for a little under the link's rate of data. The
job's senders then send at that rate, the link's buffer stays near empty, and a page
fetched by anything else finds a short queue; when nothing else runs, the downloads still
get that share of the link. Everything else leaves through the default class, unshaped.

The class counts each packet as two full frames (`mpu`): a Linux receiver acknowledges
about every second segment, so a budget of packets is a budget of data, whatever the
ACKs' own few bytes are.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import system
from .link import MTU_BYTES, LinkSpec
from .pacer import Pacer, Rule

BULK_CLASS = "1:10"
OTHER_CLASS = "1:20"
BULK_PRIORITY = 0x10010  # HTB class 1:10, as skb->priority
#: The share of the link's rate the background job's data may take.
SHARE = 1.0


#: Where the adaptive budget starts when the link's rate is not known: a slow line's.
START_BIT = 1_000_000


@dataclass
class Applied:
    ns: str | None
    dev: str
    group: str
    pacer: Pacer | None = field(default=None, repr=False)


def _bulk_args(budget: int) -> list[str]:
    return ["rate", f"{budget}bit", "ceil", f"{budget}bit", "mpu", str(2 * MTU_BYTES),
            "prio", "1"]


def background(tx: system.Transaction, ns: str | None, dev: str, link: LinkSpec | None,
               group: str, *, adaptive: bool = True, rule: Rule | None = None) -> Applied:
    """Put the policy on `dev` (in namespace `ns`; None: this one) for the cgroup v2
    group `group`, which must exist; every piece is a change of `tx`. `adaptive`: the
    ACK budget follows the link's queueing delay (the pacer: the caller's `stop()` ends it
    before the transaction does); otherwise it stays at the link's rate (`link` needed)."""
    if link is None and not adaptive:
        raise ValueError("a fixed budget needs the link's rate")
    budget = int(link.rate_bit * SHARE) if link is not None else START_BIT
    tx.apply(system.Qdisc(ns, dev, "root", "1", "htb", ["default", "20"]))
    tx.apply(system.TcClass(ns, dev, "1:", "1:1", "htb", ["rate", "10gbit"]))
    tx.apply(system.TcClass(ns, dev, "1:1", OTHER_CLASS, "htb",
                            ["rate", "10gbit", "prio", "0"]))
    tx.apply(system.TcClass(ns, dev, "1:1", BULK_CLASS, "htb", _bulk_args(budget)))
    tx.apply(system.CgroupPacketPriority(group, BULK_PRIORITY))
    applied = Applied(ns, dev, group)
    if adaptive:
        def set_rate(bit: int) -> None:
            system.change_class(ns, dev, "1:1", BULK_CLASS, "htb", _bulk_args(bit))

        applied.pacer = Pacer(ns, dev, BULK_CLASS, group, float(budget), set_rate,
                              rule or Rule())
        applied.pacer.start()
    return applied


def stop(applied: Applied) -> None:
    """End the pacer (if any) before the transaction removes its class."""
    if applied.pacer is not None:
        applied.pacer.stop()


def bulk_counters(applied: Applied) -> tuple[int, int]:
    """(bytes, packets) the background class has sent: proof the policy takes effect."""
    for c in system.tc_classes(applied.ns, applied.dev):
        if c["handle"] == BULK_CLASS:
            return c["bytes"], c["packets"]
    return 0, 0
