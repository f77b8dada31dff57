"""The adaptive budgets: a receiver-side LEDBAT-like rule for the background job.

A fixed budget cannot be right: how much data one ACK releases varies (one segment or
two, more after a window update), and the link's rate may not be known at all. So a small
controller measures what the budgets are for — the queue at the slow link, which is not
on this machine — and moves them (its `Knob`s: the ACK class's rate, the window clamp):

* every `interval_s` it sends one ICMP echo to a peer of the job's connections (found
  through the job's cgroup: its processes' sockets), from a socket outside the job's
  group, so the echo is never held in the job's ACK class; the reply crosses the same
  downstream queue as the job's data;
* the shortest round trip seen over the last `base_window_s` is the path's own delay; what
  a round trip has above it is queueing delay;
* below the target delay a budget grows (multiplicatively, so a fast link is found in a
  few seconds), above it the budget shrinks in proportion to the excess, and a lost echo
  counts as a long queue. The budget stays between a floor (the job is never switched off)
  and a ceiling. The window alone drops to its floor now and then (`Slowdown`), so that a
  queue it keeps standing does not pass for the path's own delay.

When no echo can be sent (no peer yet, a peer that does not answer ICMP), the budgets do
not grow: they stay where the evidence left them. The path may go while the job runs (its
address removed, a route or the link down: the echo cannot be sent), and so may what a
budget moves (the class deleted by hand): the controller says so once, in one line, keeps
the budgets where they are, and goes on adapting when the path comes back. It never dies
of it: a controller thread that ended would leave the budgets frozen for the rest of the
job, with nobody told.
"""

from __future__ import annotations

import logging
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
from ..kernel import cgroups

log = logging.getLogger(__name__)
#: Signals the job runner takes with sigwaitinfo: this thread must never take them.
_BLOCKED = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGCHLD}


def icmp_socket(netns_path: str | None) -> socket.socket:
    """A raw ICMP socket (root) in the namespace at `netns_path` (None: ours)."""
    return system.socket_in(netns_path, socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)


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


def job_connections(group: str) -> list[str]:
    """The remote IPv4 address of each established TCP connection held by the processes
    of the cgroup v2 `group`: their sockets (by inode, from their descriptors) looked up
    in their own namespace's table (`/proc/PID/net/tcp`), so no port is guessed and the
    namespace the job runs in is the one read. A socket two processes share counts once."""
    found: dict[str, str] = {}
    try:
        pids = cgroups.pids(group)
    except OSError:
        return []
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
                found[w[9]] = socket.inet_ntoa(struct.pack("<I", int(hexaddr, 16)))
    return list(found.values())


def job_peers(group: str) -> list[str]:
    """The distinct peers of the job's established connections (`job_connections`)."""
    return list(dict.fromkeys(job_connections(group)))


@dataclass
class Rule:
    """The LEDBAT-like rule, in ACK-class rates (bit/s of `mpu`-sized packets)."""

    target_s: float = 0.020
    floor_bit: int = 400_000
    ceiling_bit: int = 10_000_000_000
    grow: float = 0.08       # per step, at zero queueing delay
    shrink: float = 0.10     # per step, at twice the target or more

    def factor(self, queue_s: float | None) -> float:
        """What a budget is multiplied by, for this queueing delay (None: a lost echo,
        a full queue or a dropping one)."""
        if queue_s is None:
            return 1 - self.shrink
        off = (self.target_s - queue_s) / self.target_s  # 1 at an empty queue
        return 1 + self.grow * off if off > 0 else 1 + self.shrink * max(off, -1.0)

    def next_rate(self, rate: float, queue_s: float | None) -> float:
        return min(self.ceiling_bit, max(self.floor_bit, rate * self.factor(queue_s)))


@dataclass
class WindowRule(Rule):
    """The window clamp's rule, in bytes of window of all the job's connections together
    (each gets an equal share, at least `floor_bytes`). Alone, the window follows the
    queueing delay by the same rule as a rate (`next_window`); beside the paced ACKs it
    follows their rate (`follow`): the window that rate needs over the path's own round
    trip (and `margin_s`; none by default: the floor of a segment each is margin enough),
    so the ACK class sets the pace and the window only bounds what a burst of ACKs can
    release."""

    floor_bytes: int = 1448
    ceiling_bytes: int = 64 << 20
    start_bytes: int = 16 * 1448
    margin_s: float = 0.0

    def next_window(self, total: float, queue_s: float | None, conns: int) -> float:
        floor = self.floor_bytes * max(1, conns)
        return min(self.ceiling_bytes, max(floor, total * self.factor(queue_s)))

    def follow(self, rate_bit: float, base_rtt_s: float, conns: int) -> float:
        floor = self.floor_bytes * max(1, conns)
        return min(self.ceiling_bytes, max(floor, rate_bit / 8 * (base_rtt_s + self.margin_s)))


@dataclass
class Slowdown:
    """LEDBAT++'s answer to a path delay never seen: a queue the window keeps standing
    hides the path's own round trip (the echoes' shortest is then the queue's), and the
    rule would take the queue for the path. So first after `first_s`, then every
    `every_s`, the window drops to its floor for `length_s`: the queue drains, an echo
    sees the path's own delay; then the window is back where it was."""

    first_s: float = 2.0
    every_s: float = 20.0
    length_s: float = 0.6
    _next: float | None = None
    _until: float = 0.0
    _saved: float = 0.0

    def step(self, now: float, total: float, floor: float,
             normal: Callable[[], float]) -> float:
        if self._next is None:
            self._next = now + self.first_s
        if now < self._until:
            return floor
        if self._until:
            self._until = 0.0
            return self._saved
        if now >= self._next:
            self._saved, self._until, self._next = total, now + self.length_s, \
                now + self.every_s
            return floor
        return normal()


@dataclass
class Knob:
    """One budget the queueing delay moves: `value` is where it is, `step(value, queue,
    connections)` the next one, `put(value, connections)` makes it so on the machine
    (raising BackburnerError once what it moves is gone). `put` is called when the value
    moved by 2% or the number of the job's connections changed."""

    name: str
    value: float
    step: Callable[[float, float | None, int], float]
    put: Callable[[float, int], None]
    history: list[tuple[float, float]] = field(default_factory=list)


@dataclass
class Pacer:
    """The controller thread for the background job's budgets; `start()`, then `stop()`.
    `history` holds (time, the first knob's value, queueing delay or None) per step.
    The job is the processes of the cgroup v2 `group`, or, with `groups`, of the groups
    it returns when asked (once a second: the network service's units come and go)."""

    ns: str | None
    group: str
    knobs: list[Knob]
    groups: Callable[[], list[str]] | None = None
    interval_s: float = 0.1
    base_window_s: float = 30.0
    current_filter: int = 1
    base_rtt_s: float | None = None  # the path's own round trip, as last measured
    history: list[tuple[float, float, float | None]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _said: set[str] = field(default_factory=set)
    _failing: set[str] = field(default_factory=set)

    def start(self) -> None:
        sock = icmp_socket(system.netns_path(self.ns) if self.ns else None)
        self._thread = threading.Thread(target=self._run, args=(sock,), daemon=True,
                                        name="backburner-pacer")
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5.0)

    @property
    def alive(self) -> bool:
        """Whether the controller thread still runs (it ends only when stopped)."""
        return self._thread is not None and self._thread.is_alive()

    def _failed(self, what: str, why: object) -> None:
        """`what` could not be done: one line the first time it fails for this reason
        (a link that flaps says so once, not every step)."""
        self._failing.add(what)
        key = f"{what}: {why}"
        if key not in self._said:
            self._said.add(key)
            log.warning("the background budgets could not %s (%s): they stay where they "
                        "are until it can", what, why)

    def _done(self, what: str) -> None:
        if what in self._failing:
            self._failing.discard(what)
            log.info("the background budgets can %s again", what)

    def _connections(self) -> list[str]:
        return [c for g in (self.groups() if self.groups else [self.group])
                for c in job_connections(g)]

    def _run(self, sock: socket.socket) -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, _BLOCKED)
        state = _State(ident=(os.getpid() ^ threading.get_native_id()) & 0xFFFF,
                       applied={k.name: (k.value, 0) for k in self.knobs})
        with sock:
            while not self._stop.wait(self.interval_s):
                try:
                    self._step(sock, state)
                except Exception as err:  # noqa: BLE001 - said, and the next step tries again
                    self._failed("take a step", f"{type(err).__name__}: {err}")

    def _step(self, sock: socket.socket, st: _State) -> None:
        now = time.monotonic()
        if not st.conns or now - st.conns_at > 1.0:
            st.conns, st.conns_at = self._connections(), now
        peers = list(dict.fromkeys(st.conns))
        if not peers:
            return
        st.seq = (st.seq + 1) & 0xFFFF
        peer = peers[st.seq % len(peers)]
        try:
            rtt = echo(sock, peer, st.ident, st.seq, 1.0)
        except OSError as err:  # the path went (no address, no route, the link down)
            self._failed(f"reach {peer}", err.strerror or err)
            return  # no evidence: the budgets stay
        self._done(f"reach {peer}")
        if rtt is None and not st.rtts:
            return  # no answer ever: no evidence, the budget stays
        queue: float | None = None
        if rtt is not None:
            st.rtts.append((now, rtt))
            while st.rtts and now - st.rtts[0][0] > self.base_window_s:
                st.rtts.popleft()
            self.base_rtt_s = min(r for _, r in st.rtts)
            # LEDBAT's current delay: the least of the last few, so one echo that met a
            # passing burst does not count as a standing queue
            queue = min(r for _, r in list(st.rtts)[-self.current_filter:]) - self.base_rtt_s
        for k in self.knobs:
            k.value = k.step(k.value, queue, len(st.conns))
            k.history.append((now, k.value))
            was, n = st.applied[k.name]
            if abs(k.value - was) >= 0.02 * was or n != len(st.conns):
                try:
                    k.put(k.value, len(st.conns))
                except Exception as err:  # noqa: BLE001 - what it moves went, for now
                    if self._stop.is_set():
                        return  # the policy is being undone
                    self._failed(f"set the {k.name}", err)
                    continue  # tried again at the next step
                self._done(f"set the {k.name}")
                st.applied[k.name] = (k.value, len(st.conns))
        self.history.append((now, self.knobs[0].value, queue))


@dataclass
class _State:
    """What the controller carries from one step to the next."""

    ident: int
    applied: dict[str, tuple[float, int]]
    seq: int = 0
    conns: list[str] = field(default_factory=list)
    conns_at: float = 0.0
    rtts: deque[tuple[float, float]] = field(default_factory=deque)
