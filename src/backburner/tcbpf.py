"""The tc BPF classifiers, and the netlink request that attaches them.

**On the way in** (`classifier_program`): a cls_bpf classifier that puts each arriving
TCP segment for a socket of a job into the job's class. On the way in, a packet has no
owner yet: the socket it is for is found later, by the stack. The program asks the stack
early: it reads the packet's addresses and ports (relative to the network header, so
whatever the link layer is) and looks the socket up (`bpf_sk_lookup_tcp`, in the
namespace of the device it runs on). tc programs cannot read a socket's cgroup (the
cgroup-id helpers are not theirs), so the job's group marks its sockets as they are made:
a cgroup sock-create program on the group gives them a socket priority of their own
(`cgroupbpf.socket_priority_program`), which the classifier reads back. Attribution stays
by cgroup, as on the way out; no port is guessed, and a connection the job opens later is
found the same way.

**On the way out, by cgroup v1** (`classid_program`): where no cgroup v2 hierarchy is
mounted, no cgroup program can be attached; the job's group in the v1 net_cls controller
gives its sockets a class id instead, which a classifier on the interface's egress reads
(`bpf_get_cgroup_classid`, what the `cgroup` filter reads too, but here with the packet's
size beside it, so the job's ACKs and its uploads go to classes of their own).

Both run as cls_bpf classifiers (not direct-action): they return the class for the job's
packets and 0 (no match) for everything else, which the qdisc's default class takes.
`tc` loads programs only from ELF objects or pinned files; these are assembled here
(as the cgroup programs are), so they are attached by the netlink request `tc` would
send, with the program's descriptor (TCA_BPF_FD).
"""

from __future__ import annotations

import os
import socket
import struct

from .base.errors import UnavailableError
from .cgroupbpf import ACK_MAX_LEN, Asm, load_program

BPF_PROG_TYPE_SCHED_CLS = 3
_FUNC_GET_CGROUP_CLASSID = 17
_FUNC_SKB_LOAD_BYTES_RELATIVE = 68
_FUNC_SK_LOOKUP_TCP = 84
_FUNC_SK_RELEASE = 86
_SOCK_PRIORITY = 20  # offsetof(struct bpf_sock, priority)
_HDR_START_NET = 1
_SKB_LEN = 0  # offsetof(struct __sk_buff, len)
_SKB_PROTOCOL = 16  # offsetof(struct __sk_buff, protocol)
#: The longest packet on an Ethernet interface's egress taken for one without data (an
#: ACK, a window update): the cgroup programs' bound, which counts from the network
#: header, plus the Ethernet header tc sees too. On a device without one, a data packet of
#: up to 14 bytes more counts as an ACK: a request line, not an upload.
ACK_MAX_FRAME = ACK_MAX_LEN + 14
_ETH_P_IP_BE = 0x0008  # htons(ETH_P_IP) as the field reads on a little-endian host
_IPPROTO_TCP = 6
#: Stack: the IPv4 header at fp-32 (20 bytes, its addresses at fp-20 and fp-16), the TCP
#: ports right after it at fp-12, so fp-20..fp-9 is a `struct bpf_sock_tuple` for IPv4.
_IP_AT, _PORTS_AT, _TUPLE_AT, _TUPLE_LEN = -32, -12, -20, 12

RTM_NEWTFILTER = 44
_NLM_F_REQUEST, _NLM_F_ACK, _NLM_F_EXCL, _NLM_F_CREATE = 0x1, 0x4, 0x200, 0x400
_NLMSG_ERROR = 2
_TCA_KIND, _TCA_OPTIONS = 1, 2
_TCA_BPF_FD, _TCA_BPF_NAME = 6, 7
_NLA_F_NESTED = 1 << 15
_ETH_P_ALL = 0x0003


def classifier_program(priority: int, classid: int) -> bytes:
    """Return `classid` for an IPv4 TCP segment whose local socket has the priority
    `priority` (the job's sockets get it when made, `cgroupbpf.socket_priority_program`);
    0 for every other packet."""
    if not 0 < classid < 2**32 or not 0 < priority < 2**31:
        raise ValueError("classifier: class or priority out of range")
    a = Asm()
    a.op(0xBF, dst=6, src=1)                               # r6 = skb
    a.op(0x61, dst=2, src=6, off=_SKB_PROTOCOL)            # r2 = skb->protocol
    a.jump(0x55, "miss", dst=2, imm=_ETH_P_IP_BE)          # not IPv4: no match
    _load_bytes(a, offset_reg=None, at=_IP_AT, length=20)  # the IPv4 header
    a.op(0x71, dst=2, src=10, off=_IP_AT + 9)              # r2 = ip->protocol
    a.jump(0x55, "miss", dst=2, imm=_IPPROTO_TCP)
    a.op(0x71, dst=2, src=10, off=_IP_AT)                  # r2 = version/IHL byte
    a.op(0x57, dst=2, imm=0x0F)                            # r2 &= 15
    a.op(0x67, dst=2, imm=2)                               # r2 <<= 2: header length
    _load_bytes(a, offset_reg=2, at=_PORTS_AT, length=4)   # source and destination port
    a.op(0xBF, dst=1, src=6)                               # r1 = skb
    a.op(0xBF, dst=2, src=10)
    a.op(0x07, dst=2, imm=_TUPLE_AT)                       # r2 = &tuple
    a.op(0xB7, dst=3, imm=_TUPLE_LEN)                      # r3 = sizeof tuple.ipv4
    a.op(0xB7, dst=4, imm=-1)                              # r4 = BPF_F_CURRENT_NETNS
    a.op(0xB7, dst=5, imm=0)                               # r5 = flags
    a.op(0x85, imm=_FUNC_SK_LOOKUP_TCP)
    a.jump(0x15, "miss", dst=0, imm=0)                     # no socket: not the job's
    a.op(0x61, dst=7, src=0, off=_SOCK_PRIORITY)           # r7 = sk->priority
    a.op(0xBF, dst=1, src=0)
    a.op(0x85, imm=_FUNC_SK_RELEASE)
    a.jump(0x55, "miss", dst=7, imm=priority)              # another's socket
    return _class_or_miss(a, classid)


def classid_program(tag: int, ack_classid: int, data_classid: int) -> bytes:
    """For a packet whose sender's net_cls class id is `tag` (a socket made in the job's
    v1 group, or sent by one of its processes): `ack_classid` when it carries no data
    (ACK_MAX_FRAME or shorter), else `data_classid`; 0 (no match) for every other packet,
    and for the job's where the class given is 0."""
    if not 0 < tag < 2**32 or not all(0 <= c < 2**32 for c in (ack_classid, data_classid)):
        raise ValueError("classifier: class id out of range")
    a = Asm()
    a.op(0xBF, dst=6, src=1)                               # r6 = skb
    a.op(0x85, imm=_FUNC_GET_CGROUP_CLASSID)               # r0 = the sender's class id
    a.ld64(1, tag)
    a.jump(0x5D, "miss", dst=0, src=1)                     # not the job's: no match
    a.op(0x61, dst=2, src=6, off=_SKB_LEN)                 # r2 = skb->len
    a.jump(0x25, "data", dst=2, imm=ACK_MAX_FRAME)         # longer: it carries data
    a.ld64(0, ack_classid)
    a.op(0x95)
    a.label("data")
    return _class_or_miss(a, data_classid)


def _class_or_miss(a: Asm, classid: int) -> bytes:
    """The end of a classifier: return `classid` here, 0 (no match) at "miss"."""
    a.ld64(0, classid)
    a.op(0x95)
    a.label("miss")
    a.op(0xB7, dst=0, imm=0)
    a.op(0x95)
    return a.assemble()


def load_classid_classifier(tag: int, ack_classid: int, data_classid: int,
                            name: str = "bb_classid") -> int:
    """Load `classid_program`; return its descriptor (the caller closes it)."""
    return load_program(BPF_PROG_TYPE_SCHED_CLS, 0,
                        classid_program(tag, ack_classid, data_classid), name,
                        "tc classifier", "CONFIG_NET_CLS_BPF")


def _load_bytes(a: Asm, offset_reg: int | None, at: int, length: int) -> None:
    """bpf_skb_load_bytes_relative(skb, offset, fp + at, length, from the network header);
    a packet too short for it is no match."""
    if offset_reg is None:
        a.op(0xB7, dst=2, imm=0)
    elif offset_reg != 2:
        a.op(0xBF, dst=2, src=offset_reg)
    a.op(0xBF, dst=1, src=6)
    a.op(0xBF, dst=3, src=10)
    a.op(0x07, dst=3, imm=at)
    a.op(0xB7, dst=4, imm=length)
    a.op(0xB7, dst=5, imm=_HDR_START_NET)
    a.op(0x85, imm=_FUNC_SKB_LOAD_BYTES_RELATIVE)
    a.jump(0x55, "miss", dst=0, imm=0)


def load_classifier(priority: int, classid: int, name: str = "bb_ingress") -> int:
    """Load the classifier; return its descriptor (the caller closes it). A kernel
    without socket lookups in tc programs refuses it here."""
    return load_program(BPF_PROG_TYPE_SCHED_CLS, 0, classifier_program(priority, classid),
                 name, "tc classifier", "CONFIG_NET_CLS_BPF")


def _attr(kind: int, payload: bytes) -> bytes:
    head = struct.pack("<HH", 4 + len(payload), kind)
    return head + payload + b"\0" * (-len(payload) % 4)


def _request(sock: socket.socket, msg_type: int, flags: int, ifindex: int, parent: int,
             pref: int, attrs: bytes) -> None:
    tcmsg = struct.pack("<BxxxiIII", socket.AF_UNSPEC, ifindex, 0, parent,
                        (pref << 16) | socket.htons(_ETH_P_ALL))
    body = tcmsg + attrs
    sock.send(struct.pack("<IHHII", 16 + len(body), msg_type,
                          _NLM_F_REQUEST | _NLM_F_ACK | flags, 1, 0) + body)
    reply = sock.recv(65536)
    length, kind = struct.unpack_from("<IH", reply)
    if kind == _NLMSG_ERROR:
        (err,) = struct.unpack_from("<i", reply, 16)
        if err:
            raise OSError(-err, os.strerror(-err))


def add_filter(sock: socket.socket, ifindex: int, parent: int, pref: int, prog_fd: int,
               name: str, what: str = "ingress") -> None:
    """Attach the program `prog_fd` as a cls_bpf filter at qdisc `parent` (its handle as
    a number, 1: is 0x10000) of interface `ifindex`, priority `pref`, through `sock`, a
    NETLINK_ROUTE socket in the interface's namespace. The filter holds its own reference
    to the program."""
    options = _attr(_TCA_BPF_FD, struct.pack("<I", prog_fd)) + \
        _attr(_TCA_BPF_NAME, name.encode() + b"\0")
    attrs = _attr(_TCA_KIND, b"bpf\0") + _attr(_TCA_OPTIONS | _NLA_F_NESTED, options)
    try:
        _request(sock, RTM_NEWTFILTER, _NLM_F_CREATE | _NLM_F_EXCL, ifindex, parent, pref,
                 attrs)
    except OSError as err:
        raise UnavailableError(f"could not attach the {what} classifier: {err.strerror}",
                               "it needs cls_bpf (CONFIG_NET_CLS_BPF)") from None
