"""The words of `apply`'s options that are fixed choices: the classes of disk a rule
matches (`--devices`, with their kernel names) and the network modes (`--net`), with the
service a network drop-in wants. Plain constants, apart from `diskrules` and `install`
(which read the machine and write files), so that the command line's parser offers them
without importing those (every command builds the whole parser: `backburner run` must not
pay for `apply`'s imports)."""

from ..kernel.disk_names import DISK_GLOBS, NON_ROTATIONAL, NVME, NVME_GLOB, ROTATIONAL

#: Whole disks that have a scheduler: SCSI/SATA/USB, virtio, Xen, MMC/SD, NVMe.
DEFAULT_KERNEL = "|".join(DISK_GLOBS)
#: The same without NVMe: the solid-state class's, NVMe being a class of its own.
SOLID_KERNEL = "|".join(g for g in DISK_GLOBS if g != NVME_GLOB)
#: `--devices`: the classes of disk a rule matches (KERNEL globs, queue/rotational).
DEVICE_CLASSES: dict[str, tuple[str, str | None]] = {
    ROTATIONAL: (DEFAULT_KERNEL, "1"),
    NON_ROTATIONAL: (SOLID_KERNEL, "0"),
    NVME: (NVME_GLOB, None),
    "all": (DEFAULT_KERNEL, None),
}

#: The network modes a drop-in can ask for (`--net`), as `run --net` takes them.
NET_MODES = ("background",)
#: The service that pins the programs a drop-in's BPFProgram= lines name, and paces.
NET_SERVICE = "backburner-net.service"
