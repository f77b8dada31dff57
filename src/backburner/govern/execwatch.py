"""Exec events filtered by program name in the kernel, so that a program no rule names
never wakes the daemon.

The process connector reports every exec on the machine without the program's name: each
one costs the daemon a wake-up and a read of /proc/PID/comm (measured: ~3× what a bare
Python listener pays, well over the 0.5% of a core the daemon may cost at 100 execs/s).
Here the tracepoint sched:sched_process_exec is opened through perf_event_open(2), one
event per CPU, with an ftrace filter on its `filename` field (the path given to execve,
whose last component is what the kernel makes the process's name, cut to 15 bytes). The
kernel evaluates the filter before recording: only matching execs reach our ring buffers,
and poll() wakes us for those alone.

The tracepoint's id and record layout are read from tracefs once at start (mounted in a
private directory for that moment if it is not mounted: the perf event needs no mount once
open). Where any of it is unavailable (no perf_event_open, a seccomp filter, an
architecture whose syscall number is not listed here, a name the filter syntax cannot
express) `open_watch` returns None and the daemon keeps the connector's exec events.

Layouts are from include/uapi/linux/perf_event.h: struct perf_event_attr (the fields
used lie in its first 64 bytes; size 112 = PERF_ATTR_SIZE_VER5), struct
perf_event_mmap_page (data_head at byte 1024, data_tail at 1032), struct
perf_event_header {u32 type; u16 misc; u16 size}, PERF_RECORD_SAMPLE with
PERF_SAMPLE_TID|PERF_SAMPLE_RAW = {u32 pid, tid; u32 size; raw record}, PERF_RECORD_LOST =
{u64 id, lost}.
"""

from __future__ import annotations

import ctypes
import logging
import mmap
import os
import re
import struct
from collections.abc import Iterable
from contextlib import ExitStack
from dataclasses import dataclass

from .. import system
from ..base.errors import BackburnerError
from ..kernel import syscalls

log = logging.getLogger(__name__)

#: Where the ring can be read: reading it needs a read barrier between data_head and the
#: data, which Python cannot issue, and only x86's ordering of loads makes it unnecessary
#: (and PERF_EVENT_IOC_SET_FILTER's number below is x86-64's, with 8-byte pointers).
#: Elsewhere the connector serves (correct, dearer).
_READABLE_ABI = "x86_64"
PERF_TYPE_TRACEPOINT = 2
PERF_SAMPLE_TID = 1 << 1
PERF_SAMPLE_RAW = 1 << 10
PERF_FLAG_FD_CLOEXEC = 1 << 3
ATTR_DISABLED = 1 << 0
PERF_EVENT_IOC_ENABLE = 0x2400  # _IO('$', 0)
PERF_EVENT_IOC_SET_FILTER = 0x40082406  # _IOW('$', 6, char *) with 8-byte pointers
PERF_RECORD_LOST = 2
PERF_RECORD_SAMPLE = 9
DATA_PAGES = 4  # per CPU: a power of two; each matching exec takes ~100 bytes
EVENT = "sched/sched_process_exec"
FILTER_MAX = 4000  # the kernel copies at most a page of filter text
#: ftrace's glob characters and the filter's quote: a name holding one cannot be matched
_UNSAFE = re.compile(rb'[*?\[\]"\\\x00-\x1f]')


@dataclass(frozen=True)
class Layout:
    """Where the filename and pid are in a sched_process_exec record (its format file)."""

    filename_at: int  # a __data_loc: u32 = length << 16 | offset
    pid_at: int


def name_filter(names: Iterable[bytes]) -> str | None:
    """The ftrace filter matching execs whose program name is one of `names` (kernel
    names: at most 15 bytes, longer ones cut); None if a name cannot be expressed."""
    terms = []
    for name in sorted(set(names)):
        if not name or _UNSAFE.search(name) or b"/" in name:
            return None
        text = name.decode("ascii", errors="strict") if name.isascii() else None
        if text is None:
            return None
        tail = "*" if len(name) >= 15 else ""  # the kernel kept only the first 15 bytes
        # "*NAME": a path ending in the name, with or without a directory (a wider match,
        # "/usr/bin/xapt", costs one look at its name; a narrower one would miss starts)
        terms.append(f'filename ~ "*{text}{tail}"')
    text = " || ".join(terms)
    return text if terms and len(text) < FILTER_MAX else None


def parse_format(text: str) -> Layout:
    """The offsets of `filename` and `pid` in the tracepoint's format file."""
    found = {}
    for m in re.finditer(r"field:[^;]*?(\w+);\s*offset:(\d+);\s*size:(\d+);", text):
        found[m.group(1)] = (int(m.group(2)), int(m.group(3)))
    try:
        (fn_at, fn_size), (pid_at, pid_size) = found["filename"], found["pid"]
    except KeyError:
        raise ValueError("no filename or pid field in the format") from None
    if fn_size != 4 or pid_size != 4:
        raise ValueError("unexpected field sizes")
    return Layout(fn_at, pid_at)


def _attr(config: int) -> bytes:
    """struct perf_event_attr: a tracepoint, every event sampled with its TID and raw
    record, disabled until the filter is set, a wake-up for every event."""
    attr = bytearray(112)
    struct.pack_into("IIQQQQQI", attr, 0, PERF_TYPE_TRACEPOINT, len(attr), config, 1,
                     PERF_SAMPLE_TID | PERF_SAMPLE_RAW, 0, ATTR_DISABLED, 1)
    return bytes(attr)


class _Ring:
    """One CPU's perf event and its ring buffer."""

    def __init__(self, attr: bytes, cpu: int, filt: bytes) -> None:
        buf = ctypes.create_string_buffer(attr, len(attr))
        try:
            fd = syscalls.syscall("perf_event_open", buf, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC)
        except OSError as err:
            raise OSError(err.errno, f"perf_event_open on CPU {cpu}: {err.strerror}") from None
        self.fd = fd
        try:
            syscalls.ioctl(fd, PERF_EVENT_IOC_SET_FILTER, ctypes.c_char_p(filt))
            self.page = mmap.PAGESIZE
            self.size = DATA_PAGES * self.page
            self.mm = mmap.mmap(fd, self.page + self.size, mmap.MAP_SHARED,
                                mmap.PROT_READ | mmap.PROT_WRITE)
            syscalls.ioctl(fd, PERF_EVENT_IOC_ENABLE, None)
        except BaseException:
            os.close(fd)
            raise

    def records(self) -> Iterable[tuple[int, bytes]]:
        """(type, body) of every record written since the last call; consumed."""
        mm, size, page = self.mm, self.size, self.page
        head = struct.unpack_from("Q", mm, 1024)[0]
        tail = struct.unpack_from("Q", mm, 1032)[0]
        while tail < head:
            at = page + tail % size
            header = _wrapped(mm, at, 8, page, size)
            rtype, _misc, rsize = struct.unpack("IHH", header)
            if rsize < 8:  # cannot happen with a sane kernel; never loop forever
                tail = head
                break
            yield rtype, _wrapped(mm, page + (tail + 8) % size, rsize - 8, page, size)
            tail += rsize
        struct.pack_into("Q", mm, 1032, tail)

    def close(self) -> None:
        self.mm.close()
        os.close(self.fd)


def _wrapped(mm: mmap.mmap, at: int, n: int, page: int, size: int) -> bytes:
    end = page + size
    if at + n <= end:
        return mm[at:at + n]
    return mm[at:end] + mm[page:page + n - (end - at)]


class ExecWatch:
    """Matching execs, per CPU; `fds` are for poll(), `read()` returns (pid, filename)
    of what arrived and counts records the kernel had to drop in `lost`."""

    def __init__(self, rings: list[_Ring], layout: Layout) -> None:
        self.rings = rings
        self.layout = layout
        self.lost = 0

    @property
    def fds(self) -> list[int]:
        return [r.fd for r in self.rings]

    def read(self) -> list[tuple[int, bytes]]:
        got = []
        fn_at, pid_at = self.layout.filename_at, self.layout.pid_at
        for ring in self.rings:
            for rtype, body in ring.records():
                if rtype == PERF_RECORD_LOST:
                    self.lost += struct.unpack_from("Q", body, 8)[0]
                elif rtype == PERF_RECORD_SAMPLE and len(body) >= 12:
                    raw_size = struct.unpack_from("I", body, 8)[0]
                    raw = body[12:12 + raw_size]
                    loc = struct.unpack_from("I", raw, fn_at)[0]
                    off, ln = loc & 0xFFFF, loc >> 16
                    pid = struct.unpack_from("i", raw, pid_at)[0]
                    got.append((pid, raw[off:off + ln].split(b"\0", 1)[0]))
        return got

    def close(self) -> None:
        for r in self.rings:
            r.close()
        self.rings = []


def open_watch(names: Iterable[bytes]) -> ExecWatch | None:
    """The kernel-filtered exec watch for these program names, or None (and why, in the
    debug log) where it cannot be had."""
    here = syscalls.ABI == _READABLE_ABI
    filt = name_filter(names)
    if not here or filt is None:
        log.debug("exec watch: %s", f"not on {syscalls.ABI}" if not here else
                  "a name the filter cannot express")
        return None
    try:
        config, layout = _tracepoint()
        rings: list[_Ring] = []
        try:
            for cpu in sorted(os.sched_getaffinity(0) | _online_cpus()):
                rings.append(_Ring(_attr(config), cpu, filt.encode()))
        except BaseException:
            for r in rings:
                r.close()
            raise
    except (OSError, ValueError) as err:
        log.debug("exec watch unavailable: %s", err)
        return None
    log.debug("exec watch on %d CPUs, filter %s", len(rings), filt)
    return ExecWatch(rings, layout)


def _online_cpus() -> set[int]:
    """Every CPU the kernel has online (an exec can happen on any of them)."""
    text = open("/sys/devices/system/cpu/online").read().strip()
    cpus: set[int] = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def _tracepoint() -> tuple[int, Layout]:
    """The tracepoint's id and layout, from tracefs: the mount that exists, else one of
    our own (trace's, journaled) for as long as it takes to read two files."""
    try:
        with ExitStack() as stack:
            return _read_tracepoint(system.ensure_tracefs(stack))
    except BackburnerError as err:
        raise OSError(0, f"tracefs could not be mounted: {err}") from None


def _read_tracepoint(tracefs: str) -> tuple[int, Layout]:
    base = os.path.join(tracefs, "events", EVENT)
    with open(os.path.join(base, "id")) as f:
        config = int(f.read())
    with open(os.path.join(base, "format")) as f:
        return config, parse_format(f.read())
