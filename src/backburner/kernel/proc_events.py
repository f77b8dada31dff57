"""The kernel's process events connector: fork, exec, comm change and exit, as they happen.

The one client of it: `govern` follows every start on the machine with it, `readahead
record` the process tree of the program it records.

A netlink socket (AF_NETLINK, NETLINK_CONNECTOR) bound to the CN_IDX_PROC multicast group,
subscribed with PROC_CN_MCAST_LISTEN, receives one datagram per event from the kernel
(drivers/connector/cn_proc.c). The layout of each, all native-endian:

    struct nlmsghdr   { u32 len; u16 type; u16 flags; u32 seq; u32 pid; }        16 bytes
    struct cn_msg     { u32 idx; u32 val; u32 seq; u32 ack; u16 len; u16 flags; } 20 bytes
    struct proc_event { u32 what; u32 cpu; u64 timestamp_ns; union event_data; }

event_data: fork {parent_pid, parent_tgid, child_pid, child_tgid}, exec {pid, tgid},
comm {pid, tgid, char comm[16]}, exit {pid, tgid, exit_code, exit_signal, parent_pid,
parent_tgid}; all pids are ints. "pid" is the thread id, "tgid" the process id.

The kernel counts its listeners (LISTEN adds one, IGNORE takes it away; closing the socket
does not) and builds an event for every fork, exec and exit on the machine while the
count is above zero. So `close` always says IGNORE first: a listener that only closed its
socket would leave the kernel doing that work for nobody until the next boot.

Events can be lost: when our socket's receive buffer is full the kernel drops them and the
next recv fails with ENOBUFS; an allocation failure in the kernel drops one silently. The
kernel numbers events per CPU (cn_msg.seq from a per-CPU counter, proc_event.cpu says
which), so a gap in one CPU's numbers is a loss too. Either way the caller rescans /proc.
"""

from __future__ import annotations

import errno
import logging
import os
import select
import socket
import struct
import time
from collections.abc import Callable, Container, Iterator
from dataclasses import dataclass
from typing import NamedTuple

from ..base.errors import UnavailableError, denied
from . import netlink

log = logging.getLogger(__name__)

NETLINK_CONNECTOR = 11
CN_IDX_PROC = 1
CN_VAL_PROC = 1
PROC_CN_MCAST_LISTEN = 1
PROC_CN_MCAST_IGNORE = 2
SO_RCVBUFFORCE = 33

NONE, FORK, EXEC, UID, GID, SID, PTRACE, COMM = 0, 1, 2, 4, 0x40, 0x80, 0x100, 0x200
COREDUMP, EXIT = 0x40000000, 0x80000000
NAMES = {NONE: "none", FORK: "fork", EXEC: "exec", UID: "uid", GID: "gid", SID: "sid",
         PTRACE: "ptrace", COMM: "comm", COREDUMP: "coredump", EXIT: "exit"}

#: nlmsghdr + cn_msg + proc_event head
_HEAD = struct.Struct(netlink.HEADER.format + "IIIIHH" "IIQ")
_DATA_AT = _HEAD.size  # 52
_FORK = struct.Struct("=iiii")
_PAIR = struct.Struct("=ii")
_COMM = struct.Struct("=ii16s")
_ACK = struct.Struct("=I")
EVENT_SIZE = _DATA_AT + _COMM.size  # 76: every event datagram has the union's full size
RCVBUF = 8 << 20  # room for bursts (a `make -j` forks thousands per second)


class Event(NamedTuple):
    """One process event. For fork: pid/tgid are the child's, ppid/ptgid the parent's."""

    what: int
    cpu: int
    seq: int
    pid: int
    tgid: int
    ppid: int = 0
    ptgid: int = 0
    comm: str = ""

    @property
    def name(self) -> str:
        return NAMES.get(self.what, hex(self.what))

    @property
    def is_thread(self) -> bool:
        return self.pid != self.tgid


def parse(buf: bytes | bytearray | memoryview, length: int) -> Iterator[Event]:
    """The events in one datagram (normally one; several netlink messages are allowed)."""
    offset = 0
    while offset + _DATA_AT <= length:
        (nl_len, _typ, _fl, _nseq, _npid, idx, val, seq, _ack, _clen, _cfl, what, cpu,
         _ts) = _HEAD.unpack_from(buf, offset)
        if nl_len < _DATA_AT or idx != CN_IDX_PROC or val != CN_VAL_PROC:
            if nl_len < netlink.HEADER.size:
                return
            offset += netlink.align(nl_len)
            continue
        at = offset + _DATA_AT
        if what == FORK:
            ppid, ptgid, pid, tgid = _FORK.unpack_from(buf, at)
            yield Event(what, cpu, seq, pid, tgid, ppid, ptgid)
        elif what == COMM:
            pid, tgid, raw = _COMM.unpack_from(buf, at)
            yield Event(what, cpu, seq, pid, tgid,
                        comm=raw.split(b"\0", 1)[0].decode(errors="replace"))
        elif what == NONE:
            (err,) = _ACK.unpack_from(buf, at)
            yield Event(what, cpu, seq, err, 0)
        else:  # exec, exit and the rest start with (pid, tgid)
            pid, tgid = _PAIR.unpack_from(buf, at)
            yield Event(what, cpu, seq, pid, tgid)
        offset += netlink.align(nl_len)


class SeqTracker:
    """Per-CPU sequence numbers: how many events were skipped since the last one seen."""

    def __init__(self) -> None:
        self.last: dict[int, int] = {}

    def missed(self, cpu: int, seq: int) -> int:
        prev = self.last.get(cpu)
        self.last[cpu] = seq
        if prev is None:
            return 0
        return (seq - prev - 1) & 0xFFFFFFFF if seq != prev else 0

    def reset(self) -> None:
        self.last.clear()


def _control(op: int, events: int | None = None) -> bytes:
    """PROC_CN_MCAST_LISTEN/IGNORE; with `events` (kernel 6.6+) a struct proc_input
    {mcast_op, event_type} that makes the kernel send only those event types."""
    body = struct.pack("=I", op) if events is None else struct.pack("=II", op, events)
    cn = struct.pack("=IIIIHH", CN_IDX_PROC, CN_VAL_PROC, 0, 0, len(body), 0) + body
    return netlink.message(netlink.NLMSG_DONE, 0, cn)


#: New programs and renames: what tells a program by its name starting.
STARTS = EXEC | COMM
ALL = 0xFFFFFFFF  # PROC_EVENT_ALL


@dataclass
class Batch:
    """What one drain of the socket brought: events in order, and whether any were lost."""

    events: list[Event]
    lost: int = 0
    overflow: bool = False

    @property
    def incomplete(self) -> bool:
        return self.overflow or self.lost > 0


class Connector:
    """A subscribed process-events socket. `fileno()` is for poll(); `drain()` reads what
    is queued (waiting for the first event if told to block); `close()` unsubscribes.

    `narrow(events)` asks the kernel (6.6+) for those event types only: most of a busy
    machine's events are forks and exits (of threads, too), and every event received is a
    wake-up. Sequence gaps are counted only while all events are received (the kernel
    numbers events before filtering them); overflows (ENOBUFS) are always seen.

    `sock`, when given, is used instead of a socket of our own: one already bound to the
    connector's group, or a stand-in for the kernel (one end of a socket pair).
    """

    def __init__(self, rcvbuf: int = RCVBUF, *, sock: socket.socket | None = None) -> None:
        self.sock = self._open(rcvbuf) if sock is None else sock
        self.buf = bytearray(4096)
        self.view = memoryview(self.buf)
        self.ints = self.view.cast("i")  # what at [9], pid and tgid at [13] and [14]
        self.seqs = SeqTracker()
        self.only: int | None = None  # the event types asked for; None: every one
        self._overflowed = False
        self._pending: list[Event] = []
        try:
            self._subscribe()
        except BaseException:
            self.sock.close()
            raise

    @classmethod
    def _open(cls, rcvbuf: int) -> socket.socket:
        try:
            sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC,
                                 NETLINK_CONNECTOR)
        except OSError as err:
            raise UnavailableError(
                f"no process events connector: {err.strerror}",
                "the kernel needs CONFIG_CONNECTOR and CONFIG_PROC_EVENTS") from None
        try:
            cls._set_rcvbuf(sock, rcvbuf)
            sock.bind((0, CN_IDX_PROC))
        except BaseException:
            sock.close()
            raise
        return sock

    @staticmethod
    def _set_rcvbuf(sock: socket.socket, size: int) -> None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, size)
        except PermissionError:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, size)

    def _subscribe(self, timeout: float = 5.0) -> None:
        """Listen to everything and wait for the kernel's acknowledgement (a filtered
        listener would not get it: acknowledgements are events of type "none")."""
        try:
            self.sock.send(_control(PROC_CN_MCAST_LISTEN))
        except PermissionError as err:
            raise denied("listening to process events (the netlink connector)",
                         err.strerror) from None
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.sock], [], [], left)[0]:
                raise UnavailableError(
                    "the process events connector did not answer",
                    "it serves only the initial PID and user namespace (not a container)")
            n = self.sock.recv_into(self.buf)
            for ev in parse(self.view, n):
                if ev.what == NONE:
                    if ev.pid:  # the ack's error code
                        raise UnavailableError(f"subscribing to process events failed: "
                                               f"{os.strerror(ev.pid)}")
                    self.seqs.missed(ev.cpu, ev.seq)
                    return
                self._pending.append(ev)  # events that overtook the ack

    @property
    def narrowed(self) -> bool:
        return self.only is not None

    def narrow(self, events: int | None) -> None:
        """Receive only these event types (e.g. `STARTS`), or every one with None. The
        kernel applies it before send() returns; a kernel before 6.6 ignores it (and
        sends everything)."""
        if events == self.only:
            return
        self.sock.send(_control(PROC_CN_MCAST_LISTEN, ALL if events is None else events))
        self.only = events
        self.seqs.reset()

    def fileno(self) -> int:
        return self.sock.fileno()

    def drain(self, block: bool = False, limit: int = 4096) -> Batch:
        """Up to `limit` queued events (the caller comes back for more after acting); with
        `block`, sleep in recv() until the first one arrives."""
        events, self._pending = self._pending, []
        if self._overflowed:
            self._overflowed = False
            self.seqs.reset()
            return Batch(events, 0, overflow=True)
        lost = 0
        count_gaps = not self.narrowed
        missed = self.seqs.missed
        recv = self.sock.recv_into
        view, buf = self.view, self.buf
        flags = 0 if block and not events else socket.MSG_DONTWAIT
        while len(events) < limit:
            try:
                n = recv(buf, 0, flags)
            except BlockingIOError:
                break
            except OSError as err:
                if err.errno == errno.ENOBUFS:
                    log.debug("process events overflowed the socket buffer")
                    self.seqs.reset()
                    return Batch(events, lost, overflow=True)
                raise
            flags = socket.MSG_DONTWAIT
            for ev in parse(view, n):
                if count_gaps:
                    lost += missed(ev.cpu, ev.seq)
                if ev.what != NONE:
                    events.append(ev)
        return Batch(events, lost)

    def wait_start(self, names: Container[bytes], counts: Callable[[int, int, int], None]
                   ) -> Event | None:
        """With the socket narrowed to `STARTS`, sleep until a program starts (or renames
        itself) with one of `names` (kernel names, as bytes), and return that event with
        the name in `comm`; None for anything else worth the full path (another kind of
        event, an overflow: `drain()` then sees it). Others are only counted:
        counts(events, execs, gone). Deliberately a few lines of plain Python with no calls
        of our own: a daemon that waits here runs it for every program started on the
        machine, each time after a sleep, when nothing of it is in the CPU's caches any
        more."""
        recv, buf, ints = self.sock.recv_into, self.buf, self.ints
        open_, read, close, rdonly = os.open, os.read, os.close, os.O_RDONLY | os.O_CLOEXEC
        events = execs = gone = 0
        try:
            while True:
                try:
                    n = recv(buf)
                except OSError as err:
                    if err.errno != errno.ENOBUFS:
                        raise
                    self._overflowed = True
                    return None
                events += 1
                what, pid, tgid = ints[9], ints[13], ints[14]
                if n != EVENT_SIZE or what not in (EXEC, COMM) or pid != tgid:
                    if n == EVENT_SIZE and what == COMM:
                        continue  # a thread renamed itself: rules look at processes
                    self._pending.extend(parse(self.view, n))
                    events -= 1  # counted again by the full path
                    return None
                if what == EXEC:
                    execs += 1
                    try:  # procfs.comm_of, inlined: /proc/PID/comm
                        fd = open_(f"/proc/{tgid}/comm", rdonly)
                    except OSError:
                        gone += 1  # it has exited already
                        continue
                    try:
                        raw = read(fd, 64)
                    except OSError:
                        gone += 1
                        continue
                    finally:
                        close(fd)
                    name = raw[:-1]  # without the newline
                else:
                    name = bytes(buf[_DATA_AT + 8:EVENT_SIZE]).split(b"\0", 1)[0]
                if name in names:
                    return Event(what, 0, 0, pid, tgid, comm=name.decode(errors="replace"))
        finally:
            counts(events, execs, gone)

    def close(self) -> None:
        """Unsubscribe (IGNORE: the kernel's count of listeners goes down), then close.
        Closing again does nothing."""
        if self.sock.fileno() < 0:
            return
        try:
            self.sock.send(_control(PROC_CN_MCAST_IGNORE))
        except OSError:
            pass
        self.sock.close()

    def __enter__(self) -> Connector:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
