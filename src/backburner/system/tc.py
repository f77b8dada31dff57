"""Traffic control on a link: queueing disciplines, their classes and filters (`tc`;
the BPF classifiers by the netlink request `tc` would send), each undone only while what
is there is still what we made.

A qdisc is known by its handle and kind on a link (its link by its interface index), a
class by its id, a filter by its priority at its qdisc: the old state says whether one
with that handle or id was there before the change, which then is someone else's (an
administrator's shaping, or another run's), never ours to delete; and an add that fails
because one is there says so (`ExistsError`, 73) rather than a bare tc message.
"""

from __future__ import annotations

import json
import os
import socket
from abc import abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..base.errors import ExistsError, SystemStateError
from ..kernel.bpf import tc_programs
from .change import Change, run_tool, tool
from .net import link_info, netns_path, ns_alive, socket_in


def _tc(ns: str | None) -> list[str]:
    return ["tc", "-n", ns] if ns else ["tc"]


def qdiscs(ns: str | None, dev: str) -> list[dict[str, Any]]:
    if not ns_alive(ns):
        return []
    res = run_tool([*_tc(ns), "-j", "qdisc", "show", "dev", dev])
    return json.loads(res.stdout or "[]") if res.status == 0 else []


def qdisc_backlog(ns: str | None, dev: str) -> int:
    """The bytes queued in a link's root qdisc now (its children's included); 0 when the
    link is gone."""
    if not ns_alive(ns):
        return 0
    res = run_tool([*_tc(ns), "-s", "-j", "qdisc", "show", "dev", dev])
    found = json.loads(res.stdout or "[]") if res.status == 0 else []
    return sum(int(q.get("backlog", 0)) for q in found if q.get("root"))


def tc_classes(ns: str | None, dev: str) -> list[dict[str, Any]]:
    """The classes on a link with their counters: [{"class": "htb", "handle": "1:10",
    "bytes": ..., "packets": ...}] (tc has no JSON output for classes)."""
    if not ns_alive(ns):
        return []
    res = run_tool([*_tc(ns), "-s", "class", "show", "dev", dev])
    if res.status != 0:
        return []
    found: list[dict[str, Any]] = []
    for line in (res.stdout or "").splitlines():
        words = line.split()
        if len(words) >= 3 and words[0] == "class":
            found.append({"class": words[1], "handle": words[2], "bytes": 0, "packets": 0})
        elif found and len(words) >= 4 and words[0] == "Sent":
            found[-1]["bytes"], found[-1]["packets"] = int(words[1]), int(words[3])
    return found


def _qhandle(handle: str) -> str:
    return handle if handle.endswith(":") else handle + ":"


def _ifindex_of(old: Any) -> int | None:
    """The link's index in a qdisc's or class's old state ({"ifindex", "there"}; a bare
    index in a journal of a version that did not say whether the object was there)."""
    return old.get("ifindex") if isinstance(old, dict) else old


def _there(old: Any) -> bool:
    return isinstance(old, dict) and bool(old.get("there"))


def _taken(what: str, dev: str, found: dict[str, Any]) -> ExistsError:
    return ExistsError(f"{dev} already has {what} ({found.get('kind') or found.get('class')} "
                       f"{found.get('handle')}): not replacing someone's shaping",
                       "another run or an administrator put it there: remove it first, "
                       "or choose another interface")


@dataclass
class Qdisc(Change):
    """A queueing discipline added (never replacing one: `tc qdisc add` fails where a
    non-default one is already at that place) at `parent` ("root", "ingress" or a class)
    with `handle`, of `qkind` with its `args`. Known by its handle and kind on the link:
    a qdisc with that handle there before the change is someone else's (`existed`), and
    one that makes the add fail is named in an `ExistsError` (73)."""

    kind: ClassVar[str] = "qdisc"
    makes: ClassVar[bool] = True
    ns: str | None
    dev: str
    parent: str
    handle: str
    qkind: str
    args: list[str] = field(default_factory=list)

    def describe(self) -> str:
        return f"{self.qkind} qdisc {self.handle} on {self.dev} ({self.parent})"

    def _where(self) -> list[str]:
        if self.parent == "ingress":
            return []  # the ingress qdisc's kind says where it goes
        if self.parent == "root":
            return [self.parent]
        return ["parent", self.parent]

    def _occupant(self) -> dict[str, Any] | None:
        """The qdisc with our handle, or at our place (a root or ingress one that is not
        the kernel's default, one at our parent class), if any."""
        want = _qhandle(self.handle)
        for q in qdiscs(self.ns, self.dev):
            if q.get("handle") == want or (
                    self.parent == "root" and q.get("root")
                    and q.get("handle") not in ("0:", None)) or (
                    self.parent not in ("root", "ingress") and q.get("parent") == self.parent):
                return q
        return None

    def read(self) -> dict[str, Any]:
        info = link_info(self.ns, self.dev)
        if info is None:
            raise SystemStateError(f"no such interface: {self.dev}")
        want = _qhandle(self.handle)
        return {"ifindex": int(info["ifindex"]),
                "there": any(q.get("handle") == want for q in qdiscs(self.ns, self.dev))}

    def existed(self, old: Any) -> bool:
        return _there(old)

    def apply(self) -> None:
        try:
            tool([*_tc(self.ns), "qdisc", "add", "dev", self.dev, *self._where(),
                  "handle", self.handle, self.qkind, *self.args], f"adding {self.describe()}")
        except SystemStateError:
            found = self._occupant()
            if found is not None:
                place = "a root qdisc" if self.parent == "root" else \
                    "an ingress qdisc" if self.parent == "ingress" else \
                    f"a qdisc at {self.parent}"
                raise _taken(place, self.dev, found) from None
            raise

    def undo(self, old: Any, result: Any) -> str | None:
        info = link_info(self.ns, self.dev)
        if info is None or info["ifindex"] != _ifindex_of(old):
            return None  # the link went, and the qdisc with it
        want = _qhandle(self.handle)
        if not any(q.get("handle") == want and q.get("kind") == self.qkind
                   for q in qdiscs(self.ns, self.dev)):
            return None
        where = ["ingress"] if self.parent == "ingress" else \
            [*self._where(), "handle", self.handle]
        tool([*_tc(self.ns), "qdisc", "del", "dev", self.dev, *where],
             f"removing {self.describe()}")
        return None


@dataclass
class TcClass(Change):
    """A class of a classful qdisc (HTB), undone while its qdisc is still ours. A class
    with its id there before the change is someone else's (`existed`), and one that makes
    the add fail is named in an `ExistsError` (73)."""

    kind: ClassVar[str] = "tc-class"
    makes: ClassVar[bool] = True
    ns: str | None
    dev: str
    parent: str
    classid: str
    qkind: str
    args: list[str] = field(default_factory=list)

    def describe(self) -> str:
        return f"{self.qkind} class {self.classid} on {self.dev}"

    def _found(self) -> dict[str, Any] | None:
        return next((c for c in tc_classes(self.ns, self.dev)
                     if c.get("handle") == self.classid), None)

    def read(self) -> dict[str, Any]:
        info = link_info(self.ns, self.dev)
        if info is None:
            raise SystemStateError(f"no such interface: {self.dev}")
        return {"ifindex": int(info["ifindex"]), "there": self._found() is not None}

    def existed(self, old: Any) -> bool:
        return _there(old)

    def apply(self) -> None:
        try:
            tool([*_tc(self.ns), "class", "add", "dev", self.dev, "parent", self.parent,
                  "classid", self.classid, self.qkind, *self.args],
                 f"adding {self.describe()}")
        except SystemStateError:
            found = self._found()
            if found is not None:
                raise _taken(f"a class {self.classid}", self.dev, found) from None
            raise

    def undo(self, old: Any, result: Any) -> None:
        info = link_info(self.ns, self.dev)
        if info is None or info["ifindex"] != _ifindex_of(old):
            return
        if not any(c.get("handle") == self.classid and c.get("class") == self.qkind
                   for c in tc_classes(self.ns, self.dev)):
            return
        res = run_tool([*_tc(self.ns), "class", "del", "dev", self.dev,
                        "classid", self.classid])
        if res.status != 0 and any(c.get("handle") == self.classid
                                   for c in tc_classes(self.ns, self.dev)):
            raise SystemStateError(f"could not remove {self.describe()}: "
                                   f"{(res.stderr or '').strip()}")


def change_class(ns: str | None, dev: str, parent: str, classid: str, qkind: str,
                 args: list[str]) -> None:
    """Set new parameters (a rate) on a class a transaction made (a `TcClass` change):
    the class keeps its identity, so that change's undo still removes it; nothing else is
    to put back. A controller moves a class's rate this way many times a second."""
    tool([*_tc(ns), "class", "change", "dev", dev, "parent", parent, "classid", classid,
          qkind, *args], f"changing {qkind} class {classid} on {dev}")


def _at(parent: str) -> list[str]:
    """Where a filter is, in tc's words: the ingress qdisc (ffff:) or a qdisc's handle."""
    return ["ingress"] if parent == "ffff:" else ["parent", parent]


def tc_filters(ns: str | None, dev: str, parent: str) -> list[dict[str, Any]]:
    """`tc -j filter show` at qdisc `parent` of `dev` ([] when the link or qdisc is gone)."""
    if link_info(ns, dev) is None:
        return []
    res = run_tool([*_tc(ns), "-j", "filter", "show", "dev", dev, *_at(parent)])
    if res.status != 0:
        return []
    return list(json.loads(res.stdout or "[]"))


def _free_filter_slot(ns: str | None, dev: str, parent: str, pref: int, what: str) -> int:
    """The interface's index, when no filter is at priority `pref` of `parent` yet."""
    info = link_info(ns, dev)
    if info is None:
        raise SystemStateError(f"no such interface: {dev}")
    if any(f.get("pref") == pref for f in tc_filters(ns, dev, parent)):
        raise SystemStateError(f"{what} is already there")
    return int(info["ifindex"])


def _del_filter(ns: str | None, dev: str, parent: str, pref: int, old: Any, what: str) -> None:
    info = link_info(ns, dev)
    if info is None or info["ifindex"] != old:
        return  # the link went, and its filters with it
    if not any(f.get("pref") == pref for f in tc_filters(ns, dev, parent)):
        return
    tool([*_tc(ns), "filter", "del", "dev", dev, *_at(parent), "pref", str(pref)],
         f"removing {what}")


@dataclass
class TcFilter(Change):
    """A filter at priority `pref` of qdisc `parent` ("ffff:": the ingress qdisc), of the
    kind and with the actions its `args` say (``u32 match u32 0 0 action mirred ...``)."""

    kind: ClassVar[str] = "tc-filter"
    makes: ClassVar[bool] = True  # a taken priority is refused by `read`
    ns: str | None
    dev: str
    parent: str
    pref: int
    args: list[str] = field(default_factory=list)

    def describe(self) -> str:
        return f"tc filter {self.pref} at {self.parent} on {self.dev}"

    def read(self) -> int:
        return _free_filter_slot(self.ns, self.dev, self.parent, self.pref, self.describe())

    def apply(self) -> None:
        tool([*_tc(self.ns), "filter", "add", "dev", self.dev, *_at(self.parent), "pref",
              str(self.pref), *self.args], f"adding {self.describe()}")

    def undo(self, old: Any, result: Any) -> None:
        _del_filter(self.ns, self.dev, self.parent, self.pref, old, self.describe())


@dataclass
class _BpfFilter(Change):
    """A tc BPF classifier (`kernel.bpf.tc_programs`) as a cls_bpf filter at priority
    `pref` of qdisc `parent` (an HTB's handle, "1:") on `dev`, attached by netlink with
    the program's descriptor; subclasses say which program (`_load`)."""

    ns: str | None
    dev: str
    parent: str
    pref: int
    what: ClassVar[str] = "BPF"
    makes: ClassVar[bool] = True  # a taken priority is refused by `read`

    @abstractmethod
    def _load(self) -> int:
        """Load the program; return its descriptor."""

    def describe(self) -> str:
        return f"{self.what} classifier {self.pref} at {self.parent} on {self.dev}"

    def read(self) -> int:
        return _free_filter_slot(self.ns, self.dev, self.parent, self.pref, self.describe())

    def apply(self) -> None:
        ifindex = self.read()
        major = int(self.parent.rstrip(":"), 16)
        prog = self._load()
        try:
            sock = socket_in(netns_path(self.ns) if self.ns else None, socket.AF_NETLINK,
                             socket.SOCK_RAW | socket.SOCK_CLOEXEC, socket.NETLINK_ROUTE)
            with sock:
                sock.bind((0, 0))
                tc_programs.add_filter(sock, ifindex, major << 16, self.pref, prog,
                                 f"bb_{self.what}", self.what)
        finally:
            os.close(prog)

    def undo(self, old: Any, result: Any) -> None:
        _del_filter(self.ns, self.dev, self.parent, self.pref, old, self.describe())


@dataclass
class BpfClassifier(_BpfFilter):
    """The ingress classifier (`tc_programs.classifier_program`): TCP segments for sockets with
    the socket priority `priority` go to class `classid`."""

    kind: ClassVar[str] = "tc-bpf-classifier"
    what: ClassVar[str] = "ingress"
    priority: int
    classid: int

    def _load(self) -> int:
        return tc_programs.load_classifier(self.priority, self.classid)


@dataclass
class ClassidClassifier(_BpfFilter):
    """The egress classifier by cgroup v1 (`tc_programs.classid_program`): packets sent by
    sockets or processes with the net_cls class id `tag` go to `ack_classid` without data,
    `data_classid` with it (0: neither)."""

    kind: ClassVar[str] = "tc-bpf-classid"
    what: ClassVar[str] = "classid"
    tag: int
    ack_classid: int
    data_classid: int = 0

    def _load(self) -> int:
        return tc_programs.load_classid_classifier(self.tag, self.ack_classid, self.data_classid)
