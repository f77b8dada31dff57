"""Does the idle IO class protect the desktop across systemd slices (BFQ schedules groups
by weight before it looks at classes inside one)? A shortened run of
benchmarks/slice_shares.py, whose figures docs/guide/systemd.md reports: a reader in user.slice
against a bulk reader elsewhere, shares from io.stat (meaningful under emulation)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .rig import Guest

pytestmark = [pytest.mark.root, pytest.mark.timeout(900)]

DISK = "/dev/disk/by-id/virtio-scratch"  # the shared guest's spare disk
SCRIPT = Path(__file__).parent / "guest" / "compete.py"


def _share(guest: Guest, slc: str, io: str, weight: str) -> float:
    r = guest.run(["python3", "/root/compete.py", DISK, "8", slc, io, weight], timeout=180,
                  check=True)
    got = json.loads(r.out.strip().splitlines()[-1])
    assert got["desktop"] > 0 and got["bulk"] > 0, got  # both really read
    return got["desktop"] / (got["desktop"] + got["bulk"])


def test_the_idle_class_protects_the_desktop_across_slices(guest: Guest) -> None:
    guest.put("/root/compete.py", SCRIPT.read_text())
    # the readers' two regions (0 and 1024 MiB, 512 MiB each) written, so that their reads
    # reach QEMU's file rather than unallocated clusters; zeros, since generating random
    # bytes under emulation cost more CPU than the check itself (QEMU does not look for
    # zeros in what a guest writes unless told to)
    for skip in (0, 1024):
        guest.run(["dd", "if=/dev/zero", f"of={DISK}", "bs=1M", f"seek={skip}", "count=512",
                   "oflag=direct", "status=none"], timeout=600, check=True)
    unprotected = _share(guest, "system.slice", "-", "-")
    idle = _share(guest, "system.slice", "3", "-")
    both = _share(guest, "bbtest-bulk.slice", "3", "10")
    assert 0.40 < unprotected < 0.60, unprotected  # two slices of equal weight: halves
    # Full runs give 0.86 and 0.87 (docs/guide/systemd.md); short windows on an emulated guest
    # whose host is busy have given 0.74: the check asks for a clear protection only.
    assert idle > 0.65, idle  # idle-class work in system.slice yields to user.slice
    assert both > 0.65, both
