"""The names of disks a udev rule can match: the classes of disk (by `queue/rotational`,
and NVMe apart) and the kernel names of whole disks. Plain constants, apart from `block`
(which reads sysfs, and says which class a disk is), so that the command line's parser
offers them (`apply --devices`) without importing what reads the machine."""

#: The classes of disk a rule can match (udev: ATTR{queue/rotational}, KERNEL=="nvme*").
ROTATIONAL, NON_ROTATIONAL, NVME = "rotational", "non-rotational", "nvme"
DISK_CLASSES = (ROTATIONAL, NON_ROTATIONAL, NVME)
#: The kernel names of NVMe namespaces (nvme0n1; nvme0c0n1 is a multipath path, hidden).
NVME_GLOB = "nvme*"
#: The kernel names of whole disks with a scheduler of their own, as udev rules match
#: them: SCSI/SATA/USB, virtio, Xen, MMC/SD, NVMe (not loop, dm-, md: not hardware).
DISK_GLOBS = ("sd*", "vd*", "xvd*", "mmcblk*", NVME_GLOB)
