"""What the guest is, proven from inside it: systemd as PID 1 on a unified cgroup v2 tree
with the io, cpu and memory controllers, BFQ on a virtio disk, and this commit's wheel as
the installed backburner (byte for byte, not only the same version number)."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import pytest

import backburner

from .rig import Guest

pytestmark = [pytest.mark.root, pytest.mark.timeout(900)]


def test_systemd_is_pid_1_and_the_boot_finished(guest: Guest) -> None:
    assert guest.get("/proc/1/comm") == b"systemd\n"
    exe = guest.run(["readlink", "/proc/1/exe"], check=True).out.strip()
    assert exe == "/usr/lib/systemd/systemd"
    state = guest.run(["systemctl", "is-system-running"]).out.strip()
    assert state == "running", guest.run(["systemctl", "--failed"]).out


def test_unified_cgroup2_tree_with_io_cpu_memory(guest: Guest) -> None:
    fs = guest.run(["stat", "-f", "-c", "%T", "/sys/fs/cgroup"], check=True).out.strip()
    assert fs == "cgroup2fs"
    assert {"io", "cpu", "memory"} <= set(guest.get("/sys/fs/cgroup/cgroup.controllers").split(
        b"\n")[0].decode().split())
    mounts = [line.split() for line in guest.get("/proc/self/mounts").decode().splitlines()]
    assert [m[1] for m in mounts if m[2] == "cgroup"] == []  # no v1 hierarchy beside it
    # the agent itself is a systemd service: one line, the unified hierarchy's
    assert guest.get("/proc/self/cgroup") == b"0::/system.slice/backburner-vm-agent.service\n"


def test_bfq_on_a_virtio_disk(guest: Guest) -> None:
    dev = guest.run(["readlink", "-f", "/dev/disk/by-id/virtio-scratch"], check=True).out.strip()
    block = f"/sys/block/{dev.removeprefix('/dev/')}"
    driver = guest.run(["readlink", "-f", f"{block}/device/driver"], check=True).out.strip()
    assert driver.endswith("/virtio_blk")
    sched = f"{block}/queue/scheduler"
    before = guest.get(sched).decode().split("[")[1].split("]")[0]
    guest.run(["modprobe", "bfq"], check=True)
    try:
        guest.run(["sh", "-c", f"echo bfq > {sched}"], check=True)
        assert "[bfq]" in guest.get(sched).decode()
    finally:
        guest.run(["sh", "-c", f"echo {before} > {sched}"], check=True)


# The installed package's files, as (path, sha256) pairs, in the guest
INSTALLED = """\
import backburner, hashlib, json, pathlib
pkg = pathlib.Path(backburner.__file__).parent
print(json.dumps({"where": str(pkg), "files": {
    str(p.relative_to(pkg.parent)): hashlib.sha256(p.read_bytes()).hexdigest()
    for p in pkg.rglob("*") if p.is_file() and "__pycache__" not in p.parts}}))
"""


def test_the_guest_runs_this_commits_wheel(guest: Guest, vm_wheel: Path) -> None:
    r = guest.run(["backburner", "--version"], check=True)
    assert r.out == f"backburner {backburner.__version__}\n"
    with zipfile.ZipFile(vm_wheel) as whl:
        wheel_files = {n: hashlib.sha256(whl.read(n)).hexdigest() for n in whl.namelist()
                       if n.startswith("backburner/") and not n.endswith("/")}
    installed = json.loads(guest.run(["python3", "-c", INSTALLED], check=True).out)
    assert installed["where"] == "/usr/local/lib/python3.11/dist-packages/backburner"
    assert installed["files"] == wheel_files
