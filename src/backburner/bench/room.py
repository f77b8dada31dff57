"""Whether a bench run's files fit: the loads' and the probe's bytes against a testbed's or a
slow disk's filesystem, and the image against the free space that holds it.

Checked at plan time (the loads only) and again by the executor once the probe's files are
laid out, so a run too big for its device stops with one line before fio finds "No space
left on device"; apart from `config` because both the plan and the executor ask it.
"""

from __future__ import annotations

import math
import os

from ..base.errors import UsageError
from ..base.quantities import human_size
from .devices import DeviceSpec

#: The share of a testbed's size its filesystem leaves for files (ext4's metadata, journal
#: and reserved blocks take the rest).
USABLE_FRACTION = 0.90


def fitting_size(need: int) -> str:
    """The smallest whole-GiB testbed size whose filesystem holds ``need`` bytes of files
    (the shortfall added to what this size holds, at run time)."""
    return f"{math.ceil(need / USABLE_FRACTION / (1 << 30))}G"


def check_room(spec: DeviceSpec, load_bytes: int, probe_bytes: int | None = None,
               free: int | None = None) -> None:
    """Refuse a testbed or slow disk too small for the loads' files and the probe's: fio
    would fail with "No space left on device" after the testbed was built. At plan time
    the probe's files are not found yet (a probe may need a few KiB or gigabytes: only the
    loads are checked); once they are laid out, the executor checks again with their bytes
    and the filesystem's real free space."""
    if spec.kind == "path" or not load_bytes:
        return
    probe_bytes = 0 if probe_bytes is None else probe_bytes
    room = int(spec.size * USABLE_FRACTION) if free is None else free
    need = load_bytes + (probe_bytes if free is None else 0)
    if need > room:
        where = (f"has {human_size(room)} for files" if free is None else
                 f"has {human_size(room)} left beside the probe's {human_size(probe_bytes)}")
        raise UsageError(
            f"the loads' files need {human_size(load_bytes)} but {spec.label} {where}",
            f"use a larger device, e.g. {spec.label.rpartition(':')[0]}:"
            f"{fitting_size(need - room + int(spec.size * USABLE_FRACTION))}, "
            "or fewer fio jobs")


def check_probe_room(spec: DeviceSpec, layout: str, need: int, free: int) -> None:
    """Refuse a testbed too small for the probe's files as `--probe-layout` lays them out
    (`directories` and `aged` copy whole directories: /usr/bin and the library directory
    alone can be a gigabyte), before any is copied."""
    if need > free:
        raise UsageError(
            f"the probe's files laid out as {layout!r} need about {human_size(need)} but "
            f"{spec.label} has {human_size(free)} for files",
            f"use a larger device, e.g. {spec.label.rpartition(':')[0]}:"
            f"{fitting_size(need - free + int(spec.size * USABLE_FRACTION))}, "
            "or --probe-layout touched")


def check_space(spec: DeviceSpec, where: str) -> None:
    """Refuse a testbed image bigger than the free space of the filesystem that holds it."""
    if spec.kind == "path":
        return
    st = os.statvfs(where)
    free = st.f_bavail * st.f_frsize
    if spec.size > free:
        raise UsageError(f"a {human_size(spec.size)} testbed does not fit in {where}: "
                         f"{human_size(free)} free", "give a smaller size, e.g. testbed:4G")
