"""The C library and the system calls it does not wrap: one handle, one table of numbers.

Python wraps most of what backburner asks of the kernel; the rest goes through libc,
loaded once here, at import. spawn's pre-exec hook calls `prctl` and `setns` between fork
and exec, where loading a library (a dlopen, with its locks) or resolving a symbol is not
safe: the handle and every function this module calls are resolved when it is imported.

Some calls have no glibc wrapper (ioprio_set/ioprio_get, bpf, perf_event_open,
cachestat): they are made by number through syscall(2), and the numbers differ by
architecture. `NUMBERS` holds them for every architecture Debian ships, keyed by the
`platform.machine()` name, checked against the kernel's UAPI headers (asm/unistd.h of
Debian's linux-libc-dev cross packages: arm64, armhf, i386, mips64el, mipsel, ppc64el,
riscv64, s390x; the host's for amd64) and, for cachestat (Linux 6.5, newer than those
headers), the kernel's common table, where every architecture numbers the calls since
424 alike (MIPS after its ABI's base: o32 4000, n64 5000).
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct
from typing import Any

from ..base.errors import UnavailableError

libc = ctypes.CDLL(None, use_errno=True)

# prctl(2) options (include/uapi/linux/prctl.h)
PR_SET_PDEATHSIG = 1
PR_SET_NAME = 15
PR_SET_TIMERSLACK = 29
PR_SET_CHILD_SUBREAPER = 36
# clone(2) / setns(2) / unshare(2) namespace types (include/uapi/linux/sched.h)
CLONE_NEWNS = 0x00020000
CLONE_NEWNET = 0x40000000
# mount(2) flags (include/uapi/linux/mount.h)
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REC = 0x4000
MS_PRIVATE = 1 << 18
MS_SLAVE = 1 << 19
# umount2(2) flags (include/linux/fs.h)
MNT_DETACH = 0x2

#: Names of the calls made by number, in the order of each row of `NUMBERS`.
CALLS = ("ioprio_set", "ioprio_get", "perf_event_open", "bpf", "cachestat")
_GENERIC = (30, 31, 241, 280, 451)  # include/uapi/asm-generic/unistd.h
_I386 = (289, 290, 336, 357, 451)
_ARM = (314, 315, 364, 386, 451)  # EABI (armel, armhf)
_POWERPC = (273, 274, 319, 361, 451)  # ppc64el, and 32-bit powerpc
_S390 = (282, 283, 331, 351, 451)
_MIPS_O32 = (4314, 4315, 4333, 4355, 4451)
NUMBERS: dict[str, tuple[int, ...]] = {
    "x86_64": (251, 252, 298, 321, 451),  # amd64
    "i386": _I386, "i486": _I386, "i586": _I386, "i686": _I386,  # i386
    "aarch64": _GENERIC, "arm64": _GENERIC,  # arm64
    "armv5tel": _ARM, "armv5tejl": _ARM, "armv6l": _ARM, "armv7l": _ARM, "armv8l": _ARM,
    "mips64": (5273, 5274, 5292, 5315, 5451),  # mips64el: the n64 ABI
    "mips": _MIPS_O32,
    "ppc64le": _POWERPC, "ppc64": _POWERPC, "ppc": _POWERPC,  # ppc64el
    "riscv64": _GENERIC,
    "s390x": _S390, "s390": _S390,
    "loongarch64": _GENERIC,  # loong64
}
#: A 32-bit userland on a 64-bit kernel (armhf on an arm64 board, i386 on amd64) reports
#: the kernel's machine but makes the 32-bit ABI's system calls.
_COMPAT_32 = {"x86_64": "i686", "aarch64": "armv7l", "arm64": "armv7l", "mips64": "mips",
              "ppc64le": "ppc", "ppc64": "ppc", "s390x": "s390"}


def abi(machine: str, pointer_bits: int) -> str:
    """The machine name whose system call numbers a process uses: the kernel's, or its
    32-bit sibling's for a 32-bit process on a 64-bit kernel."""
    return _COMPAT_32.get(machine, machine) if pointer_bits == 32 else machine


#: This process's ABI, by the name `NUMBERS` keys it with.
ABI = abi(platform.machine(), struct.calcsize("P") * 8)


def numbers(machine: str, pointer_bits: int) -> dict[str, int]:
    """The numbers of `CALLS` for a `platform.machine()` name and the size of a pointer
    in the calling process; empty for an architecture not listed."""
    row = NUMBERS.get(abi(machine, pointer_bits))
    return dict(zip(CALLS, row, strict=True)) if row else {}


_HERE = numbers(platform.machine(), struct.calcsize("P") * 8)


def function(name: str, restype: type | None = ctypes.c_int,
             argtypes: list[type] | None = None) -> Any:
    """A libc function with its C prototype: a pointer of the caller's own (the handle's
    attributes are shared, and one caller's prototype must not become another's).
    Resolved now, at the caller's import."""
    func = libc[name]
    func.restype = restype
    if argtypes is not None:
        func.argtypes = argtypes
    return func


_syscall = function("syscall", ctypes.c_long)  # variadic: arguments as given
_prctl = function("prctl")
_setns = function("setns", ctypes.c_int, [ctypes.c_int, ctypes.c_int])
_ioctl = function("ioctl")
_unshare = function("unshare", ctypes.c_int, [ctypes.c_int])
_mount = function("mount", ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                                          ctypes.c_ulong, ctypes.c_char_p])
_umount2 = function("umount2", ctypes.c_int, [ctypes.c_char_p, ctypes.c_int])


def number(name: str, hint: str = "") -> int:
    """The number of system call `name` in this process's ABI; UnavailableError (with
    `hint`, what still works without it) where it is not known here."""
    try:
        return _HERE[name]
    except KeyError:
        raise UnavailableError(f"the {name} system call's number on {ABI} is not known here",
                               hint or None) from None


def error(what: str) -> OSError:
    """The OSError of the libc call that just failed (errno saved by ctypes)."""
    err = ctypes.get_errno()
    return OSError(err, f"{what}: {os.strerror(err)}")


def syscall(name: str, *args: object, hint: str = "") -> int:
    """syscall(2) by name; its result, or OSError with the errno it failed with. Pass
    each argument as the ctypes type of its C parameter where it is not an int or a
    buffer."""
    ret = _syscall(ctypes.c_long(number(name, hint)), *args)
    if ret < 0:
        raise error(name)
    return int(ret)


def prctl(option: int, arg: int | bytes = 0) -> None:
    """prctl(2) with one argument (a number, or a string for PR_SET_NAME); safe between
    fork and exec. OSError when the kernel refuses."""
    value = arg if isinstance(arg, bytes) else ctypes.c_ulong(arg)
    if _prctl(option, value, ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)) != 0:
        raise error(f"prctl({option})")


def setns(fd: int, nstype: int) -> None:
    """setns(2): the calling thread enters the namespace `fd` refers to; safe between
    fork and exec. OSError when it cannot."""
    if _setns(fd, nstype) != 0:
        raise error("setns")


def unshare(flags: int) -> None:
    """unshare(2) (os.unshare is Python 3.12's); safe between fork and exec. OSError when
    the kernel refuses."""
    if _unshare(flags) != 0:
        raise error("unshare")


def mount(source: str | None, target: str, fstype: str | None, flags: int,
          data: str | None = None) -> None:
    """mount(2); safe between fork and exec. OSError when the kernel refuses."""
    def c(text: str | None) -> bytes | None:
        return os.fsencode(text) if text is not None else None

    if _mount(c(source), c(target), c(fstype), flags, c(data)) != 0:
        raise error(f"mount {target}")


def umount2(target: str, flags: int) -> None:
    """umount2(2); safe between fork and exec. OSError when the kernel refuses."""
    if _umount2(os.fsencode(target), flags) != 0:
        raise error(f"umount {target}")


def ioctl(fd: int, request: int, arg: object) -> None:
    """ioctl(2) with a pointer or number argument, as ctypes passes it (fcntl.ioctl
    copies a buffer argument into at most 1024 bytes of its own)."""
    if _ioctl(fd, ctypes.c_ulong(request), arg) != 0:
        raise error(f"ioctl({request:#x})")
