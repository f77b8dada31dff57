"""btrfs: its FIEMAP offsets are addresses in its own logical space, not device bytes.

The chunk tree maps that space onto devices, chunk by chunk. `chunks` reads it with
BTRFS_IOC_TREE_SEARCH (needs CAP_SYS_ADMIN) and `translate` (pure) moves each extent to
its device offset. Only chunks that keep one plain copy per stripe on a single device
(single, DUP: either copy holds the data) can be mapped; striped and parity profiles
cannot be expressed as one device range and are refused.

Layouts (include/uapi/linux/btrfs.h, btrfs_tree.h): the search key is 104 bytes, each
result a 32-byte header then the item; a chunk item is 48 bytes then 32 per stripe
(devid, offset, uuid), little-endian on disk.
"""

from __future__ import annotations

import bisect
import errno
import fcntl
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..base.errors import DataError, UnavailableError, denied
from .runs import DELALLOC, ENCODED, INLINE, UNKNOWN, Extent

BTRFS_IOC_TREE_SEARCH = 0xD0009411  # _IOWR(0x94, 17, struct btrfs_ioctl_search_args)
CHUNK_TREE_OBJECTID = 3
FIRST_CHUNK_TREE_OBJECTID = 256
CHUNK_ITEM_KEY = 228
U64_MAX = (1 << 64) - 1
BLOCK_GROUP_DUP = 0x20
PROFILE_MASK = 0x7F8  # RAID0, RAID1, DUP, RAID10, RAID5, RAID6, RAID1C3, RAID1C4

_KEY = struct.Struct("=7Q4I4Q")  # tree, objectid/offset/transid ranges, types, nr_items
_HDR = struct.Struct("=QQQII")  # transid objectid offset type len
_CHUNK = struct.Struct("<QQQQIIIHH")  # length owner stripe_len type io_align io_width ...
_STRIPE = struct.Struct("<QQ16x")  # devid offset dev_uuid
_ARGS_SIZE = 4096
_NO_TRANSLATION = DELALLOC | UNKNOWN | INLINE  # no device place to translate


@dataclass(frozen=True)
class Chunk:
    logical: int
    length: int
    type: int
    stripes: tuple[tuple[int, int], ...]  # (devid, device offset)

    @property
    def end(self) -> int:
        return self.logical + self.length


def chunks(fd: int) -> list[Chunk]:
    """Every chunk of the filesystem holding ``fd``, in logical order."""
    out: list[Chunk] = []
    min_offset = 0
    while True:
        buf = bytearray(_ARGS_SIZE)
        _KEY.pack_into(buf, 0, CHUNK_TREE_OBJECTID, FIRST_CHUNK_TREE_OBJECTID,
                       FIRST_CHUNK_TREE_OBJECTID, min_offset, U64_MAX, 0, U64_MAX,
                       CHUNK_ITEM_KEY, CHUNK_ITEM_KEY, 4096, 0, 0, 0, 0, 0)
        try:
            fcntl.ioctl(fd, BTRFS_IOC_TREE_SEARCH, buf, True)
        except PermissionError as err:
            raise denied("translating btrfs addresses to device offsets (chunk tree "
                         "search)", err.strerror) from None
        except OSError as err:
            if err.errno in (errno.ENOTTY, errno.EOPNOTSUPP):
                raise UnavailableError("the btrfs chunk tree cannot be searched here") from None
            raise
        count = _KEY.unpack_from(buf, 0)[9]  # nr_items: how many came back
        pos = _KEY.size
        for _ in range(count):
            _transid, _objectid, offset, kind, size = _HDR.unpack_from(buf, pos)
            pos += _HDR.size
            if kind == CHUNK_ITEM_KEY:
                out.append(parse_chunk(offset, bytes(buf[pos:pos + size])))
            pos += size
            min_offset = offset + 1
        if count == 0:
            return out


def parse_chunk(logical: int, item: bytes) -> Chunk:
    length, _owner, _stripe_len, kind, _a, _w, _s, num, _sub = _CHUNK.unpack_from(item, 0)
    stripes = tuple(_STRIPE.unpack_from(item, _CHUNK.size + i * _STRIPE.size)
                    for i in range(num))
    return Chunk(logical, length, kind, stripes)


def translate(extents: Iterable[Extent], table: Sequence[Chunk]) -> list[Extent]:
    """btrfs logical addresses -> byte offsets on its (single) device. Extents that have
    no place (inline, delayed) pass unchanged; they are refused by any mapping anyway.
    An extent crossing a chunk boundary is split at it."""
    starts = [c.logical for c in table]
    out: list[Extent] = []
    for ext in extents:
        if ext.flags & _NO_TRANSLATION:
            out.append(ext)
            continue
        if ext.flags & ENCODED:  # its length is the decoded one: only the start is real
            out.append(ext._replace(physical=_device_offset(_chunk_at(table, starts, ext),
                                                            ext.physical)))
            continue
        logical, physical, left = ext.logical, ext.physical, ext.length
        while left > 0:
            chunk = _chunk_at(table, starts, Extent(logical, physical, left, ext.flags))
            piece = min(left, chunk.end - physical)
            out.append(Extent(logical, _device_offset(chunk, physical), piece, ext.flags))
            logical, physical, left = logical + piece, physical + piece, left - piece
    return out


def _chunk_at(table: Sequence[Chunk], starts: list[int], ext: Extent) -> Chunk:
    i = bisect.bisect_right(starts, ext.physical) - 1
    if i < 0 or ext.physical >= table[i].end:
        raise DataError(f"btrfs address {ext.physical} (file offset {ext.logical}) is in no "
                        "chunk", "the filesystem changed while it was mapped")
    return table[i]


def _device_offset(chunk: Chunk, address: int) -> int:
    profile = chunk.type & PROFILE_MASK
    devids = {d for d, _ in chunk.stripes}
    if (profile and profile != BLOCK_GROUP_DUP) or len(devids) != 1 or not chunk.stripes:
        raise UnavailableError(f"btrfs chunk at {chunk.logical} is striped or spread over "
                               f"devices (profile {profile:#x})",
                               "extents maps single and DUP data profiles only")
    return chunk.stripes[0][1] + address - chunk.logical
