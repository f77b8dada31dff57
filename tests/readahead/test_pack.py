"""The pack format (pure): exact round trips of any path bytes and identity, seeded random
packs, and every kind of bad input refused as a DataError."""

from __future__ import annotations

import random
import struct
import zlib

import pytest

from backburner.base.errors import DataError
from backburner.readahead import pack as P
from backburner.readahead import ranges as R

PAGE = 4096
HOSTILE = [b"/mnt/app/plain.py", b"/mnt/app/with space/a b.txt", b"/mnt/app/new\nline",
           b"/mnt/app/\xff\xfe not utf-8 \x80", b"/mnt/app/tab\there", b"/mnt/app/\\back",
           b"/mnt/app/caf\xc3\xa9", b"/", b"/mnt/app/with space/a b.txt2", b"/x" * 300]


def entry(path: bytes, ranges=((0, PAGE),), size=10_000, dev=2049, fsid=7, inode=12,
          mtime=1_700_000_000_123_456_789, digest=None) -> P.Entry:
    return P.Entry(path, P.FileState(dev, fsid, inode, size, mtime), tuple(ranges), digest)


def random_v2(rng: random.Random) -> P.Pack:
    """A random pack with lookups and steps (format version 2)."""
    base = random_pack(rng)
    lookups = tuple(P.Lookup(rng.choice([P.LISTED, P.STATTED, P.MISSED]),
                             HOSTILE[i % len(HOSTILE)] + str(i).encode(),
                             P.FileState(rng.choice([2049, 7340032]), rng.choice([0, 9]),
                                         rng.randint(0, 1 << 40), rng.randint(0, 1 << 30),
                                         rng.randint(-(1 << 62), 1 << 62)))
                    for i in range(rng.randint(1, 20)))
    steps = []
    for _ in range(rng.randint(0, 60)):
        if base.entries and rng.random() < 0.7:
            steps.append(P.Step(rng.randrange(len(base.entries)), rng.randrange(1 << 20),
                                rng.randint(1, 64), rng.randrange(1 << 24)))
        else:
            steps.append(P.Step(-rng.randrange(len(lookups)) - 1, gap_us=rng.randrange(1000)))
    return P.Pack(base.entries, PAGE, base.created_ns, base.note, lookups, tuple(steps),
                  rng.choice([16, 128]), rng.randrange(1 << 40), rng.randrange(1 << 40))


def random_pack(rng: random.Random) -> P.Pack:
    entries = []
    for i in range(rng.randint(0, 40)):
        path = bytes(rng.randint(1, 255) for _ in range(rng.randint(1, 80)))
        pages = sorted(rng.sample(range(0, 5000), rng.randint(0, 12)))
        ranges = R.page_align(((p * PAGE, rng.randint(1, 3) * PAGE) for p in pages), PAGE)
        state = P.FileState(rng.choice([2049, 7340032, 1 << 40]), rng.choice([0, 1 << 63, 5]),
                            rng.randint(0, 1 << 40), rng.randint(0, 1 << 45),
                            rng.randint(-(1 << 62), 1 << 62))
        dig = rng.randbytes(16) if rng.random() < 0.5 else None
        entries.append(P.Entry(path + str(i).encode(), state, ranges, dig,
                               device=rng.random() < 0.1))
    return P.Pack(tuple(entries), PAGE, rng.randint(0, 1 << 63), rng.choice(["", "python3 -c 1",
                                                                          "système, 60 s"]))


def test_hostile_paths_round_trip_exactly() -> None:
    pack = P.Pack(tuple(entry(p, inode=i) for i, p in enumerate(HOSTILE)), PAGE, 1, "cmd")
    again = P.decode(P.encode(pack))
    assert again == pack
    assert [e.path for e in again.entries] == HOSTILE


@pytest.mark.parametrize("seed", range(30))
def test_random_packs_round_trip(seed: int) -> None:
    pack = random_pack(random.Random(seed))
    assert P.decode(P.encode(pack)) == pack


@pytest.mark.parametrize("seed", range(20))
def test_version_2_packs_round_trip(seed: int) -> None:
    pack = random_v2(random.Random(seed))
    data = P.encode(pack)
    assert struct.unpack_from("<H", data, 8)[0] == 2
    assert P.decode(data) == pack


def test_a_pack_without_lookups_stays_version_1() -> None:
    """An older backburner reads what a recording without --lookups writes; a version 1
    pack reads as it always did (these bytes are a version 1 encoder's)."""
    pack = P.Pack((entry(b"/a"),), PAGE, 5, "cmd")
    data = P.encode(pack)
    assert struct.unpack_from("<H", data, 8)[0] == 1 and P.decode(data) == pack
    w = P._Writer()  # the version 1 layout of docs/reference/pack-format.md, field by field
    for n in (5, PAGE):
        w.uint(n)
    w.blob(b"cmd")
    for n in (1, 2049, 7, 1, 0):  # one device (dev, fsid), one entry, no shared prefix
        w.uint(n)
    w.blob(b"/a")
    for n in (0, 12, 10_000):  # device index, inode, size
        w.uint(n)
    w.sint(1_700_000_000_123_456_789)
    for n in (0, 1, 0, 1):  # flags, one range: gap 0, one page
        w.uint(n)
    body = bytes(w.buf)
    head = struct.pack("<8sHHQ", P.MAGIC, 1, 0, len(body))
    old = head + body + struct.pack("<I", zlib.crc32(head + body))
    assert old == data


@pytest.mark.parametrize("seed", range(3))
def test_every_truncation_of_a_version_2_pack_is_a_data_error(seed: int) -> None:
    data = P.encode(random_v2(random.Random(seed)))
    for n in range(len(data)):
        with pytest.raises(DataError):
            P.decode(data[:n])


def test_steps_must_name_what_the_pack_holds() -> None:
    pack = random_v2(random.Random(1))
    with pytest.raises(ValueError):
        P.encode(P.Pack(pack.entries, PAGE, lookups=pack.lookups,
                        steps=(P.Step(len(pack.entries)),)))
    with pytest.raises(ValueError):
        P.encode(P.Pack(pack.entries, PAGE, lookups=pack.lookups,
                        steps=(P.Step(-len(pack.lookups) - 1),)))
    assert P.Step(-3).lookup == 2 and P.Step(4).lookup is None


def test_compact() -> None:
    """A thousand files in a few directories, one range each: about 20 bytes per file
    beyond the distinct part of its name."""
    entries = tuple(entry(f"/usr/lib/python3/dist-packages/pkg{i // 100}/mod{i}.py".encode(),
                          ranges=((0, 2 * PAGE),), inode=1000 + i) for i in range(1000))
    data = P.encode(P.Pack(entries, PAGE))
    assert len(data) < 1000 * 30


@pytest.mark.parametrize("seed", range(3))
def test_every_truncation_is_a_data_error(seed: int) -> None:
    data = P.encode(random_pack(random.Random(seed)))
    for n in range(len(data)):
        with pytest.raises(DataError):
            P.decode(data[:n])


def test_messages_say_what_is_wrong() -> None:
    data = P.encode(P.Pack((entry(b"/a"),), PAGE))
    with pytest.raises(DataError, match="truncated"):
        P.decode(data[:-1])
    with pytest.raises(DataError, match="not a backburner readahead pack"):
        P.decode(b"#!/bin/sh\necho hello\n")
    with pytest.raises(DataError, match="not a backburner readahead pack"):
        P.decode(b"")
    newer = bytearray(data)
    struct.pack_into("<H", newer, 8, P.VERSION + 1)
    with pytest.raises(DataError, match="newer"):
        P.decode(bytes(newer))
    flipped = bytearray(data)
    flipped[len(flipped) // 2] ^= 0x40
    with pytest.raises(DataError, match="damaged"):
        P.decode(bytes(flipped))
    with pytest.raises(DataError, match="damaged"):
        P.decode(data + b"\0")


def test_a_consistent_but_malformed_body_is_refused() -> None:
    """A body with a valid checksum but nonsense inside (a crafted file) is still a
    DataError, never an IndexError."""
    body = bytes([0, 0x80, 0x20, 0, 0, 1, 5])  # page 4096, no note, no device, 1 entry...
    head = struct.pack("<8sHHQ", P.MAGIC, 1, 0, len(body))
    data = head + body + struct.pack("<I", zlib.crc32(head + body))
    with pytest.raises(DataError):
        P.decode(data)


def test_unknown_entry_flags_are_refused() -> None:
    """A flag bit a newer backburner may add is not silently ignored."""
    data = bytearray(P.encode(P.Pack((entry(b"/a"),), PAGE)))
    body = data[20:-4]
    at = body.rindex(bytes([0, 1, 0, 1]))  # flags 0, one range: gap 0, one page
    body[at] = 0x4
    head = bytes(data[:20])
    fixed = head + bytes(body) + struct.pack("<I", zlib.crc32(head + bytes(body)))
    with pytest.raises(DataError, match="newer"):
        P.decode(fixed)


def test_encode_refuses_unaligned_ranges() -> None:
    with pytest.raises(ValueError):
        P.encode(P.Pack((entry(b"/a", ranges=((1, PAGE),)),), PAGE))


def test_bytes_count_only_what_is_inside_the_file() -> None:
    e = entry(b"/a", ranges=((0, PAGE), (2 * PAGE, PAGE)), size=2 * PAGE + 100)
    assert e.bytes == PAGE + 100
    assert R.clip(e.ranges, 2 * PAGE + 100) == ((0, PAGE), (2 * PAGE, 100))


def test_status() -> None:
    e = entry(b"/a")
    s = e.state
    assert P.status(e, None) == P.MISSING
    assert P.status(e, s) == P.OK
    moved_loop = P.FileState(7340033, s.fsid, s.inode, s.size, s.mtime_ns)
    assert P.status(e, moved_loop) == P.OK  # same filesystem under another loop device
    other_fs = P.FileState(7340033, 99, s.inode, s.size, s.mtime_ns)
    assert P.status(e, other_fs) == P.CHANGED
    no_fsid = P.Entry(b"/a", P.FileState(s.dev, 0, s.inode, s.size, s.mtime_ns))
    assert P.status(no_fsid, P.FileState(7340033, 0, s.inode, s.size, s.mtime_ns)) == P.CHANGED
    for field, value in (("inode", 13), ("size", 1), ("mtime_ns", s.mtime_ns + 1)):
        now = P.FileState(**{**s.__dict__, field: value})
        assert P.status(e, now) == P.CHANGED, field


def test_digest_and_display() -> None:
    assert P.digest([b"ab", b"c"]) == P.digest([b"abc"])
    assert len(P.digest([])) == 16
    assert P.show_path(b"a b\nc\\d\xff\xc3\xa9") == "a b\\nc\\\\d\\xffé"
