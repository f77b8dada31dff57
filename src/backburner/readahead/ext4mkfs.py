"""The e2fsprogs steps of `layout build-ext4`: the first pass's ``mke2fs -d`` (sized for the
final filesystem's inode count, grown until the hot files fit), growing it to its full
size with the journal added last, and the final ``e2fsck -fn``.

Apart from `ext4image` (what goes where, and the second pass through a mount) because
these are the tools' own rules: their options, what mke2fs says when a pass is too small,
and how the inodes per group follow from the final size.
"""

from __future__ import annotations

import logging
import os

from ..base.errors import UsageError
from ..base.quantities import MiB, human_size
from .e2tools import BLOCK, GROUP_BYTES, complaint, must, tool

log = logging.getLogger(__name__)

INODE_RATIO = 16384  # mke2fs.conf [defaults] inode_ratio: what -T default gives
MAX_INODES_PER_GROUP = 8 * BLOCK


def inodes_per_group(final: int, items: int) -> int:
    groups = -(-final // GROUP_BYTES)
    ipg = max(GROUP_BYTES // INODE_RATIO, -(-int(items * 1.2) // groups))
    ipg = -(-ipg // 16) * 16  # whole inode-table blocks (16 inodes of 256 bytes)
    if ipg > MAX_INODES_PER_GROUP:
        raise UsageError(f"{items} files do not fit in an ext4 of this size",
                         "give a larger --size")
    return ipg


#: What mke2fs -d says when the hot files do not fit the first pass: then it is grown.
_NO_ROOM = ("could not allocate", "no free space", "no space left", "not enough space",
            "too many inodes", "inode table too big")


def mkfs_first_pass(image: str, stage_root: bytes, size: int, ipg: int, final: int) -> int:
    """mke2fs -d HOT into the image, growing the first pass until the hot files fit.

    packed_meta_blocks keeps the bitmaps and the inode table in one block at the start
    (else small hot files fill the holes flex_bg leaves between them, away from the rest);
    resize= reserves descriptor blocks for the final size, so growing moves nothing. Any
    other complaint of mke2fs is the error, in its own words (one line, not its usage)."""
    while True:
        groups = -(-size // GROUP_BYTES)
        os.truncate(image, size)
        res = tool(["mke2fs", "-q", "-F", "-t", "ext4", "-T", "default", "-b", str(BLOCK),
                    "-O", "^has_journal", "-N", str(ipg * groups),
                    "-E", f"nodiscard,packed_meta_blocks=1,resize={final // BLOCK}",
                    "-d", os.fsdecode(stage_root), image, f"{size // 1024}k"], "mke2fs")
        if res.status == 0:
            return size
        why = complaint(res.stderr or res.stdout, "mke2fs")
        log.debug("mke2fs at %d bytes: %s", size, res.stderr.strip())
        os.truncate(image, 0)
        grown = -(-int(size * 1.5) // MiB) * MiB
        if not any(word in why.lower() for word in _NO_ROOM):
            must(res, "mke2fs -d (the hot files' first pass)")
        if size >= final:
            raise UsageError(f"the hot files do not fit in --size {human_size(final)}: "
                             f"mke2fs -d said: {why}", "give a larger --size")
        size = min(grown, final)


def grow(image: str, final: int) -> None:
    os.truncate(image, final)
    must(tool(["resize2fs", image, f"{final // 1024}k"], "resize2fs"), "resize2fs")
    must(tool(["tune2fs", "-O", "has_journal", image], "tune2fs"), "adding the journal",
         tool_name="tune2fs")


def fsck(image: str) -> None:
    must(tool(["e2fsck", "-f", "-n", image], "e2fsck"), "e2fsck -fn of the new image")
