"""kernel.netlink: a message and its attributes laid out as the kernel reads them (the
host's byte order, 4-byte padding), and an acknowledgement's errno read back, against a
stand-in kernel and against the real one."""

from __future__ import annotations

import errno
import socket
import struct
import sys

import pytest

from backburner.kernel import netlink

#: "=" is the host's order: what this test expects of it, spelled out.
NATIVE = "<" if sys.byteorder == "little" else ">"


def test_a_message_is_its_header_then_its_payload() -> None:
    msg = netlink.message(44, 0x605, b"abc", seq=9, pid=0)
    assert msg == struct.pack(f"{NATIVE}IHHII", 19, 44, 0x605, 9, 0) + b"abc"


def test_attributes_are_padded_and_nested_ones_flagged() -> None:
    assert netlink.attr(1, b"bpf\0") == struct.pack(f"{NATIVE}HH", 8, 1) + b"bpf\0"
    assert netlink.attr(7, b"ab") == struct.pack(f"{NATIVE}HH", 6, 7) + b"ab\0\0"
    inner = netlink.attr(6, struct.pack("=I", 5))
    assert netlink.nested(2, inner) == struct.pack(f"{NATIVE}HH", 12, 2 | 1 << 15) + inner
    assert [netlink.align(n) for n in (0, 1, 4, 5, 19)] == [0, 4, 4, 8, 20]


def _ack(err: int) -> bytes:
    return netlink.message(netlink.NLMSG_ERROR, 0, struct.pack("=i", -err) + bytes(16))


def test_an_acknowledgement_carries_its_errno() -> None:
    assert netlink.error_of(_ack(0)) == 0
    assert netlink.error_of(_ack(errno.EEXIST)) == errno.EEXIST
    assert netlink.error_of(netlink.message(netlink.NLMSG_DONE, 0, bytes(4))) == 0
    assert netlink.error_of(b"short") == 0


def test_a_request_is_sent_with_ack_asked_and_a_refusal_raised() -> None:
    ours, kernel = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    with ours, kernel:
        kernel.send(_ack(errno.EEXIST))
        with pytest.raises(OSError) as caught:
            netlink.request(ours, 44, netlink.NLM_F_CREATE, b"body")
        assert caught.value.errno == errno.EEXIST
        sent = kernel.recv(100)
        _len, kind, flags, seq, _pid = netlink.HEADER.unpack_from(sent)
        assert (kind, seq, sent[16:]) == (44, 1, b"body")
        assert flags == netlink.NLM_F_REQUEST | netlink.NLM_F_ACK | netlink.NLM_F_CREATE
        kernel.send(_ack(0))
        netlink.request(ours, 44, 0, b"body")


def test_the_kernel_refuses_a_request_for_no_interface() -> None:
    """RTM_GETLINK of an interface index nobody has: the kernel's ENODEV, read back."""
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE) as sock:
        ifinfo = struct.pack("=BxHiII", socket.AF_UNSPEC, 0, 2**31 - 1, 0, 0)
        with pytest.raises(OSError) as caught:
            netlink.request(sock, 18, 0, ifinfo)  # RTM_GETLINK
    assert caught.value.errno == errno.ENODEV
