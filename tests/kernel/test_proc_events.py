"""proc_events: datagram parsing and loss detection (exact, and through a socket pair playing
the kernel: subscription, sequence gaps, IGNORE on close), and the real kernel connector:
events of a process we start, the exec-only filter, an overflow, a closed listener
unsubscribed."""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
import time

import pytest
from helpers import proc_event_datagram as datagram
from helpers import unsubscribed_by_close

from backburner.kernel import proc_events as cn
from backburner.kernel.proc_events import Event


def parsed(buf: bytes) -> list[Event]:
    return list(cn.parse(buf, len(buf)))


def test_parse_each_event_kind() -> None:
    assert parsed(datagram(cn.FORK, struct.pack("=iiii", 10, 10, 11, 11))) == [
        Event(cn.FORK, 1, 7, 11, 11, 10, 10)]
    assert parsed(datagram(cn.FORK, struct.pack("=iiii", 10, 10, 12, 10)))[0].is_thread
    assert parsed(datagram(cn.EXEC, struct.pack("=ii", 20, 20))) == [
        Event(cn.EXEC, 1, 7, 20, 20)]
    comm = parsed(datagram(cn.COMM, struct.pack("=ii16s", 30, 30, b"updatedb\0junk")))
    assert comm == [Event(cn.COMM, 1, 7, 30, 30, comm="updatedb")]
    ex = parsed(datagram(cn.EXIT, struct.pack("=iiIIii", 40, 40, 0, 17, 1, 1)))
    assert ex == [Event(cn.EXIT, 1, 7, 40, 40)] and ex[0].name == "exit"
    ack = parsed(datagram(cn.NONE, struct.pack("=I", 22)))
    assert ack[0].what == cn.NONE and ack[0].pid == 22  # the ack's error code


def test_parse_skips_other_connectors_and_reads_several_messages() -> None:
    other = datagram(cn.EXEC, struct.pack("=ii", 1, 1), idx=9)
    two = datagram(cn.EXEC, struct.pack("=ii", 5, 5)) + datagram(cn.EXIT, struct.pack(
        "=iiIIii", 5, 5, 0, 17, 1, 1), seq=8)
    assert parsed(other) == []
    assert [(e.name, e.seq) for e in parsed(other + two)] == [("exec", 7), ("exit", 8)]
    assert parsed(b"\0" * 10) == []


def test_sequence_gaps_per_cpu() -> None:
    seqs = cn.SeqTracker()
    assert seqs.missed(0, 100) == 0  # the first number seen on a CPU is the baseline
    assert seqs.missed(1, 5) == 0
    assert seqs.missed(0, 101) == 0
    assert seqs.missed(0, 105) == 3
    assert seqs.missed(1, 6) == 0
    seqs.missed(2, 0xFFFFFFFF)
    assert seqs.missed(2, 1) == 1  # wraps around 2**32
    seqs.reset()
    assert seqs.missed(0, 500) == 0


#: The kernel's answer to a subscription: numbered like any event (its CPU's next number).
ACK = datagram(cn.NONE, struct.pack("=I", 0), seq=99, cpu=0)


def _kernel() -> tuple[socket.socket, socket.socket]:
    """A datagram socket pair: ours for the Connector, the other end plays the kernel (what
    it sends is what the kernel would; what it receives is what we told the kernel)."""
    ours, kernel = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    kernel.setblocking(False)
    return ours, kernel


def _controls(kernel: socket.socket) -> list[tuple[int, int, int, bytes]]:
    """What we sent the kernel: (cn idx, cn val, mcast op, the rest of the body) each."""
    out = []
    while True:
        try:
            msg = kernel.recv(4096)
        except BlockingIOError:
            return out
        idx, val, _seq, _ack, length, _flags = struct.unpack_from("=IIIIHH", msg, 16)
        body = msg[36:36 + length]
        out.append((idx, val, struct.unpack_from("=I", body)[0], body[4:]))


def test_subscribes_waits_for_the_ack_and_keeps_what_overtook_it() -> None:
    ours, kernel = _kernel()
    early = datagram(cn.EXEC, struct.pack("=ii", 5, 5), seq=3)
    kernel.send(early)
    kernel.send(ACK)
    with cn.Connector(sock=ours) as conn:
        assert _controls(kernel) == [(cn.CN_IDX_PROC, cn.CN_VAL_PROC,
                                      cn.PROC_CN_MCAST_LISTEN, b"")]
        assert [e.pid for e in conn.drain().events] == [5]
    kernel.close()


def test_a_gap_in_a_cpus_numbers_is_a_loss() -> None:
    """Events numbered per CPU: 100, 101, 105 on CPU 0 lost three (interleaved with CPU 1,
    whose numbers are its own); numbers are not compared while the kernel filters."""
    ours, kernel = _kernel()
    kernel.send(ACK)
    with cn.Connector(sock=ours) as conn:
        for cpu, seq in ((0, 100), (1, 5), (0, 101), (1, 6), (0, 105)):
            kernel.send(datagram(cn.EXEC, struct.pack("=ii", seq, seq), seq=seq, cpu=cpu))
        batch = conn.drain()
        assert [e.pid for e in batch.events] == [100, 5, 101, 6, 105]
        assert (batch.lost, batch.overflow, batch.incomplete) == (3, False, True)
        kernel.send(datagram(cn.EXEC, struct.pack("=ii", 7, 7), seq=106, cpu=0))
        assert not conn.drain().incomplete
        conn.narrow(cn.STARTS)
        kernel.send(datagram(cn.EXEC, struct.pack("=ii", 8, 8), seq=200, cpu=0))
        assert not conn.drain().incomplete
        assert _controls(kernel)[-1] == (cn.CN_IDX_PROC, cn.CN_VAL_PROC,
                                         cn.PROC_CN_MCAST_LISTEN,
                                         struct.pack("=I", cn.STARTS))
    kernel.close()


def test_close_says_ignore_before_it_closes_and_only_once() -> None:
    ours, kernel = _kernel()
    kernel.send(ACK)
    conn = cn.Connector(sock=ours)
    conn.close()
    conn.close()
    ops = [op for _idx, _val, op, _rest in _controls(kernel)]
    assert ops == [cn.PROC_CN_MCAST_LISTEN, cn.PROC_CN_MCAST_IGNORE]
    assert ours.fileno() == -1
    kernel.close()


@pytest.mark.root
def test_the_kernel_sends_a_closed_connector_nothing_more() -> None:
    conn = cn.Connector()
    assert unsubscribed_by_close(conn.fileno(), conn.close)


def _events_of(conn: cn.Connector, pid: int, timeout: float = 5.0) -> list[Event]:
    out: list[Event] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out += [e for e in conn.drain().events if pid in (e.pid, e.tgid, e.ptgid)]
        if any(e.what == cn.EXIT and e.tgid == pid for e in out):
            return out
        time.sleep(0.01)
    return out


@pytest.mark.root
def test_real_events_of_a_child() -> None:
    with cn.Connector() as conn:
        child = subprocess.Popen([sys.executable, "-c",
                                  "import ctypes; ctypes.CDLL(None).prctl(15, b'bb-renamed')"])
        child.wait()
        events = _events_of(conn, child.pid)
    kinds = [(e.name, e.tgid) for e in events if e.what != cn.FORK or not e.is_thread]
    assert ("fork", child.pid) in kinds
    assert ("exec", child.pid) in kinds
    assert ("exit", child.pid) in kinds
    fork = next(e for e in events if e.what == cn.FORK and e.tgid == child.pid)
    assert fork.ptgid == os.getpid()
    assert any(e.what == cn.COMM and e.comm == "bb-renamed" for e in events)
    order = [e.name for e in events if e.tgid == child.pid and e.pid == child.pid]
    assert order.index("fork") < order.index("exec") < order.index("exit")


@pytest.mark.root
def test_narrowed_to_starts_only() -> None:
    with cn.Connector() as conn:
        conn.narrow(cn.STARTS)
        conn.drain()  # what other processes did before the filter was in force
        child = subprocess.Popen(["true"])
        child.wait()
        deadline = time.monotonic() + 5
        seen: list[Event] = []
        while time.monotonic() < deadline and not any(e.tgid == child.pid for e in seen):
            seen += conn.drain().events
            time.sleep(0.01)
        mine = [e.name for e in seen if e.tgid == child.pid]
        assert mine == ["exec"], mine  # fork and exit filtered by the kernel (6.6+)
        assert all(e.what in (cn.EXEC, cn.COMM) for e in seen)
        conn.narrow(None)
        child = subprocess.Popen(["true"])
        child.wait()
        assert {"fork", "exec", "exit"} <= {e.name for e in _events_of(conn, child.pid)}


@pytest.mark.root
def test_overflow_is_detected() -> None:
    """A tiny receive buffer and a burst of processes while nobody reads: the kernel drops
    events and the next read says so (ENOBUFS)."""
    with cn.Connector(rcvbuf=4096) as conn:
        for _ in range(5):
            subprocess.run(["sh", "-c", "for i in 1 2 3 4 5 6 7 8 9 10; do /bin/true; done"],
                           check=True)
        batches = [conn.drain() for _ in range(3)]
        assert any(b.overflow for b in batches)
        assert batches[0].incomplete
