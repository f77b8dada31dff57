#!/usr/bin/env python3
"""Does the idle IO class still protect the desktop across systemd slices, and what does a
low-weight slice add? Measured in the VM guest of the test rig (systemd 252, cgroup v2 io
controller, BFQ): a "desktop" reader in user.slice against a "bulk" reader elsewhere, both
reading the same virtio disk with direct IO, each in a transient scope; the shares come from
the scopes' io.stat. Shares are meaningful under software emulation, absolute rates are not.

    .venv/bin/python benchmarks/slice_shares.py [--seconds 15] [--reps 2]   (as root)

Prints one line per run and a table of median desktop shares.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from tests.vm.image import ensure_image  # noqa: E402
from tests.vm.rig import BootSpec, Guest  # noqa: E402

DISK = "/dev/disk/by-id/virtio-scratch"
#: (label, bulk's slice, bulk's IO class for ionice -c or "-", the slice's IOWeight or "-")
CONDITIONS = [
    ("unprotected: bulk in system.slice", "system.slice", "-", "-"),
    ("idle class, bulk in system.slice", "system.slice", "3", "-"),
    ("IOWeight=10 slice, default class", "bbtest-bulk.slice", "-", "10"),
    ("IOWeight=10 slice and idle class", "bbtest-bulk.slice", "3", "10"),
]


def measure(guest: Guest, seconds: float, cond: tuple[str, str, str, str]) -> float:
    _, slc, io, weight = cond
    r = guest.run(["python3", "/root/compete.py", DISK, str(seconds), slc, io, weight],
                  timeout=seconds + 120, check=True)
    got = json.loads(r.out.strip().splitlines()[-1])
    return got["desktop"] / max(1, got["desktop"] + got["bulk"])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=15.0)
    p.add_argument("--reps", type=int, default=2)
    args = p.parse_args()
    script = (ROOT / "tests" / "vm" / "guest" / "compete.py").read_text()
    guest = Guest(ensure_image(log=print), BootSpec(files={"/root/compete.py": script},
                                                    disks={"scratch": "4G"})).start()
    try:
        guest.run(["dd", "if=/dev/urandom", f"of={DISK}", "bs=1M", "count=2048",
                   "oflag=direct", "status=none"], timeout=900, check=True)
        shares: dict[str, list[float]] = {c[0]: [] for c in CONDITIONS}
        for rep in range(args.reps):
            for cond in CONDITIONS:
                share = measure(guest, args.seconds, cond)
                shares[cond[0]].append(share)
                print(f"{cond[0]} [{rep}]: desktop share {share:.1%}", flush=True)
    finally:
        guest.close()
    print("\n| bulk work | desktop's share of the disk (median) | runs |\n| --- | --: | --- |")
    for label, got in shares.items():
        print(f"| {label} | {statistics.median(got):.0%} | "
              + ", ".join(f"{s:.0%}" for s in got) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
