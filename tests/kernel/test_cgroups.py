"""kernel.cgroups: where the hierarchies are mounted (on fake mount tables and on this
host), a process's group, a group's controllers and members, and the per-device io lines."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from backburner.kernel import cgroups

#: A hybrid machine's mount table: v1 controllers, a named v1 hierarchy, a cgroup2 mount.
MOUNTINFO = """\
22 1 0:5 / /proc rw,nosuid shared:1 - proc proc rw
31 1 0:26 / /sys/fs/cgroup ro,nosuid shared:9 - tmpfs tmpfs ro,mode=755
36 31 0:33 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:12 - cgroup cgroup rw,cpu,cpuacct
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime shared:13 - cgroup cgroup rw,freezer
38 31 0:35 / /sys/fs/cgroup/blkio rw,relatime shared:14 - cgroup cgroup rw,blkio
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime shared:15 - cgroup cgroup rw,xattr,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime shared:16 - cgroup2 cgroup2 rw
"""


def test_where_each_hierarchy_is_mounted(tmp_path: Path) -> None:
    info = tmp_path / "mountinfo"
    info.write_text(MOUNTINFO)
    assert cgroups.unified_root(str(info)) == "/sys/fs/cgroup/unified"
    assert cgroups.v1_mount("blkio", str(info)) == "/sys/fs/cgroup/blkio"
    assert cgroups.v1_mount("cpu", str(info)) == "/sys/fs/cgroup/cpu,cpuacct"
    assert cgroups.v1_mount("io", str(info)) is None  # only v2 has io
    assert cgroups.v1_controllers(str(info)) == ("blkio", "cpu", "cpuacct", "freezer",
                                                 "xattr")
    info.write_text(MOUNTINFO.splitlines(keepends=True)[0])
    assert cgroups.unified_root(str(info)) is None and cgroups.v1_controllers(str(info)) == ()


def test_a_process_group_on_this_host() -> None:
    """Our own group: the unified hierarchy's line of /proc/self/cgroup under its mount."""
    root = cgroups.unified_root()
    assert root is not None, "the test machines mount cgroup2"
    line = next(ln for ln in Path("/proc/self/cgroup").read_text().splitlines()
                if ln.startswith("0::"))
    mine = os.path.join(root, line[3:].lstrip("/")).rstrip("/") or root
    assert cgroups.unified_dir(os.getpid()) == cgroups.group_of(os.getpid(), root) == mine
    assert cgroups.dir_of(os.getpid(), mine) == mine
    mount = cgroups.mount_of(mine)
    assert mount is not None and mount[:2] == (root, 2)
    assert cgroups.mount_of("/nowhere") is None


def test_a_groups_files_on_a_fake_tree(tmp_path: Path) -> None:
    (tmp_path / "cgroup.controllers").write_text("cpu io memory\n")
    (tmp_path / "cgroup.subtree_control").write_text("io\n")
    (tmp_path / "cgroup.procs").write_text("1\n20\n")
    for name, ctrls in (("a", "memory"), ("b", "io memory")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "cgroup.controllers").write_text(ctrls + "\n")
        (tmp_path / name / "cgroup.procs").write_text("300\n")
    assert cgroups.controllers(tmp_path) == {"cpu", "io", "memory"}
    assert cgroups.subtree_control(tmp_path) == {"io"}
    assert cgroups.child_with(tmp_path, "io") == tmp_path / "b"
    assert cgroups.child_with(tmp_path, "cpu") is None
    assert cgroups.pids(str(tmp_path)) == [1, 20]
    assert cgroups.pids_below(str(tmp_path)) == [1, 20, 300]
    assert cgroups.procs_file(str(tmp_path)) == str(tmp_path / "cgroup.procs")
    gone = tmp_path / "gone"
    assert cgroups.pids(str(gone)) == [] and cgroups.controllers(gone) == set()


@pytest.mark.root
def test_a_member_of_a_real_group_is_listed(cgroup2_group: Path) -> None:
    child = subprocess.Popen(["sleep", "30"])
    try:
        Path(cgroups.procs_file(str(cgroup2_group))).write_text(str(child.pid))
        assert cgroups.pids(str(cgroup2_group)) == [child.pid]
        assert cgroups.pids_below(str(cgroup2_group.parent)).count(child.pid) == 1
        assert cgroups.unified_dir(child.pid) == str(cgroup2_group)
    finally:
        child.kill()
        child.wait()


def test_device_lines() -> None:
    assert cgroups.latency_line("8:16", 10_000) == "8:16 target=10000"
    assert cgroups.latency_line("8:16", None) == "8:16 target=max"
    assert cgroups.qos_line("254:0", True) == "254:0 enable=1"
    text = "8:0 enable=0 ctrl=auto\n8:16 enable=1 ctrl=user rpct=95.00\n"
    assert cgroups.device_line(text, "8:16") == "8:16 enable=1 ctrl=user rpct=95.00"
    assert cgroups.device_line(text, "8:1") is None


def test_io_stat_of_one_device(tmp_path: Path) -> None:
    (tmp_path / "io.stat").write_text("254:0 rbytes=4096 wbytes=25165824 rios=1 wios=24 "
                                      "dbytes=0 dios=0\n7:0 rbytes=1\n")
    assert cgroups.io_stat(str(tmp_path), "254:0")["wbytes"] == 25165824
    assert cgroups.io_stat(str(tmp_path), "8:0") == {}
    assert cgroups.io_stat(str(tmp_path / "gone"), "254:0") == {}


