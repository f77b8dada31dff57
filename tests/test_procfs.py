"""procfs: the one mount-table reader (every octal escape the kernel writes, per-mount and
per-filesystem options apart), checked on text and against this machine's own table."""

from __future__ import annotations

import os

from backburner import procfs

MOUNTINFO = (
    "22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw,errors=remount-ro\n"
    "40 22 7:3 / /mnt/a\\040b\\011c\\012d\\134e ro,nosuid,nodev - ext4 /dev/loop3 rw\n"
    "41 22 0:33 / /sys/fs/cgroup/blkio rw,nosuid shared:9 - cgroup cgroup rw,blkio\n"
    "short line\n"
)


def test_parse_mountinfo_unescapes_and_splits_options() -> None:
    root, odd, cg = procfs.parse_mountinfo(MOUNTINFO)
    assert (root.mountpoint, root.fstype, root.source) == ("/", "ext4", "/dev/vda")
    assert odd.mountpoint == "/mnt/a b\tc\nd\\e"
    assert odd.options == {"ro", "nosuid", "nodev"} and odd.super_options == {"rw"}
    assert (os.major(odd.devno), os.minor(odd.devno)) == (7, 3)
    assert "blkio" in cg.all_options and "blkio" not in cg.options


def test_this_machines_table_has_its_root_and_proc() -> None:
    table = procfs.mounts()
    assert any(m.mountpoint == "/" for m in table)
    assert any(m.fstype == "proc" and m.mountpoint == "/proc" for m in table)
    assert procfs.mounts("/nonexistent/mountinfo") == []
