"""The adaptive ACK budget: a receiver-side LEDBAT-like rule for the background class.

A fixed budget of ACKs cannot be right: how much data one ACK releases varies (one segment
or two, more after a window update), and the link's rate may not be known at all. So a
small controller measures what the budget is for — the queue at the slow link, which is
not on this machine — and moves the class's rate:

* every `interval_s` it sends one ICMP echo to a peer of the job's connections (found
  through the job's cgroup: its processes' sockets), from a socket outside the job's
  group, so the echo is never held in the job's ACK class; the reply crosses the same
  downstream queue as the job's data;
* the shortest round trip seen over the last `base_window_s` is the path's own delay; what
  a round trip has above it is queueing delay;
* below the target delay the budget grows (multiplicatively, so a fast link is found in a
  few seconds), above it the budget shrinks in proportion to the excess, and a lost echo
  counts as a long queue. The budget stays between a floor (the job is never switched off)
  and a ceiling.

When no echo can be sent (no peer yet, a peer that does not answer ICMP), the budget does
not grow: it stays where the evidence left it.
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from .. import system
from ..errors import BackburnerError, UnavailableError

CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)
#: Signals the job runner takes with sigwaitinfo: this thread must never take them.
_BLOCKED = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGCHLD}


def icmp_socket(netns_path: str | None) -> socket.socket:
    """A raw ICMP socket (root) in the namespace at `netns_path` (None: ours): this thread
    enters the namespace for the one call and comes back."""
    if netns_path is None:
        return socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    there = os.open(netns_path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        if _libc.setns(there, CLONE_NEWNET) != 0:
            raise UnavailableError(f"cannot enter network namespace {netns_path}: "
                                   f"{os.strerror(ctypes.get_errno())}")
        try:
            return socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
        finally:
            if _libc.setns(home, CLONE_NEWNET) != 0:  # pragma: no cover - cannot fail
                os._exit(70)  # a thread left in another namespace must not go on
    finally:
        os.close(there)
        os.close(home)


def _checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


def echo(sock: socket.socket, addr: str, ident: int, seq: int, timeout_s: float) -> float | None:
    """One echo's round trip in seconds, or None when no reply came in time."""
    head = struct.pack("!BBHHH", 8, 0, 0, ident, seq)
    payload = b"backburner"
    packet = struct.pack("!BBHHH", 8, 0, _checksum(head + payload), ident, seq) + payload
    t0 = time.monotonic()
    sock.sendto(packet, (addr, 0))
    end = t0 + timeout_s
    while (left := end - time.monotonic()) > 0:
        ready, _, _ = select.select([sock], [], [], left)
        if not ready:
            break
        data, _ = sock.recvfrom(2048)
        ihl = (data[0] & 0x0F) * 4
        if len(data) >= ihl + 8:
            typ, _code, _sum, rid, rseq = struct.unpack("!BBHHH", data[ihl:ihl + 8])
            if typ == 0 and rid == ident and rseq == seq:
                return time.monotonic() - t0
    return None


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    except OSError:
        pass
    return inodes


def job_peers(group: str) -> list[str]:
    """The remote IPv4 addresses of the established TCP connections held by the processes
    of the cgroup v2 `group`: their sockets (by inode, from their descriptors) looked up
    in their own namespace's table (`/proc/PID/net/tcp`), so no port is guessed and the
    namespace the job runs in is the one read."""
    peers: list[str] = []
    try:
        with open(os.path.join(group, "cgroup.procs")) as f:
            pids = [int(x) for x in f.read().split()]
    except OSError:
        return peers
    for pid in pids:
        inodes = _socket_inodes(pid)
        try:
            with open(f"/proc/{pid}/net/tcp") as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            w = row.split()
            if len(w) > 9 and w[3] == "01" and w[9] in inodes:  # 01: ESTABLISHED
                hexaddr = w[2].split(":")[0]
                host = socket.inet_ntoa(struct.pack("<I", int(hexaddr, 16)))
                if host not in peers:
                    peers.append(host)
    return peers


@dataclass
class Rule:
    """The LEDBAT-like rule, in ACK-class rates (bit/s of `mpu`-sized packets)."""

    target_s: float = 0.020
    floor_bit: int = 400_000
    ceiling_bit: int = 10_000_000_000
    grow: float = 0.08       # per step, at zero queueing delay
    shrink: float = 0.10     # per step, at twice the target or more
    base_window_s: float = 30.0

    def next_rate(self, rate: float, queue_s: float | None) -> float:
        if queue_s is None:  # the echo was lost: a full queue, or a dropping one
            factor = 1 - self.shrink
        else:
            off = (self.target_s - queue_s) / self.target_s  # 1 at an empty queue
            factor = 1 + self.grow * off if off > 0 else 1 + self.shrink * max(off, -1.0)
        return min(self.ceiling_bit, max(self.floor_bit, rate * factor))


@dataclass
class Pacer:
    """The controller thread for one background class; `start()`, then `stop()`."""

    ns: str | None
    dev: str
    classid: str
    group: str
    rate_bit: float
    set_rate: Callable[[int], None]
    rule: Rule = field(default_factory=Rule)
    interval_s: float = 0.1
    history: list[tuple[float, float, float | None]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        sock = icmp_socket(system.netns_path(self.ns) if self.ns else None)
        self._thread = threading.Thread(target=self._run, args=(sock,), daemon=True,
                                        name="backburner-pacer")
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5.0)

    def _run(self, sock: socket.socket) -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, _BLOCKED)
        ident = (os.getpid() ^ threading.get_native_id()) & 0xFFFF
        rtts: deque[tuple[float, float]] = deque()
        seq, peers, peers_at = 0, [], 0.0
        applied = self.rate_bit
        with sock:
            while not self._stop.wait(self.interval_s):
                now = time.monotonic()
                if not peers or now - peers_at > 2.0:
                    peers, peers_at = job_peers(self.group), now
                if not peers:
                    continue
                seq = (seq + 1) & 0xFFFF
                rtt = echo(sock, peers[seq % len(peers)], ident, seq, 1.0)
                if rtt is None and not rtts:
                    continue  # no answer ever: no evidence, the budget stays
                queue: float | None = None
                if rtt is not None:
                    rtts.append((now, rtt))
                    while rtts and now - rtts[0][0] > self.rule.base_window_s:
                        rtts.popleft()
                    queue = rtt - min(r for _, r in rtts)
                self.rate_bit = self.rule.next_rate(self.rate_bit, queue)
                self.history.append((now, self.rate_bit, queue))
                if abs(self.rate_bit - applied) >= 0.02 * applied:
                    try:
                        self.set_rate(int(self.rate_bit))
                    except BackburnerError:
                        return  # the class went (the policy is being undone)
                    applied = self.rate_bit
