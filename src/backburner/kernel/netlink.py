"""Netlink framing: the header every message starts with, attributes (nested ones too), and
the error reply a request is acknowledged with.

Used by the process events connector (`kernel.proc_events`) and the tc filter attach
(`kernel.bpf.tc_programs`). Netlink stays on the machine, so everything is in the host's
byte order ("="), as ``struct nlmsghdr`` {u32 len; u16 type; u16 flags; u32 seq; u32 pid}
and ``struct nlattr`` {u16 len; u16 type} are (include/uapi/linux/netlink.h); messages
and attributes are padded to 4 bytes.
"""

from __future__ import annotations

import os
import socket
import struct

HEADER = struct.Struct("=IHHII")
_ATTR = struct.Struct("=HH")
_ERROR = struct.Struct("=i")  # struct nlmsgerr's first field: 0 or -errno

NLMSG_ERROR = 2
NLMSG_DONE = 3
NLM_F_REQUEST = 0x1
NLM_F_ACK = 0x4
NLM_F_EXCL = 0x200
NLM_F_CREATE = 0x400
NLA_F_NESTED = 1 << 15


def align(length: int) -> int:
    """A length rounded up to netlink's 4-byte alignment."""
    return (length + 3) & ~3


def message(kind: int, flags: int, payload: bytes, seq: int = 0, pid: int = 0) -> bytes:
    """One message: the header, then `payload`."""
    return HEADER.pack(HEADER.size + len(payload), kind, flags, seq, pid) + payload


def attr(kind: int, payload: bytes) -> bytes:
    """One attribute, padded."""
    return _ATTR.pack(_ATTR.size + len(payload), kind) + payload + b"\0" * (-len(payload) % 4)


def nested(kind: int, *attrs: bytes) -> bytes:
    """An attribute holding attributes."""
    return attr(kind | NLA_F_NESTED, b"".join(attrs))


def error_of(reply: bytes) -> int:
    """The errno an acknowledgement carries (0: done); 0 for a reply that is not an
    error message."""
    if len(reply) < HEADER.size + _ERROR.size:
        return 0
    _length, kind, _flags, _seq, _pid = HEADER.unpack_from(reply)
    if kind != NLMSG_ERROR:
        return 0
    return -_ERROR.unpack_from(reply, HEADER.size)[0]


def request(sock: socket.socket, kind: int, flags: int, payload: bytes, seq: int = 1) -> None:
    """Send a request asking for an acknowledgement and wait for it; OSError with the
    errno the kernel answered."""
    sock.send(message(kind, NLM_F_REQUEST | NLM_F_ACK | flags, payload, seq))
    err = error_of(sock.recv(65536))
    if err:
        raise OSError(err, os.strerror(err))
