"""The pack: what a start read, file by file and range by range (pure: bytes in, bytes out).

A pack is what `record` writes and `replay`, `show` and `layout` read. It must survive
anything a path can hold (spaces, newlines, bytes that are not UTF-8), tell a file that was
updated since from the one that was recorded, and stay small enough to load at boot before
anything else is cached. The format (version 1, documented in docs/reference/pack-format.md)::

    magic "BBRAPACK" | version u16 | flags u16 | body length u64 | body | CRC-32 u32

All multi-byte header fields are little-endian; the body is a sequence of unsigned LEB128
varints (`_Writer`), with paths prefix-compressed against the previous path and ranges
counted in pages, each start relative to the end of the previous range. The CRC covers
everything before it, so a truncated or damaged pack is refused (DataError, status 65)
instead of being half-replayed.

Identity of a file: device (st_dev, and the filesystem's statfs f_fsid, which survives the
same image attached under another loop device number), inode, size and mtime; optionally a
BLAKE2b-128 digest of the recorded ranges' bytes. Entries are in first-access order.

Version 2 (`record --lookups`) adds what the start asked of the filesystem besides its
files' bytes, for `layout`: the directories it listed, the inodes it looked at without
opening them and the names it looked for in vain (`Lookup`), and the order in which it
brought pages in and looked names up (`Step`), with the read-ahead it was recorded with
and the start's own wall and CPU time. A pack without them is written as version 1, so
an older backburner still reads it; version 1 packs read as before.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, replace

from ..base.errors import DataError
from .ranges import Ranges

MAGIC = b"BBRAPACK"
VERSION = 2
_HEADER = struct.Struct("<8sHHQ")
_CRC = struct.Struct("<I")
DIGEST_SIZE = 16
_HAS_DIGEST = 0x1
_DEVICE = 0x2


@dataclass(frozen=True)
class FileState:
    """What a file looks like now (or looked like when recorded): its identity."""

    dev: int
    fsid: int  # statfs f_fsid as one integer; 0 where unknown
    inode: int
    size: int
    mtime_ns: int


@dataclass(frozen=True)
class Entry:
    """One file of a pack: where it was, who it was, and which bytes of it were read.

    A *device* entry holds the metadata a start read (inode tables, directories, extent
    blocks: what a filesystem reads through its block device's page cache): `path` is the
    device node it was recorded on, `state` has the device number (dev), the filesystem's
    fsid and the device size; ranges are byte offsets on that device."""

    path: bytes
    state: FileState
    ranges: Ranges = ()
    digest: bytes | None = None
    device: bool = False

    @property
    def bytes(self) -> int:
        """Bytes of the recorded ranges that lie inside the file (the last page may not)."""
        return sum(max(0, min(off + ln, self.state.size) - off) for off, ln in self.ranges)


#: What a `Lookup` is: a directory the start listed, an inode it looked at (a stat, an
#: open it was refused, a directory it opened), a name it looked for that is not there.
LISTED, STATTED, MISSED = 1, 2, 3
LOOKUP_KINDS = {LISTED: "listed", STATTED: "statted", MISSED: "missed"}


@dataclass(frozen=True)
class Lookup:
    """A path the start asked about without reading a file's bytes. `state` is the
    inode's identity (for MISSED: that of the deepest directory on the path that exists,
    the one whose entries were searched)."""

    kind: int
    path: bytes
    state: FileState


@dataclass(frozen=True)
class Step:
    """One thing the start did, in order: pages `first` to `first + pages` of entry `what`
    brought into the cache, or (`what` < 0) lookup ``-what - 1`` made; `gap_us` after the
    previous step (the start's own time between them, on the recording's fast device)."""

    what: int
    first: int = 0
    pages: int = 0
    gap_us: int = 0

    @property
    def lookup(self) -> int | None:
        return -self.what - 1 if self.what < 0 else None


@dataclass(frozen=True)
class Pack:
    entries: tuple[Entry, ...]
    page_size: int = 4096
    created_ns: int = 0
    note: str = ""  # what was recorded: the command line, or "system, 60 s"
    lookups: tuple[Lookup, ...] = ()
    steps: tuple[Step, ...] = ()
    read_ahead_kb: int = 0  # the devices' read-ahead while recording (0: unknown)
    wall_ns: int = 0  # the recorded start's wall time (0: unknown)
    cpu_ns: int = 0  # its CPU time, user and system

    @property
    def bytes(self) -> int:
        return sum(e.bytes for e in self.entries)

    @property
    def version(self) -> int:
        """The format it is written in: 2 only when it holds what version 1 cannot."""
        extra = (self.lookups, self.steps, self.read_ahead_kb, self.wall_ns, self.cpu_ns)
        return 2 if any(extra) else 1


def digest(chunks: Iterable[bytes]) -> bytes:
    """BLAKE2b-128 of the recorded ranges' bytes, in order (the optional content check)."""
    import hashlib  # here: a replay (no digests) starts without loading OpenSSL

    h = hashlib.blake2b(digest_size=DIGEST_SIZE)
    for chunk in chunks:
        h.update(chunk)
    return h.digest()


# --- staleness -------------------------------------------------------------------------------

OK, CHANGED, MISSING = "ok", "changed", "missing"


def rebased(pack: Pack, old: bytes, new: bytes) -> Pack:
    """The pack with the files recorded under directory `old` looked for under `new`: the
    same filesystem mounted elsewhere (an image recorded at /mnt/app, replayed where a
    bench mounted its copy). Identity checks still apply: a copy of the image keeps its
    inodes, sizes, times and fsid. Device entries are matched by fsid and stay as they are."""
    old, new = old.rstrip(b"/"), new.rstrip(b"/")

    def move(e: Entry) -> Entry:
        if e.device or not (e.path == old or e.path.startswith(old + b"/")):
            return e
        return replace(e, path=new + e.path[len(old):])

    return replace(pack, entries=tuple(move(e) for e in pack.entries))


def status(entry: Entry, now: FileState | None) -> str:
    """Is the file at the entry's path still the one recorded?

    The same file is the same inode with the same size and mtime on the same filesystem:
    the same st_dev, or, when the device number differs (an image attached under another
    loop device), the same non-zero statfs fsid. Anything else is CHANGED; no file (or
    not a regular file) is MISSING.
    """
    if now is None:
        return MISSING
    was = entry.state
    same_fs = now.dev == was.dev or (was.fsid != 0 and now.fsid == was.fsid)
    same = same_fs and (now.inode, now.size, now.mtime_ns) == (was.inode, was.size,
                                                               was.mtime_ns)
    return OK if same else CHANGED


# --- encoding --------------------------------------------------------------------------------


class _Writer:
    def __init__(self) -> None:
        self.buf = bytearray()

    def uint(self, n: int) -> None:
        if n < 0:
            raise ValueError(f"negative value {n} in a pack")
        while True:
            byte = n & 0x7F
            n >>= 7
            if n:
                self.buf.append(byte | 0x80)
            else:
                self.buf.append(byte)
                return

    def sint(self, n: int) -> None:
        self.uint((n << 1) if n >= 0 else ((-n << 1) - 1))  # zigzag

    def blob(self, data: bytes) -> None:
        self.uint(len(data))
        self.buf += data


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = memoryview(data)
        self.pos = 0

    def _need(self, n: int) -> None:
        if self.pos + n > len(self.data):
            raise DataError("the pack is damaged: an entry runs past the end of its body")

    def uint(self) -> int:
        n = shift = 0
        while True:
            self._need(1)
            byte = self.data[self.pos]
            self.pos += 1
            n |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return n
            shift += 7
            if shift > 70:
                raise DataError("the pack is damaged: a number is too long")

    def sint(self) -> int:
        n = self.uint()
        return (n >> 1) if not n & 1 else -((n + 1) >> 1)

    def raw(self, n: int) -> bytes:
        self._need(n)
        out = bytes(self.data[self.pos:self.pos + n])
        self.pos += n
        return out

    def blob(self) -> bytes:
        return self.raw(self.uint())


def _common_prefix(a: bytes, b: bytes) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def encode(pack: Pack) -> bytes:
    """The pack as bytes (format version 1, or 2 when it has lookups or steps)."""
    devices: dict[tuple[int, int], int] = {}
    for e in pack.entries:
        devices.setdefault((e.state.dev, e.state.fsid), len(devices))
    for lk in pack.lookups:
        devices.setdefault((lk.state.dev, lk.state.fsid), len(devices))
    w = _Writer()
    w.uint(pack.created_ns)
    w.uint(pack.page_size)
    w.blob(pack.note.encode())
    w.uint(len(devices))
    for dev, fsid in devices:
        w.uint(dev)
        w.uint(fsid)
    w.uint(len(pack.entries))
    prev = b""
    page = pack.page_size
    for e in pack.entries:
        k = _common_prefix(prev, e.path)
        w.uint(k)
        w.blob(e.path[k:])
        prev = e.path
        s = e.state
        w.uint(devices[(s.dev, s.fsid)])
        w.uint(s.inode)
        w.uint(s.size)
        w.sint(s.mtime_ns)
        w.uint((_HAS_DIGEST if e.digest is not None else 0) | (_DEVICE if e.device else 0))
        if e.digest is not None:
            if len(e.digest) != DIGEST_SIZE:
                raise ValueError(f"a digest is {DIGEST_SIZE} bytes, not {len(e.digest)}")
            w.buf += e.digest
        _encode_ranges(w, e.ranges, page)
    if pack.version >= 2:
        _encode_v2(w, pack, devices)
    body = bytes(w.buf)
    head = _HEADER.pack(MAGIC, pack.version, 0, len(body))
    return head + body + _CRC.pack(zlib.crc32(head + body))


def _encode_v2(w: _Writer, pack: Pack, devices: dict[tuple[int, int], int]) -> None:
    w.uint(pack.read_ahead_kb)
    w.uint(pack.wall_ns)
    w.uint(pack.cpu_ns)
    w.uint(len(pack.lookups))
    prev = b""
    for lk in pack.lookups:
        if lk.kind not in LOOKUP_KINDS:
            raise ValueError(f"unknown lookup kind {lk.kind}")
        k = _common_prefix(prev, lk.path)
        w.uint(k)
        w.blob(lk.path[k:])
        prev = lk.path
        s = lk.state
        w.uint(lk.kind)
        w.uint(devices[(s.dev, s.fsid)])
        w.uint(s.inode)
        w.uint(s.size)
        w.sint(s.mtime_ns)
    w.uint(len(pack.steps))
    for st in pack.steps:
        if st.what >= len(pack.entries) or -st.what - 1 >= len(pack.lookups):
            raise ValueError(f"a step names {st.what}, which the pack does not hold")
        w.sint(st.what)
        w.uint(st.first)
        w.uint(st.pages)
        w.uint(st.gap_us)


def _encode_ranges(w: _Writer, ranges: Ranges, page: int) -> None:
    w.uint(len(ranges))
    end = 0
    for off, ln in ranges:
        if off % page or ln % page or off < end or ln <= 0:
            raise ValueError(f"range ({off}, {ln}) is not page-aligned, sorted and apart")
        w.uint((off - end) // page)
        w.uint(ln // page)
        end = off + ln


def decode(data: bytes) -> Pack:
    """Bytes -> Pack. DataError (65) for anything that is not a whole pack we can read."""
    if len(data) < len(MAGIC) or data[:len(MAGIC)] != MAGIC:
        raise DataError("not a backburner readahead pack (wrong magic)",
                        "make one with `backburner readahead record`")
    if len(data) < _HEADER.size:
        raise DataError("the pack is truncated (its header is incomplete)")
    _magic, version, _flags, length = _HEADER.unpack_from(data)
    if version > VERSION:
        raise DataError(f"the pack is format version {version}, newer than this backburner "
                        f"reads ({VERSION})", "replay it with a newer backburner")
    if version < 1:
        raise DataError(f"the pack has an invalid format version {version}")
    end = _HEADER.size + length
    if len(data) < end + _CRC.size:
        raise DataError(f"the pack is truncated ({len(data)} of {end + _CRC.size} bytes)")
    if len(data) > end + _CRC.size:
        raise DataError("the pack is damaged: bytes after its end")
    (crc,) = _CRC.unpack_from(data, end)
    if zlib.crc32(data[:end]) != crc:
        raise DataError("the pack is damaged (checksum mismatch)")
    pack = _decode_body(_Reader(data[_HEADER.size:end]), version)
    return pack


def _decode_body(r: _Reader, version: int = 1) -> Pack:
    created = r.uint()
    page = r.uint()
    if page <= 0 or page & (page - 1):
        raise DataError(f"the pack is damaged: page size {page}")
    try:
        note = r.blob().decode()
    except UnicodeDecodeError:
        raise DataError("the pack is damaged: its note is not text") from None
    devices = [(r.uint(), r.uint()) for _ in range(r.uint())]
    entries = []
    prev = b""
    for _ in range(r.uint()):
        k = r.uint()
        if k > len(prev):
            raise DataError("the pack is damaged: a path refers past the previous one")
        path = prev[:k] + r.blob()
        prev = path
        idx = r.uint()
        if idx >= len(devices):
            raise DataError("the pack is damaged: an entry names an unknown device")
        dev, fsid = devices[idx]
        state = FileState(dev, fsid, r.uint(), r.uint(), r.sint())
        flags = r.uint()
        if flags & ~(_HAS_DIGEST | _DEVICE):
            raise DataError(f"the pack has entry flags {flags:#x} this backburner does not know",
                            "read it with a newer backburner")
        dig = r.raw(DIGEST_SIZE) if flags & _HAS_DIGEST else None
        ranges = []
        end = 0
        for _ in range(r.uint()):
            off = end + r.uint() * page
            ln = r.uint() * page
            ranges.append((off, ln))
            end = off + ln
        entries.append(Entry(path, state, tuple(ranges), dig, bool(flags & _DEVICE)))
    pack = Pack(tuple(entries), page, created, note)
    if version >= 2:
        pack = _decode_v2(r, pack, devices)
    if r.pos != len(r.data):
        raise DataError("the pack is damaged: bytes left after its last entry")
    return pack


def _decode_v2(r: _Reader, pack: Pack, devices: list[tuple[int, int]]) -> Pack:
    read_ahead, wall, cpu = r.uint(), r.uint(), r.uint()
    lookups = []
    prev = b""
    for _ in range(r.uint()):
        k = r.uint()
        if k > len(prev):
            raise DataError("the pack is damaged: a path refers past the previous one")
        path = prev[:k] + r.blob()
        prev = path
        kind, idx = r.uint(), r.uint()
        if kind not in LOOKUP_KINDS:
            raise DataError(f"the pack has lookups of a kind ({kind}) this backburner does "
                            "not know", "read it with a newer backburner")
        if idx >= len(devices):
            raise DataError("the pack is damaged: a lookup names an unknown device")
        dev, fsid = devices[idx]
        lookups.append(Lookup(kind, path, FileState(dev, fsid, r.uint(), r.uint(), r.sint())))
    steps = []
    for _ in range(r.uint()):
        st = Step(r.sint(), r.uint(), r.uint(), r.uint())
        if st.what >= len(pack.entries) or -st.what - 1 >= len(lookups):
            raise DataError("the pack is damaged: a step names what it does not hold")
        steps.append(st)
    return replace(pack, lookups=tuple(lookups), steps=tuple(steps), read_ahead_kb=read_ahead,
                   wall_ns=wall, cpu_ns=cpu)


# --- display ---------------------------------------------------------------------------------


def show_path(path: bytes) -> str:
    """A path for a terminal: printable UTF-8 as is, anything else as a backslash escape
    (a newline in a name must not look like two entries)."""
    out = []
    for ch in path.decode("utf-8", "surrogateescape"):
        if 0xDC80 <= ord(ch) <= 0xDCFF:  # a byte that is not UTF-8
            out.append(f"\\x{ord(ch) - 0xDC00:02x}")
        elif ch == "\\":
            out.append("\\\\")
        elif ch.isprintable():
            out.append(ch)
        else:
            out.append(ch.encode("unicode_escape").decode())
    return "".join(out)
