"""The bpf(2) system call: loading programs, making and reading maps, finding loaded
programs and maps by id, attaching programs to cgroups and querying them, pinning in the
BPF filesystem, and running a program once on a packet (BPF_PROG_TEST_RUN).

Every attribute block is a ``union bpf_attr`` member (include/uapi/linux/bpf.h) packed in
the host's byte order ("=": native order, standard sizes, no padding; each member's
64-bit fields fall on 8-byte offsets by their declaration).

A program stays attached after the process that loaded it exits (the cgroup holds it), so
an undo finds it again by its program id, which the kernel does not reuse while it lives;
a map lives while a program, a descriptor or a pin holds it.
"""

from __future__ import annotations

import ctypes
import os
import struct
from collections.abc import Callable

from ...base.errors import UnavailableError
from .. import procfs, syscalls

BPF_MAP_CREATE = 0
BPF_MAP_LOOKUP_ELEM = 1
BPF_MAP_UPDATE_ELEM = 2
BPF_PROG_LOAD = 5
BPF_OBJ_PIN = 6
BPF_OBJ_GET = 7
BPF_PROG_ATTACH = 8
BPF_PROG_DETACH = 9
BPF_PROG_TEST_RUN = 10
BPF_PROG_GET_NEXT_ID = 11
BPF_MAP_GET_NEXT_ID = 12
BPF_PROG_GET_FD_BY_ID = 13
BPF_MAP_GET_FD_BY_ID = 14
BPF_OBJ_GET_INFO_BY_FD = 15
BPF_PROG_QUERY = 16

BPF_MAP_TYPE_ARRAY = 2
BPF_PROG_TYPE_SCHED_CLS = 3
BPF_PROG_TYPE_CGROUP_SKB = 8
BPF_PROG_TYPE_CGROUP_SOCK = 9
BPF_PROG_TYPE_SOCK_OPS = 13
BPF_CGROUP_INET_EGRESS = 1
BPF_CGROUP_INET_SOCK_CREATE = 2
BPF_CGROUP_SOCK_OPS = 3
BPF_F_ALLOW_MULTI = 2

#: The names our programs and maps are loaded with start so (the kernel keeps 15 bytes).
NAME_PREFIX = "bb_"
_NO_BPF = "the BPF programs of the network policy cannot be loaded here"


def bpf(cmd: int, attr: bytes | ctypes.Array[ctypes.c_char]) -> int:
    """bpf(cmd, attr): its result, or OSError. `attr` is copied into a buffer of at
    least 128 bytes (the kernel reads the size given, zeros beyond what it knows) unless
    it is a buffer already, which the kernel may write back into."""
    buf = attr if isinstance(attr, ctypes.Array) else \
        ctypes.create_string_buffer(attr, max(len(attr), 128))
    return syscalls.syscall("bpf", cmd, buf, len(buf), hint=_NO_BPF)


def load_program(prog_type: int, attach_type: int, insns: bytes, name: str, what: str,
                 needs: str = "CONFIG_CGROUP_BPF") -> int:
    """Load a GPL program; its descriptor (the caller closes it). A refusal is one line
    with the verifier's last word."""
    ibuf = ctypes.create_string_buffer(insns, len(insns))
    lic = ctypes.create_string_buffer(b"GPL")
    log = ctypes.create_string_buffer(65536)
    # prog_type, insn_cnt, insns, license, log_level, log_size, log_buf, kern_version,
    # prog_flags, prog_name, prog_ifindex, expected_attach_type
    attr = struct.pack("=IIQQIIQII16sII", prog_type, len(insns) // 8,
                       ctypes.addressof(ibuf), ctypes.addressof(lic), 1, len(log),
                       ctypes.addressof(log), 0, 0, name.encode()[:15], 0, attach_type)
    try:
        return bpf(BPF_PROG_LOAD, attr)
    except OSError as err:
        detail = log.value.decode(errors="replace").strip().splitlines()
        raise UnavailableError(
            f"this kernel refused a {what} BPF program: {err.strerror}"
            + (f" ({detail[-1]})" if detail else ""),
            f"it needs {needs} and root") from None


def run_once(prog_fd: int, data: bytes, ctx: bytes = b"", ctx_out_size: int = 0
             ) -> tuple[int, bytes]:
    """Run a loaded program once on the packet `data` (with `ctx`, its context, in and
    out where the program type takes one: a ``struct __sk_buff``); (its return value,
    the context after the run)."""
    din = ctypes.create_string_buffer(data, len(data))
    dout = ctypes.create_string_buffer(len(data) + 256)
    cin = ctypes.create_string_buffer(ctx, len(ctx)) if ctx else None
    cout = ctypes.create_string_buffer(ctx_out_size) if ctx_out_size else None
    # prog_fd, retval, data_size_in, data_size_out, data_in, data_out, repeat, duration,
    # ctx_size_in, ctx_size_out, ctx_in, ctx_out
    buf = ctypes.create_string_buffer(struct.pack(
        "=IIIIQQIIIIQQ", prog_fd, 0, len(data), len(dout), ctypes.addressof(din),
        ctypes.addressof(dout), 1, 0, len(ctx), ctx_out_size,
        ctypes.addressof(cin) if cin is not None else 0,
        ctypes.addressof(cout) if cout is not None else 0), 128)
    bpf(BPF_PROG_TEST_RUN, buf)
    retval = struct.unpack_from("=I", buf.raw, 4)[0]
    return retval, cout.raw if cout is not None else b""


# --- maps ------------------------------------------------------------------------------------


def create_array_map(value_size: int, entries: int, name: str) -> int:
    """An array map of `entries` values of `value_size` bytes (all zero); its descriptor."""
    attr = struct.pack("=IIIIIII16s", BPF_MAP_TYPE_ARRAY, 4, value_size, entries, 0, 0, 0,
                       name.encode()[:15])
    try:
        return bpf(BPF_MAP_CREATE, attr)
    except OSError as err:
        raise UnavailableError(f"this kernel refused a BPF array map: {err.strerror}",
                               "it needs CONFIG_BPF_SYSCALL and root") from None


def _elem(cmd: int, map_fd: int, key: int, value: ctypes.Array[ctypes.c_char]) -> None:
    k = ctypes.c_uint32(key)
    # map_fd, (pad), key, value, flags
    bpf(cmd, struct.pack("=IIQQQ", map_fd, 0, ctypes.addressof(k), ctypes.addressof(value), 0))


def array_update(map_fd: int, key: int, value: bytes) -> None:
    _elem(BPF_MAP_UPDATE_ELEM, map_fd, key, ctypes.create_string_buffer(value, len(value)))


def array_lookup(map_fd: int, key: int, size: int) -> bytes:
    value = ctypes.create_string_buffer(size)
    _elem(BPF_MAP_LOOKUP_ELEM, map_fd, key, value)
    return value.raw


# --- loaded programs and maps, by id ----------------------------------------------------------


def _info(fd: int, size: int, prefix: bytes = b"") -> bytes:
    info = ctypes.create_string_buffer(prefix, size)
    bpf(BPF_OBJ_GET_INFO_BY_FD, struct.pack("=IIQ", fd, size, ctypes.addressof(info)))
    return info.raw


def program_id(fd: int) -> int:
    return int(struct.unpack_from("=I", _info(fd, 256), 4)[0])  # bpf_prog_info: type, id


def map_id(fd: int) -> int:
    return int(struct.unpack_from("=I", _info(fd, 128), 4)[0])  # bpf_map_info: type, id


def program_maps(fd: int) -> list[int]:
    """The ids of the maps a loaded program uses (bpf_prog_info's nr_map_ids, map_ids)."""
    ids = (ctypes.c_uint32 * 8)()
    head = bytearray(64)
    struct.pack_into("=IQ", head, 52, 8, ctypes.addressof(ids))
    raw = _info(fd, 256, bytes(head))
    return [int(ids[i]) for i in range(min(8, struct.unpack_from("=I", raw, 52)[0]))]


def program_fd(prog_id: int) -> int | None:
    """A descriptor for a loaded program by its id; None when no such program lives."""
    try:
        return bpf(BPF_PROG_GET_FD_BY_ID, struct.pack("=I", prog_id))
    except OSError:
        return None


def map_fd(ident: int) -> int | None:
    """A descriptor for a map by its id; None when no such map lives."""
    try:
        return bpf(BPF_MAP_GET_FD_BY_ID, struct.pack("=I", ident))
    except OSError:
        return None


def _ids(cmd: int) -> list[int]:
    found, start = [], 0
    while True:
        buf = ctypes.create_string_buffer(struct.pack("=II", start, 0), 128)
        try:
            bpf(cmd, buf)
        except OSError:  # ENOENT: no more
            return found
        start = struct.unpack_from("=I", buf.raw, 4)[0]
        found.append(start)


def program_ids() -> list[int]:
    """The ids of every BPF program loaded on the machine."""
    return _ids(BPF_PROG_GET_NEXT_ID)


def map_ids() -> list[int]:
    """The ids of every BPF map on the machine."""
    return _ids(BPF_MAP_GET_NEXT_ID)


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


# --- on cgroups -------------------------------------------------------------------------------


def attach(cgroup_fd: int, prog_fd: int, attach_type: int = BPF_CGROUP_INET_EGRESS) -> None:
    bpf(BPF_PROG_ATTACH, struct.pack("=IIII", cgroup_fd, prog_fd, attach_type,
                                     BPF_F_ALLOW_MULTI))


def detach(cgroup_fd: int, prog_fd: int, attach_type: int = BPF_CGROUP_INET_EGRESS) -> None:
    bpf(BPF_PROG_DETACH, struct.pack("=IIII", cgroup_fd, prog_fd, attach_type, 0))


def attached(cgroup_fd: int, attach_type: int = BPF_CGROUP_INET_EGRESS) -> list[int]:
    """Ids of the programs of `attach_type` attached to this group itself (not inherited
    ones)."""
    ids = (ctypes.c_uint32 * 64)()
    # target_fd, attach_type, query_flags, attach_flags, prog_ids, prog_cnt
    buf = ctypes.create_string_buffer(struct.pack("=IIIIQI", cgroup_fd, attach_type, 0, 0,
                                                  ctypes.addressof(ids), 64), 128)
    bpf(BPF_PROG_QUERY, buf)
    count = struct.unpack_from("=I", buf.raw, 24)[0]
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
    return struct.pack("=QII", ctypes.addressof(name), fd, 0), name


def pin(fd: int, path: str) -> None:
    """Pin a program or map at `path` in bpffs (which must not exist; the parent must)."""
    attr, _keep = _path_attr(path, fd)
    bpf(BPF_OBJ_PIN, attr)


def pinned(path: str) -> int:
    """A descriptor of the program or map pinned at `path` (the caller closes it)."""
    attr, _keep = _path_attr(path, 0)
    return bpf(BPF_OBJ_GET, attr)
