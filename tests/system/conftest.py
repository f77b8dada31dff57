"""Fixtures of the `system` tests: a loop device's queue put back after the test, and a
cgroup v1 cpu group removed after it.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import TIMEOUT

from backburner import system


@pytest.fixture
def loop_queue(tmp_path: Path) -> Iterator[Path]:
    """/sys/block/loopN/queue of a loop device over a small sparse file, detached after."""
    image = tmp_path / "disk.img"
    with open(image, "wb") as f:
        f.truncate(32 << 20)
    dev = subprocess.run(["losetup", "--find", "--show", str(image)], capture_output=True,
                         text=True, timeout=TIMEOUT, check=True).stdout.strip()
    queue = Path("/sys/block", os.path.basename(dev), "queue")
    before = {name: system.selected((queue / name).read_text())
              for name in ("scheduler", "rotational")}
    if before["scheduler"] == "bfq":  # a loop device keeps its queue from its last user
        (queue / "scheduler").write_text("none")
    try:
        yield queue
    finally:
        for name, value in before.items():  # the queue outlives the attachment
            if system.selected((queue / name).read_text()) != value:
                (queue / name).write_text(value)
        subprocess.run(["losetup", "-d", dev], timeout=TIMEOUT, check=True)


def _cpu_mount() -> Path:
    for line in Path("/proc/self/mounts").read_text().splitlines():
        _, mnt, fstype, opts = line.split()[:4]
        if fstype == "cgroup" and "cpu" in opts.split(","):
            return Path(mnt)
    raise AssertionError("no cgroup v1 cpu hierarchy")


@pytest.fixture
def test_cgroup() -> Iterator[Path]:
    path = _cpu_mount() / f"bb-test-{uuid.uuid4().hex[:8]}"
    try:
        yield path
    finally:
        if path.exists():
            path.rmdir()
