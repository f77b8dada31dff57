"""kernel.syscalls: the one libc handle, the numbers of the calls made by number on every
architecture Debian ships, and the calls a pre-exec hook makes (prctl, setns)."""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import shutil
import struct
import subprocess
import threading
import warnings

import pytest
from helpers import TIMEOUT

from backburner.base.errors import UnavailableError
from backburner.kernel import syscalls

#: Debian architecture -> the platform.machine() names it reports, its pointer size, and
#: the numbers of ioprio_set, ioprio_get, perf_event_open, bpf (asm/unistd.h of Debian's
#: linux-libc-dev-ARCH-cross 6.1 packages, armhf's with __ARM_EABI__; mips64el's and
#: mipsel's after __NR_Linux, 5000 and 4000) and cachestat (the common table from 424 on).
DEBIAN_ARCHES = {
    "amd64": (["x86_64"], 64, (251, 252, 298, 321, 451)),
    "i386": (["i386", "i586", "i686"], 32, (289, 290, 336, 357, 451)),
    "arm64": (["aarch64"], 64, (30, 31, 241, 280, 451)),
    "armel/armhf": (["armv5tel", "armv6l", "armv7l", "armv8l"], 32, (314, 315, 364, 386, 451)),
    "mips64el": (["mips64"], 64, (5273, 5274, 5292, 5315, 5451)),
    "mipsel": (["mips"], 32, (4314, 4315, 4333, 4355, 4451)),
    "ppc64el": (["ppc64le"], 64, (273, 274, 319, 361, 451)),
    "riscv64": (["riscv64"], 64, (30, 31, 241, 280, 451)),
    "s390x": (["s390x"], 64, (282, 283, 331, 351, 451)),
    "loong64": (["loongarch64"], 64, (30, 31, 241, 280, 451)),
}


def _named(numbers: tuple[int, ...]) -> dict[str, int]:
    return dict(zip(syscalls.CALLS, numbers, strict=True))


@pytest.mark.parametrize("arch", sorted(DEBIAN_ARCHES))
def test_the_numbers_for_every_debian_architecture(arch: str) -> None:
    machines, bits, numbers = DEBIAN_ARCHES[arch]
    for machine in machines:
        assert syscalls.numbers(machine, bits) == _named(numbers), machine


@pytest.mark.parametrize("machine, arch", [("x86_64", "i386"), ("aarch64", "armel/armhf"),
                                           ("mips64", "mipsel"), ("ppc64le", "ppc64el"),
                                           ("s390x", "s390x")])
def test_a_32_bit_userland_on_a_64_bit_kernel_uses_the_32_bit_abi(machine: str,
                                                                  arch: str) -> None:
    assert syscalls.numbers(machine, 32) == _named(DEBIAN_ARCHES[arch][2])


def test_an_unknown_architecture_has_no_numbers_not_wrong_ones(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert syscalls.numbers("sparc64", 64) == {}
    monkeypatch.setattr(syscalls, "_HERE", {})
    monkeypatch.setattr(syscalls, "ABI", "sparc64")
    with pytest.raises(UnavailableError, match="ioprio_set.*sparc64.*--cpu still works"):
        syscalls.number("ioprio_set", "--cpu still works")


def test_the_numbers_for_this_machine_are_the_c_library_headers() -> None:
    """The running ABI's numbers as the system headers define them (the C preprocessor
    picks the header for this ABI, as a compiled program would). A call newer than the
    headers is left as its name by the preprocessor, and not compared."""
    cc = shutil.which("cc") or shutil.which("gcc")
    names = " ".join(f"__NR_{name}" for name in syscalls.CALLS)
    src = f"#include <sys/syscall.h>\nnumbers: {names}\n".encode()
    done = subprocess.run([cc, "-E", "-P", "-"], input=src, capture_output=True,
                          timeout=TIMEOUT) if cc else None
    if done is None or done.returncode != 0:
        warnings.warn("no C compiler or libc headers here: the numbers are checked only by "
                      "the calls below", stacklevel=1)
        return
    line = [ln for ln in done.stdout.decode().splitlines() if ln.startswith("numbers:")][-1]
    defined = {name: int(value.strip("()")) for name, value
               in zip(syscalls.CALLS, line.split()[1:], strict=True)
               if not value.startswith("__NR_")}
    assert len(defined) >= 4
    here = syscalls.numbers(platform.machine(), struct.calcsize("P") * 8)
    assert {name: here[name] for name in defined} == defined


def test_a_call_by_number_answers_and_a_refusal_is_its_errno() -> None:
    # ioprio_get(IOPRIO_WHO_PROCESS, 0): this process's IO priority, a small number
    assert 0 <= syscalls.syscall("ioprio_get", 1, 0) < 1 << 16
    with pytest.raises(OSError) as caught:
        syscalls.syscall("ioprio_get", 99, 0)  # no such "who"
    assert caught.value.errno == errno.EINVAL and "ioprio_get" in str(caught.value)


def test_prctl_names_the_calling_thread() -> None:
    seen: list[str] = []

    def named() -> None:
        syscalls.prctl(syscalls.PR_SET_NAME, b"bb-named-thread")
        seen.append(open(f"/proc/self/task/{threading.get_native_id()}/comm").read())

    thread = threading.Thread(target=named)
    thread.start()
    thread.join()
    assert seen == ["bb-named-thread\n"]
    with pytest.raises(OSError) as caught:
        syscalls.prctl(syscalls.PR_SET_PDEATHSIG, 1000)  # no such signal
    assert caught.value.errno == errno.EINVAL


def test_setns_enters_a_namespace_and_names_a_bad_descriptor() -> None:
    fd = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    try:
        syscalls.setns(fd, syscalls.CLONE_NEWNET)  # our own: allowed, nothing changes
    finally:
        os.close(fd)
    with pytest.raises(OSError) as caught:
        syscalls.setns(-1, syscalls.CLONE_NEWNET)
    assert caught.value.errno == errno.EBADF


def test_ioctl_passes_the_request_and_raises_the_refusal() -> None:
    fd = os.open("/dev/null", os.O_RDONLY)
    try:
        with pytest.raises(OSError) as caught:
            syscalls.ioctl(fd, 0x5401, ctypes.create_string_buffer(64))  # TCGETS
        assert caught.value.errno == errno.ENOTTY
    finally:
        os.close(fd)


def test_each_caller_gets_its_own_prototype_of_a_function() -> None:
    """A prototype set by one module must not change the function another calls."""
    mine = syscalls.function("getpid", ctypes.c_long, [])
    theirs = syscalls.function("getpid")
    assert mine is not theirs and theirs.restype is ctypes.c_int
    assert mine() == theirs() == os.getpid()
