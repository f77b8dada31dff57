"""Network state: namespaces, links, addresses, queueing disciplines, their classes and
filters, each made with iproute2 (`ip`, `tc`; the BPF classifier by the netlink request
`tc` would send) and undone only when what is there is still what we made.

A namespace is known by its nsfs inode, a link by its interface index inside its
namespace, a queueing discipline by its handle and kind on that link: a name alone could be
reused by someone else between a crash and the `restore` that follows it. Everything a
testbed makes lives inside namespaces it made, so undoing the namespaces would be enough;
each link, address and qdisc is still its own change, so that the same changes can be made
on an interface that stays (the client side of a policy) and be undone exactly.
"""

from __future__ import annotations

import ctypes
import json
import os
import socket
from abc import abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .. import tcbpf
from ..errors import ExistsError, SystemStateError, UnavailableError
from .change import Change, run_tool, tool

NETNS_DIR = "/run/netns"
CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def _ip(ns: str | None) -> list[str]:
    return ["ip", "-n", ns] if ns else ["ip"]


def _tc(ns: str | None) -> list[str]:
    return ["tc", "-n", ns] if ns else ["tc"]


def netns_path(name: str) -> str:
    return os.path.join(NETNS_DIR, name)


def netns_identity(name: str) -> list[int] | None:
    """[st_dev, st_ino] of a named namespace's nsfs file; None when there is none."""
    try:
        st = os.stat(netns_path(name))
    except OSError:
        return None
    return [st.st_dev, st.st_ino]


def socket_in(netns_path: str | None, family: int, kind: int, proto: int) -> socket.socket:
    """A socket made in the namespace at `netns_path` (None: ours): this thread enters
    the namespace for the one call and comes back (a socket stays in the namespace it
    was made in)."""
    if netns_path is None:
        return socket.socket(family, kind, proto)
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    there = os.open(netns_path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        if _libc.setns(there, CLONE_NEWNET) != 0:
            raise UnavailableError(f"cannot enter network namespace {netns_path}: "
                                   f"{os.strerror(ctypes.get_errno())}")
        try:
            return socket.socket(family, kind, proto)
        finally:
            if _libc.setns(home, CLONE_NEWNET) != 0:  # pragma: no cover - cannot fail
                os._exit(70)  # a thread left in another namespace must not go on
    finally:
        os.close(there)
        os.close(home)


def _ns_alive(ns: str | None) -> bool:
    return ns is None or netns_identity(ns) is not None


def link_info(ns: str | None, name: str) -> dict[str, Any] | None:
    """`ip -j link show` of one link, or None when the link (or its namespace) is gone."""
    if not _ns_alive(ns):
        return None
    res = run_tool([*_ip(ns), "-j", "link", "show", "dev", name])
    if res.status != 0:
        return None
    found = json.loads(res.stdout or "[]")
    return found[0] if found else None


def link_counters(ns: str | None, name: str) -> tuple[int, int]:
    """(bytes received, bytes sent) by a link so far; (0, 0) when it is gone."""
    if not _ns_alive(ns):
        return 0, 0
    res = run_tool([*_ip(ns), "-s", "-j", "link", "show", "dev", name])
    found = json.loads(res.stdout or "[]") if res.status == 0 else []
    stats = found[0].get("stats64", {}) if found else {}
    return int(stats.get("rx", {}).get("bytes", 0)), int(stats.get("tx", {}).get("bytes", 0))


def links(ns: str | None) -> list[dict[str, Any]]:
    return json.loads(tool([*_ip(ns), "-j", "link", "show"], "listing links") or "[]")


def qdiscs(ns: str | None, dev: str) -> list[dict[str, Any]]:
    if not _ns_alive(ns):
        return []
    res = run_tool([*_tc(ns), "-j", "qdisc", "show", "dev", dev])
    return json.loads(res.stdout or "[]") if res.status == 0 else []


def qdisc_backlog(ns: str | None, dev: str) -> int:
    """The bytes queued in a link's root qdisc now (its children's included); 0 when the
    link is gone."""
    if not _ns_alive(ns):
        return 0
    res = run_tool([*_tc(ns), "-s", "-j", "qdisc", "show", "dev", dev])
    found = json.loads(res.stdout or "[]") if res.status == 0 else []
    return sum(int(q.get("backlog", 0)) for q in found if q.get("root"))


def tc_classes(ns: str | None, dev: str) -> list[dict[str, Any]]:
    """The classes on a link with their counters: [{"class": "htb", "handle": "1:10",
    "bytes": ..., "packets": ...}] (tc has no JSON output for classes)."""
    if not _ns_alive(ns):
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


@dataclass
class NetNamespace(Change):
    """A named network namespace (``ip netns add``); deleting it takes every link,
    address and qdisc inside it with it."""

    kind: ClassVar[str] = "netns"
    makes: ClassVar[bool] = True
    name: str

    def describe(self) -> str:
        return f"network namespace {self.name}"

    def read(self) -> list[int] | None:
        return netns_identity(self.name)

    def existed(self, old: Any) -> bool:
        return old is not None

    def apply(self) -> list[int] | None:
        if netns_identity(self.name) is not None:
            raise SystemStateError(f"network namespace {self.name} already exists")
        tool(["ip", "netns", "add", self.name], f"making network namespace {self.name}")
        return netns_identity(self.name)

    def undo(self, old: Any, result: Any) -> str | None:
        now = netns_identity(self.name)
        if old is not None or now is None:
            return None  # not ours, or already gone
        if result is not None and now != result:
            return f"kept network namespace {self.name}: it is not the one we made"
        tool(["ip", "netns", "del", self.name], f"removing network namespace {self.name}")
        return None


@dataclass
class Link(Change):
    """A virtual link (`ifb`, `bridge`, or a `veth` pair whose other end is `peer` in
    `peer_ns`). Deleting either end of a veth pair deletes both."""

    kind: ClassVar[str] = "link"
    makes: ClassVar[bool] = True
    ns: str | None
    name: str
    type: str
    peer: str | None = None
    peer_ns: str | None = None

    def describe(self) -> str:
        where = f" in {self.ns}" if self.ns else ""
        pair = f" (peer {self.peer} in {self.peer_ns})" if self.peer else ""
        return f"{self.type} link {self.name}{where}{pair}"

    def read(self) -> int | None:
        info = link_info(self.ns, self.name)
        return info["ifindex"] if info else None

    def existed(self, old: Any) -> bool:
        return old is not None

    def apply(self) -> int:
        if link_info(self.ns, self.name) is not None:
            raise SystemStateError(f"link {self.name} already exists")
        cmd = [*_ip(self.ns), "link", "add", self.name, "type", self.type]
        if self.peer:
            cmd += ["peer", "name", self.peer]
            if self.peer_ns:
                cmd += ["netns", self.peer_ns]
        tool(cmd, f"making {self.describe()}")
        info = link_info(self.ns, self.name)
        if info is None:
            raise SystemStateError(f"{self.describe()} vanished as it was made")
        return int(info["ifindex"])

    def undo(self, old: Any, result: Any) -> str | None:
        if old is not None:
            return None
        info = link_info(self.ns, self.name)
        if info is None:
            return None
        if result is not None and info["ifindex"] != result:
            return f"kept link {self.name}: it is not the one we made"
        tool([*_ip(self.ns), "link", "del", self.name], f"removing {self.describe()}")
        return None


@dataclass
class LinkUp(Change):
    """A link set up, optionally as a port of `master` (a bridge); undo puts back its old
    state and master."""

    kind: ClassVar[str] = "link-up"
    makes: ClassVar[bool] = False
    ns: str | None
    name: str
    master: str | None = None

    def describe(self) -> str:
        return f"link {self.name} up" + (f" in {self.master}" if self.master else "")

    def read(self) -> dict[str, Any] | None:
        info = link_info(self.ns, self.name)
        if info is None:
            raise SystemStateError(f"no such interface: {self.name}")
        return {"ifindex": info["ifindex"], "up": "UP" in info.get("flags", []),
                "master": info.get("master")}

    def apply(self) -> None:
        cmd = [*_ip(self.ns), "link", "set", "dev", self.name]
        if self.master:
            cmd += ["master", self.master]
        tool([*cmd, "up"], f"setting {self.describe()}")

    def undo(self, old: Any, result: Any) -> None:
        info = link_info(self.ns, self.name)
        if info is None or old is None or info["ifindex"] != old["ifindex"]:
            return
        cmd = [*_ip(self.ns), "link", "set", "dev", self.name]
        if info.get("master") != old["master"]:
            cmd += ["master", old["master"]] if old["master"] else ["nomaster"]
        tool([*cmd, "up" if old["up"] else "down"], f"putting back link {self.name}")


@dataclass
class Address(Change):
    """An IP address (CIDR) on a link."""

    kind: ClassVar[str] = "address"
    makes: ClassVar[bool] = True
    ns: str | None
    dev: str
    cidr: str

    def describe(self) -> str:
        return f"address {self.cidr} on {self.dev}"

    def _present(self) -> bool:
        if link_info(self.ns, self.dev) is None:
            return False
        out = json.loads(tool([*_ip(self.ns), "-j", "addr", "show", "dev", self.dev],
                              "listing addresses") or "[]")
        ip, _, plen = self.cidr.partition("/")
        return any(a.get("local") == ip and str(a.get("prefixlen")) == plen
                   for link in out for a in link.get("addr_info", []))

    def read(self) -> bool:
        return self._present()

    def existed(self, old: Any) -> bool:
        return bool(old)

    def apply(self) -> None:
        tool([*_ip(self.ns), "addr", "add", self.cidr, "dev", self.dev],
             f"adding {self.describe()}")

    def undo(self, old: Any, result: Any) -> None:
        if old or not self._present():
            return
        tool([*_ip(self.ns), "addr", "del", self.cidr, "dev", self.dev],
             f"removing {self.describe()}")


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
    """A tc BPF classifier (`tcbpf`) as a cls_bpf filter at priority `pref` of qdisc
    `parent` (an HTB's handle, "1:") on `dev`, attached by netlink with the program's
    descriptor; subclasses say which program (`_load`)."""

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
                tcbpf.add_filter(sock, ifindex, major << 16, self.pref, prog,
                                 f"bb_{self.what}", self.what)
        finally:
            os.close(prog)

    def undo(self, old: Any, result: Any) -> None:
        _del_filter(self.ns, self.dev, self.parent, self.pref, old, self.describe())


@dataclass
class BpfClassifier(_BpfFilter):
    """The ingress classifier (`tcbpf.classifier_program`): TCP segments for sockets with
    the socket priority `priority` go to class `classid`."""

    kind: ClassVar[str] = "tc-bpf-classifier"
    what: ClassVar[str] = "ingress"
    priority: int
    classid: int

    def _load(self) -> int:
        return tcbpf.load_classifier(self.priority, self.classid)


@dataclass
class ClassidClassifier(_BpfFilter):
    """The egress classifier by cgroup v1 (`tcbpf.classid_program`): packets sent by
    sockets or processes with the net_cls class id `tag` go to `ack_classid` without data,
    `data_classid` with it (0: neither)."""

    kind: ClassVar[str] = "tc-bpf-classid"
    what: ClassVar[str] = "classid"
    tag: int
    ack_classid: int
    data_classid: int = 0

    def _load(self) -> int:
        return tcbpf.load_classid_classifier(self.tag, self.ack_classid, self.data_classid)
