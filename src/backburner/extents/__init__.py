"""`extents`: a file's exact physical map, proven byte for byte, and watched for moves.

Booting or serving a disk image that lives as a file inside another filesystem, without
that filesystem's driver, means mapping the file's extents straight onto the block device
(a dm-linear table, or a loop device with an offset when it is one run). This package gets
that map right and proves it: FIEMAP through the kernel (`fiemap`), merged into runs
exactly once (`runs`, pure), with every range whose device bytes would differ from the
file's bytes refused by name (`tables`, pure), verified against the device with direct IO
(`proof.verify`), and saved with a checksum per segment so a later `proof.check` can say
whether a defragmenter moved it.

Flow: fiemap (kernel) -> btrfs.translate (btrfs only) -> runs.merge (pure) -> Layout ->
tables (pure) / stream + proof (IO: verify, save, check) -> render (pure text and JSON).

API for other modules (everything here is read-only: nothing changes system state)::

    fiemap(path_or_fd, sync=True, start=0, length=None) -> list[Extent]
        The raw FIEMAP records (logical, physical, length, flags) in file order. Physical
        offsets are the filesystem's own (btrfs: its logical address space).
    layout_of(path, sync=True) -> Layout
        .file (FileId: path, st_dev, inode, size, mtime_ns), .device (BlockDevice),
        .runs (tuple[Run]: merged, device byte offsets, clipped to the size),
        .segments ([0, size) cut into runs and holes), .totals (Totals).
    physical_runs(path, ranges=None, sync=False) -> list[Run]
        Where each (offset, length) byte range lies on the device, in the order given
        (readahead sorts files by ``runs[0].physical``; bench counts ``len(runs)``).
    runs_of(extents, size=None) -> list[Run]           (pure: runs.merge)
    select(runs, ranges) -> list[Run]                   (pure: the runs of byte ranges)
    device_of(path) -> BlockDevice
        .path (/dev node of the partition or disk), .disk (its whole disk), .start
        (partition start on the disk, bytes), .size, .logical_block_size, .fstype.
    verify(path) / save(path, output) / check(map_path)  (need root: they read the device)

Run.physical is in bytes from the start of ``device.path``; divide by 512 for sectors;
add ``device.start`` for the byte on ``device.disk``.
"""

from __future__ import annotations

from .device import BlockDevice, device_of
from .fiemap import fiemap
from .layout import FileId, Layout, layout_of, physical_runs
from .proof import CheckResult, SaveResult, VerifyResult, check, save, verify
from .runs import Extent, Run, Segment, Totals, select
from .runs import merge as runs_of

__all__ = [
    "BlockDevice", "CheckResult", "Extent", "FileId", "Layout", "Run", "SaveResult", "Segment",
    "Totals", "VerifyResult", "check", "device_of", "fiemap", "layout_of", "physical_runs",
    "runs_of", "save", "select", "verify",
]
