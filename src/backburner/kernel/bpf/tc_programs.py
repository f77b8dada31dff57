"""The tc BPF classifiers, and the netlink request that attaches them.

**On the way in** (`classifier_program`): a cls_bpf classifier that puts each arriving
TCP segment for a socket of a job into the job's class. On the way in, a packet has no
owner yet: the socket it is for is found later, by the stack. The program asks the stack
early: it reads the packet's addresses and ports (relative to the network header, so
whatever the link layer is) and looks the socket up (`bpf_sk_lookup_tcp`, in the
namespace of the device it runs on). tc programs cannot read a socket's cgroup (the
cgroup-id helpers are not theirs), so the job's group marks its sockets as they are made:
a cgroup sock-create program on the group gives them a socket priority of their own
(`cgroup_programs.socket_priority_program`), which the classifier reads back. Attribution
stays by cgroup, as on the way out; no port is guessed, and a connection the job opens
later is found the same way.

**On the way out, by cgroup v1** (`classid_program`): where no cgroup v2 hierarchy is
mounted, no cgroup program can be attached; the job's group in the v1 net_cls controller
gives its sockets a class id instead, which a classifier on the interface's egress reads
(`bpf_get_cgroup_classid`, what the `cgroup` filter reads too, but here with the packet's
size beside it, so the job's ACKs and its uploads go to classes of their own).

Both run as cls_bpf classifiers (not direct-action): they return the class for the job's
packets and 0 (no match) for everything else, which the qdisc's default class takes.
`tc` loads programs only from ELF objects or pinned files; these are assembled here, so
they are attached by the netlink request `tc` would send, with the program's descriptor
(TCA_BPF_FD).
"""

from __future__ import annotations

import socket
import struct

from ...base.errors import UnavailableError
from .. import netlink
from .asm import (
    ADD_IMM,
    AND_IMM,
    BYTE_ORDER,
    CALL,
    EXIT,
    FP,
    JEQ_IMM,
    JGT_IMM,
    JNE_IMM,
    JNE_REG,
    LDX_B,
    LDX_W,
    LSH_IMM,
    MOV_IMM,
    MOV_REG,
    R0,
    R1,
    R2,
    R3,
    R4,
    R5,
    R6,
    R7,
    Asm,
)
from .calls import BPF_PROG_TYPE_SCHED_CLS, load_program
from .cgroup_programs import ACK_MAX_LEN, SKB_LEN, SOCK_PRIORITY

FUNC_GET_CGROUP_CLASSID = 17
FUNC_SKB_LOAD_BYTES_RELATIVE = 68
FUNC_SK_LOOKUP_TCP = 84
FUNC_SK_RELEASE = 86
_HDR_START_NET = 1
_SKB_PROTOCOL = 16  # offsetof(struct __sk_buff, protocol)
#: The longest packet on an Ethernet interface's egress taken for one without data (an
#: ACK, a window update): the cgroup programs' bound, which counts from the network
#: header, plus the Ethernet header tc sees too. On a device without one, a data packet of
#: up to 14 bytes more counts as an ACK: a request line, not an upload.
ACK_MAX_FRAME = ACK_MAX_LEN + 14
#: skb->protocol as the program reads it: the EtherType in network byte order, loaded as
#: a native number (0x0008 on a little-endian host, 0x0800 on a big-endian one).
ETH_P_IP = 0x0800
_IPPROTO_TCP = 6
#: Stack: the IPv4 header at fp-32 (20 bytes, its addresses at fp-20 and fp-16), the TCP
#: ports right after it at fp-12, so fp-20..fp-9 is a `struct bpf_sock_tuple` for IPv4.
_IP_AT, _PORTS_AT, _TUPLE_AT, _TUPLE_LEN = -32, -12, -20, 12

RTM_NEWTFILTER = 44
_TCA_KIND, _TCA_OPTIONS = 1, 2
_TCA_BPF_FD, _TCA_BPF_NAME = 6, 7
_ETH_P_ALL = 0x0003
#: struct tcmsg: family, pad, ifindex, handle, parent, info (priority << 16 | protocol)
_TCMSG = struct.Struct("=BxxxiIII")


def _network_order_16(value: int, order: str) -> int:
    """A 16-bit number stored in network byte order, as a native load of it reads."""
    return int.from_bytes(value.to_bytes(2, "big"), order)


def classifier_program(priority: int, classid: int, order: str = BYTE_ORDER) -> bytes:
    """Return `classid` for an IPv4 TCP segment whose local socket has the priority
    `priority` (the job's sockets get it when made,
    `cgroup_programs.socket_priority_program`); 0 for every other packet."""
    if not 0 < classid < 2**32 or not 0 < priority < 2**31:
        raise ValueError("classifier: class or priority out of range")
    a = Asm(order)
    a.op(MOV_REG, dst=R6, src=R1)                          # r6 = skb
    a.op(LDX_W, dst=R2, src=R6, off=_SKB_PROTOCOL)         # r2 = skb->protocol
    a.jump(JNE_IMM, "miss", dst=R2, imm=_network_order_16(ETH_P_IP, order))  # not IPv4
    _load_bytes(a, offset_reg=None, at=_IP_AT, length=20)  # the IPv4 header
    a.op(LDX_B, dst=R2, src=FP, off=_IP_AT + 9)            # r2 = ip->protocol
    a.jump(JNE_IMM, "miss", dst=R2, imm=_IPPROTO_TCP)
    a.op(LDX_B, dst=R2, src=FP, off=_IP_AT)                # r2 = version/IHL byte
    a.op(AND_IMM, dst=R2, imm=0x0F)                        # r2 &= 15
    a.op(LSH_IMM, dst=R2, imm=2)                           # r2 <<= 2: header length
    _load_bytes(a, offset_reg=R2, at=_PORTS_AT, length=4)  # source and destination port
    a.op(MOV_REG, dst=R1, src=R6)                          # r1 = skb
    a.op(MOV_REG, dst=R2, src=FP)
    a.op(ADD_IMM, dst=R2, imm=_TUPLE_AT)                   # r2 = &tuple
    a.op(MOV_IMM, dst=R3, imm=_TUPLE_LEN)                  # r3 = sizeof tuple.ipv4
    a.op(MOV_IMM, dst=R4, imm=-1)                          # r4 = BPF_F_CURRENT_NETNS
    a.op(MOV_IMM, dst=R5, imm=0)                           # r5 = flags
    a.op(CALL, imm=FUNC_SK_LOOKUP_TCP)
    a.jump(JEQ_IMM, "miss", dst=R0, imm=0)                 # no socket: not the job's
    a.op(LDX_W, dst=R7, src=R0, off=SOCK_PRIORITY)         # r7 = sk->priority
    a.op(MOV_REG, dst=R1, src=R0)
    a.op(CALL, imm=FUNC_SK_RELEASE)
    a.jump(JNE_IMM, "miss", dst=R7, imm=priority)          # another's socket
    return _class_or_miss(a, classid)


def classid_program(tag: int, ack_classid: int, data_classid: int,
                    order: str = BYTE_ORDER) -> bytes:
    """For a packet whose sender's net_cls class id is `tag` (a socket made in the job's
    v1 group, or sent by one of its processes): `ack_classid` when it carries no data
    (ACK_MAX_FRAME or shorter), else `data_classid`; 0 (no match) for every other packet,
    and for the job's where the class given is 0."""
    if not 0 < tag < 2**32 or not all(0 <= c < 2**32 for c in (ack_classid, data_classid)):
        raise ValueError("classifier: class id out of range")
    a = Asm(order)
    a.op(MOV_REG, dst=R6, src=R1)                          # r6 = skb
    a.op(CALL, imm=FUNC_GET_CGROUP_CLASSID)                # r0 = the sender's class id
    a.ld64(R1, tag)
    a.jump(JNE_REG, "miss", dst=R0, src=R1)                # not the job's: no match
    a.op(LDX_W, dst=R2, src=R6, off=SKB_LEN)               # r2 = skb->len
    a.jump(JGT_IMM, "data", dst=R2, imm=ACK_MAX_FRAME)     # longer: it carries data
    a.ld64(R0, ack_classid)
    a.op(EXIT)
    a.label("data")
    return _class_or_miss(a, data_classid)


def _class_or_miss(a: Asm, classid: int) -> bytes:
    """The end of a classifier: return `classid` here, 0 (no match) at "miss"."""
    a.ld64(R0, classid)
    a.op(EXIT)
    a.label("miss")
    a.op(MOV_IMM, dst=R0, imm=0)
    a.op(EXIT)
    return a.assemble()


def _load_bytes(a: Asm, offset_reg: int | None, at: int, length: int) -> None:
    """bpf_skb_load_bytes_relative(skb, offset, fp + at, length, from the network header);
    a packet too short for it is no match."""
    if offset_reg is None:
        a.op(MOV_IMM, dst=R2, imm=0)
    elif offset_reg != R2:
        a.op(MOV_REG, dst=R2, src=offset_reg)
    a.op(MOV_REG, dst=R1, src=R6)
    a.op(MOV_REG, dst=R3, src=FP)
    a.op(ADD_IMM, dst=R3, imm=at)
    a.op(MOV_IMM, dst=R4, imm=length)
    a.op(MOV_IMM, dst=R5, imm=_HDR_START_NET)
    a.op(CALL, imm=FUNC_SKB_LOAD_BYTES_RELATIVE)
    a.jump(JNE_IMM, "miss", dst=R0, imm=0)


def load_classifier(priority: int, classid: int, name: str = "bb_ingress") -> int:
    """Load the classifier; return its descriptor (the caller closes it). A kernel
    without socket lookups in tc programs refuses it here."""
    return load_program(BPF_PROG_TYPE_SCHED_CLS, 0, classifier_program(priority, classid),
                        name, "tc classifier", "CONFIG_NET_CLS_BPF")


def load_classid_classifier(tag: int, ack_classid: int, data_classid: int,
                            name: str = "bb_classid") -> int:
    """Load `classid_program`; return its descriptor (the caller closes it)."""
    return load_program(BPF_PROG_TYPE_SCHED_CLS, 0,
                        classid_program(tag, ack_classid, data_classid), name,
                        "tc classifier", "CONFIG_NET_CLS_BPF")


def add_filter(sock: socket.socket, ifindex: int, parent: int, pref: int, prog_fd: int,
               name: str, what: str = "ingress") -> None:
    """Attach the program `prog_fd` as a cls_bpf filter at qdisc `parent` (its handle as
    a number, 1: is 0x10000) of interface `ifindex`, priority `pref`, through `sock`, a
    NETLINK_ROUTE socket in the interface's namespace. The filter holds its own reference
    to the program."""
    tcmsg = _TCMSG.pack(socket.AF_UNSPEC, ifindex, 0, parent,
                        (pref << 16) | socket.htons(_ETH_P_ALL))
    options = netlink.nested(_TCA_OPTIONS,
                             netlink.attr(_TCA_BPF_FD, struct.pack("=I", prog_fd)),
                             netlink.attr(_TCA_BPF_NAME, name.encode() + b"\0"))
    try:
        netlink.request(sock, RTM_NEWTFILTER, netlink.NLM_F_CREATE | netlink.NLM_F_EXCL,
                        tcmsg + netlink.attr(_TCA_KIND, b"bpf\0") + options)
    except OSError as err:
        raise UnavailableError(f"could not attach the {what} classifier: {err.strerror}",
                               "it needs cls_bpf (CONFIG_NET_CLS_BPF)") from None
