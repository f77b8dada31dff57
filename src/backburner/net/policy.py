"""The background policy for a job's network traffic: its downloads and uploads yield to
everything else on a slow link whose queue is not on this machine.

A download's data is sent by a remote server, into the slow link's deep buffer; nothing
here can reorder that queue. What the receiver does control is the clock of the sender
and how much it may send: a TCP sender sends new data only as acknowledgements arrive,
and never more than the window the receiver offers. Both are attributed to the job by
its cgroup v2 group (BPF programs on the group, never guessed from ports):

* **acks**: a cgroup-skb program sets the priority of the job's outgoing packets without
  data (its ACKs) to an HTB class whose rate lets through acknowledgements for a little
  under the link's rate of data. The class counts each packet as two full frames
  (`mpu`): a Linux receiver acknowledges about every second segment, so a budget of
  packets is a budget of data, whatever the ACKs' own few bytes are.
* **window**: a sock_ops program clamps the window the job's sockets offer
  (TCP_WINDOW_CLAMP, from the first SYN on), an equal share each of a budget a
  controller moves.
* **both**: the ACK class sets the pace; the window follows its rate (what that rate
  needs over the path's own round trip and a margin), so a burst of ACKs, or a new
  connection's slow start, cannot release more than that into the link's queue.

The budgets follow the queueing delay at the link (`pacer`): the link's rate need not be
known. The job's senders then send at about the link's rate, its buffer stays near empty,
and a page fetched by anything else finds a short queue. Everything else leaves through
the default class, unshaped.

Uploads: where the uplink's rate is given, the interface is shaped just below it, so the
queue is here, and the job's packets with data go to a class that only borrows what
everything else leaves; and where the kernel has TCP-LP the job's sockets use it, which
yields to other traffic wherever the queue is.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

from .. import system
from ..base.errors import SystemStateError, UsageError
from ..kernel.bpf import cgroup_programs
from . import ingress, netcls
from .link import MTU_BYTES, LinkSpec
from .pacer import Knob, Pacer, Rule, Slowdown, WindowRule
from .tcpopts import cc_changes

BULK_CLASS = "1:10"
OTHER_CLASS = "1:20"
UPLOAD_CLASS = "1:30"
BULK_PRIORITY = 0x10010  # HTB class 1:10, as skb->priority
UPLOAD_PRIORITY = 0x10030  # HTB class 1:30
#: How the job's packets are known: by programs on its cgroup v2 group, or where only
#: cgroup v1 is there by its net_cls group's class id (`netcls`: ACKs and uploads only).
ATTRIBUTIONS = ("cgroup2", "net_cls")
#: The priority of the classifier on the interface's root, by net_cls class id.
CLASSID_PREF = 1
#: The share of the link's rate the background job's data may take.
SHARE = 1.0
#: What holds the job's downloads back: its ACKs paced in a class of their own
#: ("acks"), the window its sockets advertise clamped ("window"), both, or its data
#: shaped on the way in, on an IFB device ("ingress", `ingress`: measured, not the
#: default).
MECHANISMS = ("acks", "window", "both", "ingress")
DEFAULT_MECHANISM = "both"
#: Shaped uplink: the share of its rate the interface sends at (so the queue is here),
#: the share the job's uploads are sure of, and their own queue, as time at that rate.
UPLINK_SHARE = 0.95
UPLOAD_SHARE = 0.05
UPLOAD_QUEUE_S = 0.1
#: The least rate an HTB class of the shaped uplink gets (the job's uploads, and
#: everything else), and so the least uplink: below it "everything else" would get 0 or
#: a negative rate beside the job's uploads.
MIN_CLASS_BIT = 8_000
MIN_UPLINK_BIT = 20_000

#: Where the adaptive budget starts when the link's rate is not known: a slow line's.
START_BIT = 1_000_000
#: A full segment's payload on an Ethernet path: the unit of the initial window.
MSS_BYTES = 1448


@dataclass
class Applied:
    ns: str | None
    dev: str
    group: str
    pacer: Pacer | None = field(default=None, repr=False)
    mechanism: str = DEFAULT_MECHANISM
    window_map: int | None = field(default=None, repr=False)  # the clamp's map, ours to close
    cc: str | None = None
    uplink: bool = False  # shaped below the uplink's rate, the job's uploads in their class
    ifb: str | None = None  # the IFB device of ingress shaping
    attribution: str = "cgroup2"  # one of ATTRIBUTIONS


def _bulk_args(budget: int) -> list[str]:
    return ["rate", f"{budget}bit", "ceil", f"{budget}bit", "mpu", str(2 * MTU_BYTES),
            "prio", "1"]


def background(tx: system.Transaction, ns: str | None, dev: str, link: LinkSpec | None,
               group: str, *, adaptive: bool = True, rule: Rule | None = None,
               mechanism: str | None = None, window_rule: WindowRule | None = None,
               uplink_bit: int | None = None, cc: str | None = None,
               interval_s: float = 0.1, current_filter: int = 1,
               attribution: str = "cgroup2") -> Applied:
    """Put the policy on `dev` (in namespace `ns`; None: this one) for the cgroup v2
    group `group`, which must exist, or with `attribution` "net_cls" for the net_cls
    group `group` (`netcls`: mechanism "acks" only, no `cc`); every piece is a change of
    `tx`.

    `mechanism` (one of MECHANISMS; by default DEFAULT_MECHANISM, or "acks" for a fixed
    budget) says what holds the job's downloads back; `adaptive`: its budgets follow the
    link's queueing delay (the pacer: the caller's `stop()` ends it before the transaction
    does); otherwise the ACK budget stays at the link's rate (`link` needed, ACKs only).
    `uplink_bit`: the uplink's rate, shaped just below it with the job's uploads behind
    everything else; `cc`: the job's sockets' congestion control (checked by
    `tcpopts.check` first; its module is loaded if need be). `interval_s`: the pacer's
    step (one echo each); `current_filter`: how many echoes' least delay counts."""
    by_classid = attribution == "net_cls"
    if mechanism is None:
        mechanism = DEFAULT_MECHANISM if adaptive and not by_classid else "acks"
    if mechanism not in MECHANISMS or attribution not in ATTRIBUTIONS:
        raise ValueError(f"unknown mechanism {mechanism!r} or attribution {attribution!r}")
    if by_classid and (mechanism != "acks" or cc):
        raise ValueError("by net_cls class id, the job's ACKs are all that can be held back")
    if not adaptive and (link is None or mechanism not in ("acks", "ingress")):
        raise ValueError("a fixed budget is one of ACKs or data at the link's rate")
    applied = Applied(ns, dev, group, mechanism=mechanism, cc=cc, uplink=bool(uplink_bit),
                      attribution=attribution)
    acks = mechanism in ("acks", "both")
    knobs = []
    if mechanism == "ingress":
        budget = int(link.rate_bit * ingress.SHARE) if link is not None else START_BIT
        applied.ifb = ingress.shape(tx, ns, dev, group, budget)
        knobs.append(ingress.knob(ns, applied.ifb, float(budget), rule or Rule()))
    if acks or uplink_bit:
        budget = int(link.rate_bit * SHARE) if link is not None else START_BIT
        classes(tx, ns, dev, budget if acks else None, uplink_bit)
        if by_classid:
            tx.apply(system.ClassidClassifier(
                ns, dev, "1:", CLASSID_PREF, netcls.TAG, BULK_PRIORITY if acks else 0,
                UPLOAD_PRIORITY if uplink_bit is not None else 0))
        else:
            tx.apply(system.CgroupPacketPriority(
                group, BULK_PRIORITY if acks else 0,
                data_priority=UPLOAD_PRIORITY if uplink_bit is not None else 0))
        if acks:
            knobs.append(ack_knob(applied, float(budget), rule or Rule()))
    if mechanism in ("window", "both") or cc:
        for change in cc_changes(applied.cc):
            tx.apply(change)
        result = tx.apply(system.CgroupSockOps(group, applied.cc, 0, 0))
        if mechanism in ("window", "both"):
            applied.window_map = system.window_map(result)
            if applied.window_map is None:
                raise SystemStateError("the window clamp's BPF map vanished as it was made")
            knobs.append(window_knob(applied, window_rule or WindowRule(),
                                     knobs[0] if knobs else None))
    if adaptive and knobs:
        applied.pacer = Pacer(ns, group, knobs, interval_s=interval_s,
                              current_filter=current_filter)
        applied.pacer.start()
    return applied


def classes(tx: system.Transaction, ns: str | None, dev: str, ack_bit: int | None,
            uplink_bit: int | None) -> None:
    """The HTB root on `dev`: the job's ACKs (priority BULK_PRIORITY) in a paced class of
    their own (`ack_bit`), and with `uplink_bit` everything else shaped just below the
    uplink's rate, the job's uploads (UPLOAD_PRIORITY) in a class that borrows what the
    rest leaves."""
    tx.apply(system.Qdisc(ns, dev, "root", "1", "htb", ["default", "20"]))
    tx.apply(system.TcClass(ns, dev, "1:", "1:1", "htb", ["rate", "10gbit"]))
    if ack_bit is not None:
        tx.apply(system.TcClass(ns, dev, "1:1", BULK_CLASS, "htb", _bulk_args(ack_bit)))
    if uplink_bit is None:
        tx.apply(system.TcClass(ns, dev, "1:1", OTHER_CLASS, "htb",
                                ["rate", "10gbit", "prio", "0"]))
    else:
        up, rest, mine = uplink_rates(uplink_bit)
        tx.apply(system.TcClass(ns, dev, "1:", "1:2", "htb",
                                ["rate", f"{up}bit", "ceil", f"{up}bit"]))
        tx.apply(system.TcClass(ns, dev, "1:2", OTHER_CLASS, "htb",
                                ["rate", f"{rest}bit", "ceil", f"{up}bit", "prio", "0"]))
        tx.apply(system.TcClass(ns, dev, "1:2", UPLOAD_CLASS, "htb",
                                ["rate", f"{mine}bit", "ceil", f"{up}bit", "prio", "1"]))
        # in packets, not bytes: TCP hands down segments of up to 64 KiB (GSO) that a
        # byte limit below that would always drop
        limit = max(4, int(up * UPLOAD_QUEUE_S / 8 / MTU_BYTES))
        tx.apply(system.Qdisc(ns, dev, UPLOAD_CLASS, "30", "pfifo", ["limit", str(limit)]))


def uplink_rates(uplink_bit: int) -> tuple[int, int, int]:
    """(the interface's rate, everything else's, the job's uploads') for a shaped uplink
    of `uplink_bit`; ValueError below MIN_UPLINK_BIT (`check_uplink` says it first)."""
    if uplink_bit < MIN_UPLINK_BIT:
        raise ValueError(f"an uplink of {uplink_bit} bit/s is below {MIN_UPLINK_BIT}")
    up = int(uplink_bit * UPLINK_SHARE)
    mine = max(MIN_CLASS_BIT, int(up * UPLOAD_SHARE))
    return up, up - mine, mine


def check_uplink(uplink_bit: int, what: str) -> None:
    """One line (64) for an uplink too slow to shape (`uplink_rates`), before anything
    changes; `what` is the rate as given, and where."""
    if uplink_bit < MIN_UPLINK_BIT:
        raise UsageError(f"uplink rate {what} is below 20kbit: shaped below it, "
                         "everything else would have no rate beside the job's uploads")


def ack_knob(applied: Applied, budget: float, rule: Rule) -> Knob:
    ns, dev = applied.ns, applied.dev

    def put(bit: float, _conns: int) -> None:
        system.change_class(ns, dev, "1:1", BULK_CLASS, "htb", _bulk_args(int(bit)))

    return Knob("ack-rate", budget, lambda v, q, _n: rule.next_rate(v, q), put)


def window_knob(applied: Applied, rule: WindowRule, acks: Knob | None) -> Knob:
    """The window budget through the clamp's map (`applied.window_map`): the job's
    sockets' window clamped to an equal share of it (at least a segment each), which
    follows the queueing delay (with LEDBAT++'s slowdowns, so the path's own delay is
    seen), or with `acks` the ACK class's rate (whose pacing keeps the queue short, so the
    path's delay is seen anyway). Until the first echo comes back the window is left alone
    (a budget of 0): without evidence, a guessed clamp could hold a fast link's downloads
    to a trickle for good (a peer that never answers ICMP)."""
    fd = applied.window_map
    if fd is None:
        raise ValueError("the window knob needs the clamp's map")

    def put(total: float, conns: int) -> None:
        try:
            cgroup_programs.set_window(fd, *window_values(total, conns, rule))
        except OSError as err:
            raise SystemStateError(f"could not set the window clamp: {err.strerror}") from None

    slowdown = Slowdown()

    def step(total: float, queue: float | None, conns: int) -> float:
        """Called once an echo has come back (the path's delay is known)."""
        pacer = applied.pacer
        if acks is not None and pacer is not None and pacer.base_rtt_s is not None:
            return rule.follow(acks.value, pacer.base_rtt_s, conns)
        if not total:
            return float(rule.start_bytes)
        return slowdown.step(time.monotonic(), total, rule.floor_bytes * max(1, conns),
                             lambda: rule.next_window(total, queue, conns))

    return Knob("window", 0.0, step, put)


def window_values(total: float, conns: int, rule: WindowRule) -> tuple[int, int]:
    """(clamp per socket in bytes, initial window in segments) for `conns` connections
    sharing `total` bytes of window; (0, 0), the kernel's own, for a budget of 0."""
    if not total:
        return 0, 0
    per = max(rule.floor_bytes, int(total / max(1, conns)))
    return per, max(1, per // MSS_BYTES)


def stop(applied: Applied) -> None:
    """End the pacer (if any) before the transaction removes what it moves."""
    if applied.pacer is not None:
        applied.pacer.stop()
    if applied.window_map is not None:
        os.close(applied.window_map)
        applied.window_map = None


def bulk_counters(applied: Applied, classid: str | None = None,
                  dev: str | None = None) -> tuple[int, int]:
    """(bytes, packets) a class of the policy has sent on `dev` (by default the job's
    class: the ACK class on the interface, or with ingress shaping its data's class on the
    IFB): proof the policy takes effect."""
    if classid is None:
        classid, dev = (ingress.JOB_CLASS, applied.ifb) if applied.ifb else \
            (BULK_CLASS, applied.dev)
    dev = dev or applied.dev
    for c in system.tc_classes(applied.ns, dev):
        if c["handle"] == classid:
            return c["bytes"], c["packets"]
    return 0, 0
