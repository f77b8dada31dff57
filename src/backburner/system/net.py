"""Network state: namespaces, links and addresses, each made with iproute2 (`ip`) and
undone only when what is there is still what we made (traffic control on a link, its
qdiscs, classes and filters, is `tc`'s module).

A namespace is known by its nsfs inode, a link by its interface index inside its
namespace: a name alone could be reused by someone else between a crash and the
`restore` that follows it. Everything a testbed makes lives inside namespaces it made, so
undoing the namespaces would be enough; each link, address and qdisc is still its own
change, so that the same changes can be made on an interface that stays (the client side
of a policy) and be undone exactly.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass
from typing import Any, ClassVar

from ..base.errors import SystemStateError, UnavailableError
from ..kernel import syscalls
from .change import Change, run_tool, tool

NETNS_DIR = "/run/netns"


def _ip(ns: str | None) -> list[str]:
    return ["ip", "-n", ns] if ns else ["ip"]


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
        try:
            syscalls.setns(there, syscalls.CLONE_NEWNET)
        except OSError as err:
            raise UnavailableError(f"cannot enter network namespace {netns_path}: "
                                   f"{os.strerror(err.errno)}") from None
        try:
            return socket.socket(family, kind, proto)
        finally:
            try:
                syscalls.setns(home, syscalls.CLONE_NEWNET)
            except OSError:  # pragma: no cover - cannot fail
                os._exit(70)  # a thread left in another namespace must not go on
    finally:
        os.close(there)
        os.close(home)


def ns_alive(ns: str | None) -> bool:
    return ns is None or netns_identity(ns) is not None


def link_info(ns: str | None, name: str) -> dict[str, Any] | None:
    """`ip -j link show` of one link, or None when the link (or its namespace) is gone."""
    if not ns_alive(ns):
        return None
    res = run_tool([*_ip(ns), "-j", "link", "show", "dev", name])
    if res.status != 0:
        return None
    found = json.loads(res.stdout or "[]")
    return found[0] if found else None


def link_counters(ns: str | None, name: str) -> tuple[int, int]:
    """(bytes received, bytes sent) by a link so far; (0, 0) when it is gone."""
    if not ns_alive(ns):
        return 0, 0
    res = run_tool([*_ip(ns), "-s", "-j", "link", "show", "dev", name])
    found = json.loads(res.stdout or "[]") if res.status == 0 else []
    stats = found[0].get("stats64", {}) if found else {}
    return int(stats.get("rx", {}).get("bytes", 0)), int(stats.get("tx", {}).get("bytes", 0))


def links(ns: str | None) -> list[dict[str, Any]]:
    return json.loads(tool([*_ip(ns), "-j", "link", "show"], "listing links") or "[]")


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
