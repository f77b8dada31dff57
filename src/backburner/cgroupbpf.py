"""cgroup BPF through the bpf(2) system call: the one place that loads, attaches, finds and
detaches a cgroup-skb program.

A download's packets belong to its job by the cgroup v2 group of the socket that sent or
receives them, which the kernel knows exactly; a cgroup-skb egress program runs for every
packet a socket in the group (or below it) sends, so setting the packet's priority there
attributes the job's traffic without guessing from ports. The program is four instructions,
assembled here, so no compiler, libbpf or bpftool is needed.

A program stays attached after the process that loaded it exits (the cgroup holds it), so
the undo finds it again by its program id, which the kernel does not reuse while it lives.
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct

from .errors import UnavailableError

_SYS_BPF = {"x86_64": 321, "aarch64": 280, "riscv64": 280, "armv7l": 386, "ppc64le": 361,
            "s390x": 351}

BPF_PROG_LOAD = 5
BPF_PROG_ATTACH = 8
BPF_PROG_DETACH = 9
BPF_PROG_GET_FD_BY_ID = 13
BPF_OBJ_GET_INFO_BY_FD = 15
BPF_PROG_QUERY = 16

BPF_PROG_TYPE_CGROUP_SKB = 8
BPF_CGROUP_INET_EGRESS = 1
BPF_F_ALLOW_MULTI = 2

#: offsetof(struct __sk_buff, priority)
_SKB_PRIORITY = 32

_libc = ctypes.CDLL(None, use_errno=True)


def _insn(code: int, dst: int = 0, src: int = 0, off: int = 0, imm: int = 0) -> bytes:
    return struct.pack("<BBhi", code, (src << 4) | dst, off, imm)


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


def _bpf(cmd: int, attr: bytes) -> int:
    nr = _SYS_BPF.get(platform.machine())
    if nr is None:
        raise UnavailableError(f"cgroup BPF: unknown system call number on "
                               f"{platform.machine()}")
    buf = ctypes.create_string_buffer(attr, max(len(attr), 128))
    ret = _libc.syscall(nr, cmd, buf, len(buf))
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return int(ret)


def load_priority_program(priority: int, name: str = "bb_prio") -> int:
    """Load the program; return its descriptor (the caller closes it)."""
    insns = priority_program(priority)
    ibuf = ctypes.create_string_buffer(insns, len(insns))
    lic = ctypes.create_string_buffer(b"GPL")
    log = ctypes.create_string_buffer(4096)
    attr = struct.pack("<IIQQIIQII16sII", BPF_PROG_TYPE_CGROUP_SKB, len(insns) // 8,
                       ctypes.addressof(ibuf), ctypes.addressof(lic), 1, len(log),
                       ctypes.addressof(log), 0, 0, name.encode()[:15], 0,
                       BPF_CGROUP_INET_EGRESS)
    try:
        return _bpf(BPF_PROG_LOAD, attr)
    except OSError as err:
        detail = log.value.decode(errors="replace").strip().splitlines()
        raise UnavailableError(
            f"this kernel refused a cgroup-skb BPF program: {err.strerror}"
            + (f" ({detail[-1]})" if detail else ""),
            "it needs CONFIG_CGROUP_BPF and root") from None


def program_id(fd: int) -> int:
    info = ctypes.create_string_buffer(256)
    attr = struct.pack("<IIQ", fd, len(info), ctypes.addressof(info))
    _bpf(BPF_OBJ_GET_INFO_BY_FD, attr)
    return int(struct.unpack_from("<I", info.raw, 4)[0])  # bpf_prog_info: type, id


def program_fd(prog_id: int) -> int | None:
    """A descriptor for a loaded program by its id; None when no such program lives."""
    try:
        return _bpf(BPF_PROG_GET_FD_BY_ID, struct.pack("<I", prog_id))
    except OSError:
        return None


def attach(cgroup_fd: int, prog_fd: int) -> None:
    _bpf(BPF_PROG_ATTACH, struct.pack("<IIII", cgroup_fd, prog_fd, BPF_CGROUP_INET_EGRESS,
                                      BPF_F_ALLOW_MULTI))


def detach(cgroup_fd: int, prog_fd: int) -> None:
    _bpf(BPF_PROG_DETACH, struct.pack("<IIII", cgroup_fd, prog_fd, BPF_CGROUP_INET_EGRESS, 0))


def attached(cgroup_fd: int) -> list[int]:
    """Ids of the egress programs attached to this group itself (not inherited ones)."""
    ids = (ctypes.c_uint32 * 64)()
    # target_fd, attach_type, query_flags, attach_flags, prog_ids, prog_cnt
    attr = bytearray(struct.pack("<IIIIQI", cgroup_fd, BPF_CGROUP_INET_EGRESS, 0, 0,
                                 ctypes.addressof(ids), 64))
    buf = ctypes.create_string_buffer(bytes(attr), 128)
    nr = _SYS_BPF.get(platform.machine(), 321)
    if _libc.syscall(nr, BPF_PROG_QUERY, buf, len(buf)) < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    count = struct.unpack_from("<I", buf.raw, 24)[0]
    return [int(ids[i]) for i in range(min(count, 64))]
