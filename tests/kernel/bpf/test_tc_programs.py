"""kernel.bpf.tc_programs, by what they do on this kernel: the ingress classifier run once
on packets for a local socket with the job's priority, another's, and packets that are not
TCP over IPv4; the egress classifier of a process outside any net_cls group; and the
netlink attach refused in one line. (The class id classifier's match, from a job's net_cls
group, is `tests/net/test_netcls.py`'s, on the testbed's real packets.)"""

from __future__ import annotations

import os
import socket
import struct
from collections.abc import Iterator

import pytest

from backburner.base.errors import UnavailableError
from backburner.kernel.bpf import calls as bpf
from backburner.kernel.bpf import tc_programs as tc

JOB = 0x62620000
CLASS = 0x10030


def _frame(dport: int, proto: int = socket.IPPROTO_TCP, ethertype: int = 0x0800,
           ihl: int = 5) -> bytes:
    """An Ethernet frame of an IPv4 packet 127.0.0.1:40000 -> 127.0.0.1:dport (a SYN)."""
    options = bytes(4 * (ihl - 5))
    ip = struct.pack("!BBHHHBBH4s4s", 0x40 | ihl, 0, 20 + len(options) + 20, 1, 0, 64,
                     proto, 0, socket.inet_aton("127.0.0.1"), socket.inet_aton("127.0.0.1"))
    tcp = struct.pack("!HHIIBBHHH", 40000, dport, 1, 0, 5 << 4, 0x02, 65535, 0, 0)
    return bytes(12) + struct.pack("!H", ethertype) + ip + options + tcp


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A TCP socket listening on loopback with the job's socket priority."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_PRIORITY, JOB)
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    yield sock
    sock.close()


@pytest.mark.root
def test_the_ingress_classifier_finds_the_jobs_socket(listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    prog = tc.load_classifier(JOB, CLASS, "bb_test_ingress")
    try:
        assert bpf.run_once(prog, _frame(port))[0] == CLASS
        assert bpf.run_once(prog, _frame(port, ihl=6))[0] == CLASS  # IP options: ports after
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_PRIORITY, 6)
        assert bpf.run_once(prog, _frame(port))[0] == 0  # another's socket
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_PRIORITY, JOB)
        with socket.socket() as free:
            free.bind(("127.0.0.1", 0))  # no socket listens there
            assert bpf.run_once(prog, _frame(free.getsockname()[1]))[0] == 0
        assert bpf.run_once(prog, _frame(port, proto=socket.IPPROTO_UDP))[0] == 0
        assert bpf.run_once(prog, _frame(port, ethertype=0x86DD))[0] == 0  # not IPv4
        assert bpf.run_once(prog, _frame(port)[:14 + 20 + 2])[0] == 0  # no whole ports
    finally:
        os.close(prog)


@pytest.mark.root
def test_the_classid_classifier_leaves_a_packet_outside_the_jobs_group() -> None:
    """This process is in no net_cls group (class id 0): not the job's, whatever its size."""
    prog = tc.load_classid_classifier(0x10001, 0x10010, CLASS, "bb_test_classid")
    try:
        for length in (40, 1500):
            assert bpf.run_once(prog, _frame(80) + bytes(length))[0] == 0
    finally:
        os.close(prog)


def test_out_of_range_classes_are_refused() -> None:
    for bad in (lambda: tc.classifier_program(0, CLASS), lambda: tc.classifier_program(JOB, 0),
                lambda: tc.classid_program(0, 1, 1), lambda: tc.classid_program(1, 2**32, 0)):
        with pytest.raises(ValueError):
            bad()


@pytest.mark.root
def test_a_filter_the_kernel_refuses_is_one_line() -> None:
    prog = tc.load_classifier(JOB, CLASS, "bb_test_refused")
    try:
        with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE) as sock, \
                pytest.raises(UnavailableError) as err:  # no such interface
            tc.add_filter(sock, 2**31 - 1, 0x10000, 1, prog, "bb_test")
        assert "\n" not in str(err.value) and "No such device" in str(err.value)
    finally:
        os.close(prog)
