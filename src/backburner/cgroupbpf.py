"""cgroup BPF through the bpf(2) system call: the one place that assembles, loads,
attaches, finds and detaches the programs of the network policy, and makes and reads their
maps (the ingress classifier, a tc program, is assembled in `tcbpf` with the same
assembler and loaded here).

A download's packets belong to its job by the cgroup v2 group of the socket that sent or
receives them, which the kernel knows exactly. Two kinds of program use that link:

* a cgroup-skb egress program runs for every packet a socket in the group (or below it)
  sends; setting the packet's priority there puts it in an HTB class without guessing
  from ports (`priority_program`);
* a sock_ops program runs at a TCP socket's events (connect, established, and, once asked
  for, each segment it sends); from there `bpf_setsockopt` clamps the window the job's
  sockets advertise, to a value a controller writes into an array map, and sets their
  congestion control (`sock_ops_program`);
* a sock-create program gives every socket made in the group a socket priority of the
  job's, by which a tc classifier knows the job's packets on their way in (a tc program
  can look a packet's socket up, but not read its cgroup) (`socket_priority_program`).

The programs are a few instructions each, assembled here, so no compiler, libbpf or
bpftool is needed (none is installed where this runs, and a compiled object would need
BTF-aware loading for what eighty bytes of instructions do).

A program stays attached after the process that loaded it exits (the cgroup holds it), so
the undo finds it again by its program id, which the kernel does not reuse while it lives;
a map lives while a program or a descriptor holds it, so a detached program takes its map
with it.
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct
from collections.abc import Callable
from dataclasses import dataclass, field

from .base.errors import UnavailableError
from .kernel import procfs

_SYS_BPF = {"x86_64": 321, "aarch64": 280, "riscv64": 280, "armv7l": 386, "ppc64le": 361,
            "s390x": 351}

BPF_MAP_CREATE = 0
BPF_MAP_LOOKUP_ELEM = 1
BPF_MAP_UPDATE_ELEM = 2
BPF_PROG_LOAD = 5
BPF_OBJ_PIN = 6
BPF_OBJ_GET = 7
BPF_PROG_ATTACH = 8
BPF_PROG_DETACH = 9
BPF_PROG_GET_NEXT_ID = 11
BPF_MAP_GET_NEXT_ID = 12
BPF_PROG_GET_FD_BY_ID = 13
BPF_MAP_GET_FD_BY_ID = 14
BPF_OBJ_GET_INFO_BY_FD = 15
BPF_PROG_QUERY = 16

BPF_MAP_TYPE_ARRAY = 2
BPF_PROG_TYPE_CGROUP_SKB = 8
BPF_PROG_TYPE_SOCK_OPS = 13
BPF_PROG_TYPE_CGROUP_SOCK = 9
BPF_CGROUP_INET_EGRESS = 1
BPF_CGROUP_INET_SOCK_CREATE = 2
BPF_CGROUP_SOCK_OPS = 3
BPF_F_ALLOW_MULTI = 2

#: offsetof(struct __sk_buff, len) and (…, priority)
_SKB_LEN = 0
_SKB_PRIORITY = 32
#: offsetof(struct bpf_sock, priority)
_SOCK_PRIORITY = 20
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
_FUNC_MAP_LOOKUP_ELEM = 1
_FUNC_SETSOCKOPT = 49
_FUNC_GETSOCKOPT = 57
_FUNC_SOCK_OPS_CB_FLAGS_SET = 59
SOL_TCP = 6
TCP_WINDOW_CLAMP = 10
TCP_CONGESTION = 13
TCP_CA_NAME_MAX = 16

#: The sock_ops program's map: one entry (key 0) of two u32: the window clamp in bytes
#: for every socket of the job (0: leave the window alone), and the initial receive
#: window in segments for new connections (0: the kernel's).
WINDOW_VALUE = struct.Struct("<II")

_libc = ctypes.CDLL(None, use_errno=True)


def _insn(code: int, dst: int = 0, src: int = 0, off: int = 0, imm: int = 0) -> bytes:
    return struct.pack("<BBhi", code, (src << 4) | dst, off, imm)


@dataclass
class Asm:
    """Instructions with named jump targets, resolved when the program is done."""

    out: list[tuple[int, int, int, int, int | str]] = field(default_factory=list)
    labels: dict[str, int] = field(default_factory=dict)

    def op(self, code: int, dst: int = 0, src: int = 0, off: int = 0, imm: int = 0) -> None:
        self.out.append((code, dst, src, off, imm))

    def jump(self, code: int, target: str, dst: int = 0, imm: int = 0, src: int = 0) -> None:
        """A jump to `target`; its operand `imm` rides in the offset's place until then."""
        self.out.append((code, dst, src, imm, target))

    def ld64(self, dst: int, value: int, src: int = 0) -> None:
        """lddw: a 64-bit immediate (src 1: a map descriptor), two slots; each half is
        packed as the signed 32-bit field it is (a class id of major 0x8000 or more)."""
        low, high = value & 0xFFFFFFFF, (value >> 32) & 0xFFFFFFFF
        self.op(0x18, dst, src, 0, low - (1 << 32) if low >> 31 else low)
        self.op(0, 0, 0, 0, high - (1 << 32) if high >> 31 else high)

    def label(self, name: str) -> None:
        self.labels[name] = len(self.out)

    def assemble(self) -> bytes:
        code = []
        for i, (op, dst, src, off, imm) in enumerate(self.out):
            if isinstance(imm, str):  # a jump: off is the label's distance, imm the operand
                off, imm = self.labels[imm] - i - 1, off
            code.append(_insn(op, dst, src, off, imm))
        return b"".join(code)


def priority_program(priority: int) -> bytes:
    """r2 = priority; skb->priority = r2; return 1 (let the packet through)."""
    if not 0 <= priority < 2**31:
        raise ValueError(f"priority out of range: {priority}")
    return b"".join([
        _insn(0xB7, dst=2, imm=priority),                  # mov64 r2, imm
        _insn(0x63, dst=1, src=2, off=_SKB_PRIORITY),      # stx32 [r1 + 32], r2
        _insn(0xB7, dst=0, imm=1),                         # mov64 r0, 1
        _insn(0x95),                                       # exit
    ])


#: The longest packet taken for an acknowledgement (IPv6 and a full TCP header, no data).
def socket_priority_program(priority: int) -> bytes:
    """A sock-create program: sk->sk_priority = priority; return 1 (let the socket be
    made). The ingress classifier (`tcbpf`) knows the job's sockets by it."""
    if not 0 < priority < 2**31:
        raise ValueError(f"priority out of range: {priority}")
    return b"".join([
        _insn(0xB7, dst=2, imm=priority),                  # mov64 r2, priority
        _insn(0x63, dst=1, src=2, off=_SOCK_PRIORITY),     # *(u32 *)(r1 + 20) = r2
        _insn(0xB7, dst=0, imm=1),                         # mov64 r0, 1
        _insn(0x95),                                       # exit
    ])


ACK_MAX_LEN = 100


def ack_data_program(ack_priority: int, data_priority: int) -> bytes:
    """skb->priority = ack_priority for a packet without data (len <= ACK_MAX_LEN: an
    ACK, a window update), data_priority for one with data (an upload's); 0 leaves that
    kind's priority alone. Return 1 (let the packet through)."""
    for p in (ack_priority, data_priority):
        if not 0 <= p < 2**31:
            raise ValueError(f"priority out of range: {p}")
    a = Asm()
    a.op(0x61, dst=2, src=1, off=_SKB_LEN)                 # r2 = skb->len
    a.jump(0x25, "data", dst=2, imm=ACK_MAX_LEN)           # if r2 > max goto data
    if ack_priority:
        a.op(0xB7, dst=3, imm=ack_priority)
        a.op(0x63, dst=1, src=3, off=_SKB_PRIORITY)
    a.jump(0x05, "out")
    a.label("data")
    if data_priority:
        a.op(0xB7, dst=3, imm=data_priority)
        a.op(0x63, dst=1, src=3, off=_SKB_PRIORITY)
    a.label("out")
    a.op(0xB7, dst=0, imm=1)
    a.op(0x95)
    return a.assemble()


def _lookup_window(a: Asm, map_fd: int) -> None:
    """r0 = &map[0], or to `out` when there is none."""
    a.op(0x62, dst=10, off=-24, imm=0)                     # stw [r10 - 24], 0: the key
    a.ld64(1, map_fd, src=1)                               # r1 = the map
    a.op(0xBF, dst=2, src=10)                              # r2 = r10
    a.op(0x07, dst=2, imm=-24)                             # r2 += -24
    a.op(0x85, imm=_FUNC_MAP_LOOKUP_ELEM)
    a.jump(0x15, "out", dst=0, imm=0)                      # if r0 == 0 goto out


def _set_congestion(a: Asm, cc: str) -> None:
    """bpf_setsockopt(ctx, SOL_TCP, TCP_CONGESTION, "name", 16) from the stack."""
    name = cc.encode().ljust(TCP_CA_NAME_MAX, b"\0")
    for k in (0, 8):
        a.ld64(2, int.from_bytes(name[k:k + 8], "little"))
        a.op(0x7B, dst=10, src=2, off=-16 + k)             # stxdw [r10 - 16 + k], r2
    a.op(0xBF, dst=1, src=6)
    a.op(0xB7, dst=2, imm=SOL_TCP)
    a.op(0xB7, dst=3, imm=TCP_CONGESTION)
    a.op(0xBF, dst=4, src=10)
    a.op(0x07, dst=4, imm=-16)
    a.op(0xB7, dst=5, imm=TCP_CA_NAME_MAX)
    a.op(0x85, imm=_FUNC_SETSOCKOPT)


def sock_ops_program(map_fd: int, cc: str | None = None) -> bytes:
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
    a = Asm()
    a.op(0xBF, dst=6, src=1)                               # r6 = ctx
    a.op(0x61, dst=7, src=6, off=_OPS_OP)                  # r7 = ctx->op
    a.jump(0x15, "rwnd", dst=7, imm=OP_RWND_INIT)
    a.jump(0x15, "clamp", dst=7, imm=OP_HDR_OPT_LEN)
    a.jump(0x15, "established", dst=7, imm=OP_ACTIVE_ESTABLISHED)
    a.jump(0x15, "passive", dst=7, imm=OP_PASSIVE_ESTABLISHED)
    if cc is not None:
        a.jump(0x15, "connect", dst=7, imm=OP_TCP_CONNECT)
    a.jump(0x05, "out")
    a.label("passive")
    if cc is not None:
        _set_congestion(a, cc)
    a.label("established")
    a.op(0xBF, dst=1, src=6)
    a.op(0x61, dst=2, src=6, off=_OPS_CB_FLAGS)            # r2 = ctx->cb_flags
    a.op(0x47, dst=2, imm=_CB_EACH_SEGMENT)                # r2 |= each segment
    a.op(0x85, imm=_FUNC_SOCK_OPS_CB_FLAGS_SET)
    a.jump(0x05, "clamp")
    if cc is not None:
        a.label("connect")
        _set_congestion(a, cc)
        a.jump(0x05, "out")
    a.label("rwnd")
    _lookup_window(a, map_fd)
    a.op(0x61, dst=3, src=0, off=4)                        # r3 = initial window, segments
    a.jump(0x15, "out", dst=3, imm=0)
    a.op(0x63, dst=6, src=3, off=_OPS_REPLY)               # ctx->reply = r3
    a.jump(0x05, "out")
    a.label("clamp")
    _lookup_window(a, map_fd)
    a.op(0x61, dst=3, src=0, off=0)                        # r3 = clamp, bytes
    a.jump(0x15, "out", dst=3, imm=0)
    a.op(0x63, dst=10, src=3, off=-20)                     # stxw [r10 - 20], r3: wanted
    for func, at in ((_FUNC_GETSOCKOPT, -28), (_FUNC_SETSOCKOPT, -20)):
        a.op(0xBF, dst=1, src=6)
        a.op(0xB7, dst=2, imm=SOL_TCP)
        a.op(0xB7, dst=3, imm=TCP_WINDOW_CLAMP)
        a.op(0xBF, dst=4, src=10)
        a.op(0x07, dst=4, imm=at)
        a.op(0xB7, dst=5, imm=4)
        a.op(0x85, imm=func)
        if func == _FUNC_GETSOCKOPT:  # the socket's clamp now (0 when it cannot be read)
            a.op(0x61, dst=2, src=10, off=-28)
            a.op(0x61, dst=3, src=10, off=-20)
            a.jump(0x1D, "out", dst=2, src=3)              # if r2 == r3 goto out
    a.label("out")
    a.op(0xB7, dst=0, imm=1)                               # mov64 r0, 1
    a.op(0x95)                                             # exit
    return a.assemble()


def _bpf(cmd: int, attr: bytes | ctypes.Array[ctypes.c_char]) -> int:
    nr = _SYS_BPF.get(platform.machine())
    if nr is None:
        raise UnavailableError(f"cgroup BPF: unknown system call number on "
                               f"{platform.machine()}")
    buf = attr if isinstance(attr, ctypes.Array) else \
        ctypes.create_string_buffer(attr, max(len(attr), 128))
    ret = _libc.syscall(nr, cmd, buf, len(buf))
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return int(ret)


def load_program(prog_type: int, attach_type: int, insns: bytes, name: str, what: str,
                 needs: str = "CONFIG_CGROUP_BPF") -> int:
    ibuf = ctypes.create_string_buffer(insns, len(insns))
    lic = ctypes.create_string_buffer(b"GPL")
    log = ctypes.create_string_buffer(65536)
    attr = struct.pack("<IIQQIIQII16sII", prog_type, len(insns) // 8,
                       ctypes.addressof(ibuf), ctypes.addressof(lic), 1, len(log),
                       ctypes.addressof(log), 0, 0, name.encode()[:15], 0, attach_type)
    try:
        return _bpf(BPF_PROG_LOAD, attr)
    except OSError as err:
        detail = log.value.decode(errors="replace").strip().splitlines()
        raise UnavailableError(
            f"this kernel refused a {what} BPF program: {err.strerror}"
            + (f" ({detail[-1]})" if detail else ""),
            f"it needs {needs} and root") from None


def load_priority_program(priority: int, name: str = "bb_prio",
                          data_priority: int | None = None) -> int:
    """Load the program (with `data_priority`: `ack_data_program`); return its descriptor
    (the caller closes it)."""
    insns = priority_program(priority) if data_priority is None else \
        ack_data_program(priority, data_priority)
    return load_program(BPF_PROG_TYPE_CGROUP_SKB, BPF_CGROUP_INET_EGRESS, insns, name, "cgroup-skb")


def load_sock_ops_program(map_fd: int, cc: str | None = None, name: str = "bb_window") -> int:
    """Load the sock_ops program over `map_fd`; return its descriptor. A kernel whose
    bpf_setsockopt lacks an option the program uses refuses it here, at load."""
    return load_program(BPF_PROG_TYPE_SOCK_OPS, BPF_CGROUP_SOCK_OPS, sock_ops_program(map_fd, cc),
                 name, "sock_ops")


def load_socket_priority_program(priority: int, name: str = "bb_sockprio") -> int:
    """Load `socket_priority_program`; return its descriptor (the caller closes it)."""
    return load_program(BPF_PROG_TYPE_CGROUP_SOCK, BPF_CGROUP_INET_SOCK_CREATE,
                 socket_priority_program(priority), name, "cgroup sock-create")


def create_window_map(name: str = "bb_window") -> int:
    """The sock_ops program's one-entry array map (all zero: nothing clamped)."""
    attr = struct.pack("<IIIIIII16s", BPF_MAP_TYPE_ARRAY, 4, WINDOW_VALUE.size, 1, 0, 0, 0,
                       name.encode()[:15])
    try:
        return _bpf(BPF_MAP_CREATE, attr)
    except OSError as err:
        raise UnavailableError(f"this kernel refused a BPF array map: {err.strerror}",
                               "it needs CONFIG_BPF_SYSCALL and root") from None


def set_window(map_fd: int, clamp_bytes: int, initial_segments: int) -> None:
    """The clamp every socket of the job gets with its next segment, and new connections'
    initial window (both 0: leave the kernel's)."""
    value = ctypes.create_string_buffer(WINDOW_VALUE.pack(clamp_bytes, initial_segments),
                                        WINDOW_VALUE.size)
    k = ctypes.c_uint32(0)
    attr = struct.pack("<IIQQQ", map_fd, 0, ctypes.addressof(k), ctypes.addressof(value), 0)
    _bpf(BPF_MAP_UPDATE_ELEM, attr)


def window(map_fd: int) -> tuple[int, int]:
    value = ctypes.create_string_buffer(WINDOW_VALUE.size)
    k = ctypes.c_uint32(0)
    attr = struct.pack("<IIQQQ", map_fd, 0, ctypes.addressof(k), ctypes.addressof(value), 0)
    _bpf(BPF_MAP_LOOKUP_ELEM, attr)
    return WINDOW_VALUE.unpack(value.raw)  # type: ignore[return-value]


def _info(fd: int, size: int, prefix: bytes = b"") -> bytes:
    info = ctypes.create_string_buffer(prefix, size)
    _bpf(BPF_OBJ_GET_INFO_BY_FD, struct.pack("<IIQ", fd, size, ctypes.addressof(info)))
    return info.raw


def program_id(fd: int) -> int:
    return int(struct.unpack_from("<I", _info(fd, 256), 4)[0])  # bpf_prog_info: type, id


def map_id(fd: int) -> int:
    return int(struct.unpack_from("<I", _info(fd, 128), 4)[0])  # bpf_map_info: type, id


def program_maps(fd: int) -> list[int]:
    """The ids of the maps a loaded program uses (bpf_prog_info's nr_map_ids, map_ids)."""
    ids = (ctypes.c_uint32 * 8)()
    head = bytearray(64)
    struct.pack_into("<IQ", head, 52, 8, ctypes.addressof(ids))
    raw = _info(fd, 256, bytes(head))
    return [int(ids[i]) for i in range(min(8, struct.unpack_from("<I", raw, 52)[0]))]


def program_fd(prog_id: int) -> int | None:
    """A descriptor for a loaded program by its id; None when no such program lives."""
    try:
        return _bpf(BPF_PROG_GET_FD_BY_ID, struct.pack("<I", prog_id))
    except OSError:
        return None


def map_fd(ident: int) -> int | None:
    """A descriptor for a map by its id; None when no such map lives."""
    try:
        return _bpf(BPF_MAP_GET_FD_BY_ID, struct.pack("<I", ident))
    except OSError:
        return None


def _ids(cmd: int) -> list[int]:
    found, start = [], 0
    while True:
        buf = ctypes.create_string_buffer(struct.pack("<II", start, 0), 128)
        try:
            _bpf(cmd, buf)
        except OSError:  # ENOENT: no more
            return found
        start = struct.unpack_from("<I", buf.raw, 4)[0]
        found.append(start)


def program_ids() -> list[int]:
    """The ids of every BPF program loaded on the machine."""
    return _ids(BPF_PROG_GET_NEXT_ID)


def map_ids() -> list[int]:
    """The ids of every BPF map on the machine."""
    return _ids(BPF_MAP_GET_NEXT_ID)


#: The names our programs and maps are loaded with start so (the kernel keeps 15 bytes).
NAME_PREFIX = "bb_"


def _named(ids: list[int], get_fd: Callable[[int], int | None], at: int) -> list[int]:
    found = []
    for ident in ids:
        fd = get_fd(ident)
        if fd is None:
            continue
        try:
            raw = _info(fd, 256)
        except OSError:
            continue
        finally:
            os.close(fd)
        if raw[at:at + 16].split(b"\0")[0].decode(errors="replace").startswith(NAME_PREFIX):
            found.append(ident)
    return found


def ours() -> tuple[list[int], list[int]]:
    """The ids of the loaded programs and maps whose names say they are backburner's."""
    return (_named(program_ids(), program_fd, 64),  # bpf_prog_info.name
            _named(map_ids(), map_fd, 24))  # bpf_map_info.name


def attach(cgroup_fd: int, prog_fd: int, attach_type: int = BPF_CGROUP_INET_EGRESS) -> None:
    _bpf(BPF_PROG_ATTACH, struct.pack("<IIII", cgroup_fd, prog_fd, attach_type,
                                      BPF_F_ALLOW_MULTI))


def detach(cgroup_fd: int, prog_fd: int, attach_type: int = BPF_CGROUP_INET_EGRESS) -> None:
    _bpf(BPF_PROG_DETACH, struct.pack("<IIII", cgroup_fd, prog_fd, attach_type, 0))


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


def attached(cgroup_fd: int, attach_type: int = BPF_CGROUP_INET_EGRESS) -> list[int]:
    """Ids of the programs of `attach_type` attached to this group itself (not inherited
    ones)."""
    ids = (ctypes.c_uint32 * 64)()
    # target_fd, attach_type, query_flags, attach_flags, prog_ids, prog_cnt
    buf = ctypes.create_string_buffer(struct.pack("<IIIIQI", cgroup_fd, attach_type, 0, 0,
                                                  ctypes.addressof(ids), 64), 128)
    _bpf(BPF_PROG_QUERY, buf)
    count = struct.unpack_from("<I", buf.raw, 24)[0]
    return [int(ids[i]) for i in range(min(count, 64))]


# --- pinned in the BPF filesystem -------------------------------------------------------------
#
# A program or map pinned in bpffs lives as long as its pin does, with no process holding
# it: that is how systemd is given programs to attach to its units' groups (BPFProgram=
# takes a bpffs path), and how a controller finds the map again.

BPFFS = "/sys/fs/bpf"


def bpffs_mounted(path: str = BPFFS) -> bool:
    """Whether a BPF filesystem is mounted at `path` itself (the top one counts)."""
    real = os.path.realpath(path)
    on_top = [m for m in procfs.mounts() if m.mountpoint == real]
    return bool(on_top) and on_top[-1].fstype == "bpf"


def _path_attr(path: str, fd: int) -> tuple[bytes, ctypes.Array[ctypes.c_char]]:
    name = ctypes.create_string_buffer(os.fsencode(path))
    return struct.pack("<QII", ctypes.addressof(name), fd, 0), name


def pin(fd: int, path: str) -> None:
    """Pin a program or map at `path` in bpffs (which must not exist; the parent must)."""
    attr, _keep = _path_attr(path, fd)
    _bpf(BPF_OBJ_PIN, attr)


def pinned(path: str) -> int:
    """A descriptor of the program or map pinned at `path` (the caller closes it)."""
    attr, _keep = _path_attr(path, 0)
    return _bpf(BPF_OBJ_GET, attr)
