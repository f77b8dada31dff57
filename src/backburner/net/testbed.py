"""A slow link with real packets, all inside network namespaces of its own, so the host's
interfaces are never touched:

    server ns            router ns                       client ns
    <s>0 10.77.0.1 ── veth ── <r>0 ┐ bridge ┌ <r>1 ── veth ── <c>0 10.77.0.2
                                   └ the link: TBF at RATE, queue BUFFER on both ports

The router bridges the two veths, so no forwarding switch is turned on anywhere; its two
ports' egress is the slow line (downstream toward the client, upstream toward the
server), a token bucket at the link's rate with a queue as deep as the spec says, as a
consumer modem has. The server is a spawned HTTP server that dies with us; the probe, the
downloads and any job under test run in the client namespace (``client_ns``).

Every namespace, link, address and qdisc is a journaled change of `tx`: the end of the
transaction, or `backburner restore` after a SIGKILL, removes it all.
"""

from __future__ import annotations

import math
import re
import secrets
import subprocess
from dataclasses import dataclass

from .. import spawn, system
from ..base.errors import SystemStateError, UnavailableError
from .link import MTU_BYTES, LinkSpec

SERVER_ADDR = "10.77.0.1"
CLIENT_ADDR = "10.77.0.2"
PORT = 8000
PAGE_BYTES = 10_000
SERVER_CC = "cubic"


@dataclass(frozen=True)
class Testbed:
    token: str
    link: LinkSpec

    @property
    def server_ns(self) -> str:
        return f"bb{self.token}s"

    @property
    def router_ns(self) -> str:
        return f"bb{self.token}r"

    @property
    def client_ns(self) -> str:
        return f"bb{self.token}c"

    @property
    def client_dev(self) -> str:
        return f"bb{self.token}c0"

    @property
    def client_netns_path(self) -> str:
        return system.netns_path(self.client_ns)


def check(link: LinkSpec) -> None:
    """What this kernel lacks for `link`, as one line (69), before anything changes."""
    if link.delay_ms > 0 and not qdisc_known("netem"):
        raise UnavailableError(
            f"link delay {link.delay_ms:g}ms needs the netem qdisc, which this kernel lacks",
            "give a delay of 0ms here (the queue still grows), or use the VM guest")
    if not qdisc_known("tbf"):
        raise UnavailableError("the slow link needs the tbf qdisc, which this kernel lacks")


_PROBE_ARGS = {"tbf": ["rate", "1mbit", "burst", "1600", "limit", "3000"]}


def qdisc_known(kind: str) -> bool:
    """Whether `tc` can make a qdisc of this kind: asked of the kernel in a throwaway
    namespace's loopback, which goes with the namespace (made and removed in one
    transaction of its own)."""
    bed = f"bbq{secrets.token_hex(3)}"
    with system.Transaction("net-check") as tx:
        tx.apply(system.NetNamespace(bed))
        try:
            tx.apply(system.Qdisc(bed, "lo", "root", "1", kind, _PROBE_ARGS.get(kind, [])))
        except SystemStateError as err:
            if "unknown" in str(err).lower():
                return False
            raise
        return True


def build(tx: system.Transaction, link: LinkSpec) -> Testbed:
    bed = Testbed(secrets.token_hex(2), link)
    s, r, c = bed.server_ns, bed.router_ns, bed.client_ns
    for ns in (s, r, c):
        tx.apply(system.NetNamespace(ns))
        tx.apply(system.LinkUp(ns, "lo"))
    tx.apply(system.Link(s, f"{s}0", "veth", peer=f"{r}0", peer_ns=r))
    tx.apply(system.Link(c, f"{c}0", "veth", peer=f"{r}1", peer_ns=r))
    tx.apply(system.Link(r, f"{r}br", "bridge"))
    for port in (f"{r}0", f"{r}1"):
        tx.apply(system.LinkUp(r, port, master=f"{r}br"))
    tx.apply(system.LinkUp(r, f"{r}br"))
    for ns, addr in ((s, SERVER_ADDR), (c, CLIENT_ADDR)):
        tx.apply(system.Address(ns, f"{ns}0", f"{addr}/24"))
        tx.apply(system.LinkUp(ns, f"{ns}0"))
    for port in (f"{r}0", f"{r}1"):
        tx.apply(system.Qdisc(r, port, "root", "1", "tbf", _tbf_args(link)))
        if link.delay_ms > 0:
            tx.apply(system.Qdisc(r, port, "1:1", "2", "netem",
                                  ["delay", f"{link.delay_ms / 2:g}ms",
                                   "limit", str(_netem_limit(link))]))
    return bed


def _netem_limit(link: LinkSpec) -> int:
    """netem under the token bucket replaces the bucket's own queue, so its limit is the
    link's buffer: the buffer's frames, and those on their way through the delay."""
    flight = link.rate_bit * link.delay_ms / 2 / 8000
    return math.ceil((link.buffer_bytes + flight) / MTU_BYTES) + 1


def _tbf_args(link: LinkSpec) -> list[str]:
    return ["rate", f"{link.rate_bit}bit", "burst", str(MTU_BYTES + 100),
            "limit", str(link.buffer_bytes)]


def start_server(bed: Testbed) -> spawn.Child:
    """The HTTP server in the server namespace, dying with us; returned once it listens.
    In a process group of its own: a ^C at the terminal is ours to handle, and stops it
    with the rest (in our group it took the ^C itself, with a traceback on the terminal)."""
    child = spawn.launch(spawn.python_module("backburner.net.server", SERVER_ADDR,
                                            str(PORT), SERVER_CC, str(PAGE_BYTES)),
                         netns=system.netns_path(bed.server_ns), stdout=subprocess.PIPE,
                         new_group=True, die_with_parent=True)
    if child.wait_ready(10.0, line=re.compile("^ready")) is None:
        child.stop()
        raise SystemStateError("the testbed's HTTP server did not start")
    return child


def client(bed: Testbed, argv: list[str], cgroup_procs: tuple[str, ...] = ()) -> spawn.Child:
    """A program in the client namespace (its stdout piped), e.g. a probe or a load."""
    return spawn.launch(argv, netns=bed.client_netns_path, stdout=subprocess.PIPE,
                        cgroup_procs=cgroup_procs, die_with_parent=True)
