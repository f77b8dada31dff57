"""The network policy's programs on a job's cgroup v2 group, and the sock_ops program's map.

A download's packets belong to its job by the cgroup v2 group of the socket that sent or
receives them, which the kernel knows exactly. Three kinds of program use that link:

* a cgroup-skb egress program runs for every packet a socket in the group (or below it)
  sends; setting the packet's priority there puts it in an HTB class without guessing
  from ports (`priority_program`, `ack_data_program`);
* a sock_ops program runs at a TCP socket's events (connect, established, and, once asked
  for, each segment it sends); from there `bpf_setsockopt` clamps the window the job's
  sockets advertise, to a value a controller writes into an array map, and sets their
  congestion control (`sock_ops_program`);
* a sock-create program gives every socket made in the group a socket priority of the
  job's, by which a tc classifier knows the job's packets on their way in (a tc program
  can look a packet's socket up, but not read its cgroup) (`socket_priority_program`).

Each builder takes the byte order to assemble in (the host's by default: `asm`).
"""

from __future__ import annotations

import os
import struct

from .asm import (
    ADD_IMM,
    BYTE_ORDER,
    CALL,
    EXIT,
    FP,
    JA,
    JEQ_IMM,
    JEQ_REG,
    JGT_IMM,
    LDX_W,
    MOV_IMM,
    MOV_REG,
    OR_IMM,
    R0,
    R1,
    R2,
    R3,
    R4,
    R5,
    R6,
    R7,
    ST_W,
    STX_DW,
    STX_W,
    Asm,
)
from .calls import (
    BPF_CGROUP_INET_EGRESS,
    BPF_CGROUP_INET_SOCK_CREATE,
    BPF_CGROUP_SOCK_OPS,
    BPF_PROG_TYPE_CGROUP_SKB,
    BPF_PROG_TYPE_CGROUP_SOCK,
    BPF_PROG_TYPE_SOCK_OPS,
    array_lookup,
    array_update,
    attached,
    create_array_map,
    load_program,
)

#: offsetof(struct __sk_buff, len) and (…, priority)
SKB_LEN = 0
SKB_PRIORITY = 32
#: offsetof(struct bpf_sock, priority)
SOCK_PRIORITY = 20
#: offsetof(struct bpf_sock_ops, op), (…, reply), (…, bpf_sock_ops_cb_flags)
_OPS_OP = 0
_OPS_REPLY = 4
_OPS_CB_FLAGS = 84
#: enum bpf_sock_ops_op values the program answers
OP_RWND_INIT = 2
OP_TCP_CONNECT = 3
OP_ACTIVE_ESTABLISHED = 4
OP_PASSIVE_ESTABLISHED = 5
OP_HDR_OPT_LEN = 14
#: BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG: call the program for every segment the socket
#: sends (it reserves no option space, so nothing is written into the header)
_CB_EACH_SEGMENT = 1 << 6
#: enum bpf_func_id: the helpers called
FUNC_MAP_LOOKUP_ELEM = 1
FUNC_SETSOCKOPT = 49
FUNC_GETSOCKOPT = 57
FUNC_SOCK_OPS_CB_FLAGS_SET = 59
SOL_TCP = 6
TCP_WINDOW_CLAMP = 10
TCP_CONGESTION = 13
TCP_CA_NAME_MAX = 16

#: The longest packet taken for an acknowledgement (IPv6 and a full TCP header, no data).
ACK_MAX_LEN = 100

#: The sock_ops program's map: one entry (key 0) of two u32, in the host's byte order: the
#: window clamp in bytes for every socket of the job (0: leave the window alone), and the
#: initial receive window in segments for new connections (0: the kernel's).
WINDOW_VALUE = struct.Struct("=II")


def _priority_ok(priority: int, low: int = 0) -> None:
    if not low <= priority < 2**31:
        raise ValueError(f"priority out of range: {priority}")


def priority_program(priority: int, order: str = BYTE_ORDER) -> bytes:
    """skb->priority = priority; return 1 (let the packet through)."""
    _priority_ok(priority)
    a = Asm(order)
    a.op(MOV_IMM, dst=R2, imm=priority)
    a.op(STX_W, dst=R1, src=R2, off=SKB_PRIORITY)          # skb->priority = r2
    a.op(MOV_IMM, dst=R0, imm=1)
    a.op(EXIT)
    return a.assemble()


def socket_priority_program(priority: int, order: str = BYTE_ORDER) -> bytes:
    """A sock-create program: sk->sk_priority = priority; return 1 (let the socket be
    made). The ingress classifier (`tc_programs`) knows the job's sockets by it."""
    _priority_ok(priority, low=1)
    a = Asm(order)
    a.op(MOV_IMM, dst=R2, imm=priority)
    a.op(STX_W, dst=R1, src=R2, off=SOCK_PRIORITY)         # sk->priority = r2
    a.op(MOV_IMM, dst=R0, imm=1)
    a.op(EXIT)
    return a.assemble()


def ack_data_program(ack_priority: int, data_priority: int, order: str = BYTE_ORDER
                     ) -> bytes:
    """skb->priority = ack_priority for a packet without data (len <= ACK_MAX_LEN: an
    ACK, a window update), data_priority for one with data (an upload's); 0 leaves that
    kind's priority alone. Return 1 (let the packet through)."""
    for p in (ack_priority, data_priority):
        _priority_ok(p)
    a = Asm(order)
    a.op(LDX_W, dst=R2, src=R1, off=SKB_LEN)               # r2 = skb->len
    a.jump(JGT_IMM, "data", dst=R2, imm=ACK_MAX_LEN)       # if r2 > max goto data
    if ack_priority:
        a.op(MOV_IMM, dst=R3, imm=ack_priority)
        a.op(STX_W, dst=R1, src=R3, off=SKB_PRIORITY)
    a.jump(JA, "out")
    a.label("data")
    if data_priority:
        a.op(MOV_IMM, dst=R3, imm=data_priority)
        a.op(STX_W, dst=R1, src=R3, off=SKB_PRIORITY)
    a.label("out")
    a.op(MOV_IMM, dst=R0, imm=1)
    a.op(EXIT)
    return a.assemble()


def _lookup_window(a: Asm, map_fd: int) -> None:
    """r0 = &map[0], or to `out` when there is none."""
    a.op(ST_W, dst=FP, off=-24, imm=0)                     # the key, 0, at fp - 24
    a.ld64(R1, map_fd, src=1)                              # r1 = the map
    a.op(MOV_REG, dst=R2, src=FP)
    a.op(ADD_IMM, dst=R2, imm=-24)                         # r2 = &key
    a.op(CALL, imm=FUNC_MAP_LOOKUP_ELEM)
    a.jump(JEQ_IMM, "out", dst=R0, imm=0)                  # if r0 == NULL goto out


def _set_congestion(a: Asm, cc: str) -> None:
    """bpf_setsockopt(ctx, SOL_TCP, TCP_CONGESTION, "name", 16) from the stack."""
    name = cc.encode().ljust(TCP_CA_NAME_MAX, b"\0")
    for k in (0, 8):
        a.ld_bytes(R2, name[k:k + 8])
        a.op(STX_DW, dst=FP, src=R2, off=-16 + k)          # the name at fp - 16
    a.op(MOV_REG, dst=R1, src=R6)
    a.op(MOV_IMM, dst=R2, imm=SOL_TCP)
    a.op(MOV_IMM, dst=R3, imm=TCP_CONGESTION)
    a.op(MOV_REG, dst=R4, src=FP)
    a.op(ADD_IMM, dst=R4, imm=-16)
    a.op(MOV_IMM, dst=R5, imm=TCP_CA_NAME_MAX)
    a.op(CALL, imm=FUNC_SETSOCKOPT)


def sock_ops_program(map_fd: int, cc: str | None = None, order: str = BYTE_ORDER) -> bytes:
    """The job's TCP sockets, at their events:

    * new connection (RWND_INIT): the initial receive window from the map, so the SYN
      already offers no more than the controller allows (the window scale is left as the
      buffer would have it, so the clamp can later open wide);
    * connect / passive establishment, with `cc`: that congestion control (TCP_CONGESTION;
      the module must be loaded, a BPF program cannot load one);
    * established: ask to be called for every segment the socket sends;
    * every segment sent (HDR_OPT_LEN, before the window is put in the header): clamp the
      window (TCP_WINDOW_CLAMP) to the map's value, so a change of the value reaches every
      established socket with its next ACK, and the kernel's receive-buffer autotuning,
      which raises the clamp as the buffer grows, cannot undo it. Only when the socket's
      clamp differs (TCP_WINDOW_CLAMP read first): before Linux 6.8 setting it also set
      the window's growth threshold back to the window last offered, so setting it with
      every segment would keep the window from ever growing.
    """
    if cc is not None and not (cc.isascii() and cc.isprintable() and 0 < len(cc) < 16):
        raise ValueError(f"bad congestion control name: {cc!r}")
    a = Asm(order)
    a.op(MOV_REG, dst=R6, src=R1)                          # r6 = ctx
    a.op(LDX_W, dst=R7, src=R6, off=_OPS_OP)               # r7 = ctx->op
    a.jump(JEQ_IMM, "rwnd", dst=R7, imm=OP_RWND_INIT)
    a.jump(JEQ_IMM, "clamp", dst=R7, imm=OP_HDR_OPT_LEN)
    a.jump(JEQ_IMM, "established", dst=R7, imm=OP_ACTIVE_ESTABLISHED)
    a.jump(JEQ_IMM, "passive", dst=R7, imm=OP_PASSIVE_ESTABLISHED)
    if cc is not None:
        a.jump(JEQ_IMM, "connect", dst=R7, imm=OP_TCP_CONNECT)
    a.jump(JA, "out")
    a.label("passive")
    if cc is not None:
        _set_congestion(a, cc)
    a.label("established")
    a.op(MOV_REG, dst=R1, src=R6)
    a.op(LDX_W, dst=R2, src=R6, off=_OPS_CB_FLAGS)         # r2 = ctx->cb_flags
    a.op(OR_IMM, dst=R2, imm=_CB_EACH_SEGMENT)             # r2 |= each segment
    a.op(CALL, imm=FUNC_SOCK_OPS_CB_FLAGS_SET)
    a.jump(JA, "clamp")
    if cc is not None:
        a.label("connect")
        _set_congestion(a, cc)
        a.jump(JA, "out")
    a.label("rwnd")
    _lookup_window(a, map_fd)
    a.op(LDX_W, dst=R3, src=R0, off=4)                     # r3 = initial window, segments
    a.jump(JEQ_IMM, "out", dst=R3, imm=0)
    a.op(STX_W, dst=R6, src=R3, off=_OPS_REPLY)            # ctx->reply = r3
    a.jump(JA, "out")
    a.label("clamp")
    _lookup_window(a, map_fd)
    a.op(LDX_W, dst=R3, src=R0, off=0)                     # r3 = clamp, bytes
    a.jump(JEQ_IMM, "out", dst=R3, imm=0)
    a.op(STX_W, dst=FP, src=R3, off=-20)                   # wanted, at fp - 20
    for func, at in ((FUNC_GETSOCKOPT, -28), (FUNC_SETSOCKOPT, -20)):
        a.op(MOV_REG, dst=R1, src=R6)
        a.op(MOV_IMM, dst=R2, imm=SOL_TCP)
        a.op(MOV_IMM, dst=R3, imm=TCP_WINDOW_CLAMP)
        a.op(MOV_REG, dst=R4, src=FP)
        a.op(ADD_IMM, dst=R4, imm=at)
        a.op(MOV_IMM, dst=R5, imm=4)
        a.op(CALL, imm=func)
        if func == FUNC_GETSOCKOPT:  # the socket's clamp now (0 when it cannot be read)
            a.op(LDX_W, dst=R2, src=FP, off=-28)
            a.op(LDX_W, dst=R3, src=FP, off=-20)
            a.jump(JEQ_REG, "out", dst=R2, src=R3)         # if r2 == r3 goto out
    a.label("out")
    a.op(MOV_IMM, dst=R0, imm=1)
    a.op(EXIT)
    return a.assemble()


def load_priority_program(priority: int, name: str = "bb_prio",
                          data_priority: int | None = None) -> int:
    """Load the program (with `data_priority`: `ack_data_program`); return its descriptor
    (the caller closes it)."""
    insns = priority_program(priority) if data_priority is None else \
        ack_data_program(priority, data_priority)
    return load_program(BPF_PROG_TYPE_CGROUP_SKB, BPF_CGROUP_INET_EGRESS, insns, name,
                        "cgroup-skb")


def load_sock_ops_program(map_fd: int, cc: str | None = None, name: str = "bb_window") -> int:
    """Load the sock_ops program over `map_fd`; return its descriptor. A kernel whose
    bpf_setsockopt lacks an option the program uses refuses it here, at load."""
    return load_program(BPF_PROG_TYPE_SOCK_OPS, BPF_CGROUP_SOCK_OPS,
                        sock_ops_program(map_fd, cc), name, "sock_ops")


def load_socket_priority_program(priority: int, name: str = "bb_sockprio") -> int:
    """Load `socket_priority_program`; return its descriptor (the caller closes it)."""
    return load_program(BPF_PROG_TYPE_CGROUP_SOCK, BPF_CGROUP_INET_SOCK_CREATE,
                        socket_priority_program(priority), name, "cgroup sock-create")


def create_window_map(name: str = "bb_window") -> int:
    """The sock_ops program's one-entry array map (all zero: nothing clamped)."""
    return create_array_map(WINDOW_VALUE.size, 1, name)


def set_window(map_fd: int, clamp_bytes: int, initial_segments: int) -> None:
    """The clamp every socket of the job gets with its next segment, and new connections'
    initial window (both 0: leave the kernel's)."""
    array_update(map_fd, 0, WINDOW_VALUE.pack(clamp_bytes, initial_segments))


def window(map_fd: int) -> tuple[int, int]:
    return WINDOW_VALUE.unpack(array_lookup(map_fd, 0, WINDOW_VALUE.size))  # type: ignore[return-value]


def policy_programs_on(path: str) -> set[int]:
    """Ids of the egress, sock_ops and sock-create programs attached to the group at
    `path` itself (the network policy's kinds); none when the group is gone or cannot be
    asked."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return set()
    try:
        return {prog for kind in (BPF_CGROUP_INET_EGRESS, BPF_CGROUP_SOCK_OPS,
                                  BPF_CGROUP_INET_SOCK_CREATE) for prog in attached(fd, kind)}
    except OSError:
        return set()
    finally:
        os.close(fd)
