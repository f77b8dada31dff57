"""Runs in the VM guest for benchmarks/flat_delay.py (standard library only): each image
(attached read-only as /dev/disk/by-id/virtio-NAME) behind a dm-delay target that holds
every read for a fixed time, mounted read-only at /mnt/bb; each workload timed from a cold
page cache, with the reads that reached the delayed device. One JSON object per line.

    python3 flat_delay_guest.py SPEC.json
SPEC: {"delays": {"name": ms}, "images": [...], "workloads": {"name": argv}, "trials": n}
"""

import json
import os
import subprocess
import sys
import time

MNT = "/mnt/bb"
NAME = "bbflat"


def sh(*argv: str, **kw) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True, **kw).stdout


def reads_completed(dm: str) -> int:
    with open(f"/sys/block/{dm}/stat") as f:
        return int(f.read().split()[0])


def measure(argv: list[str], dm: str) -> dict:
    sh("sync")
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")
    before = reads_completed(dm)
    t0 = time.monotonic()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seconds = time.monotonic() - t0
    return {"seconds": round(seconds, 3), "reads": reads_completed(dm) - before,
            "status": done.returncode, "err": done.stderr[-300:]}


def main() -> None:
    spec = json.load(open(sys.argv[1]))
    os.makedirs(MNT, exist_ok=True)
    for delay, ms in spec["delays"].items():
        for image in spec["images"]:
            dev = f"/dev/disk/by-id/virtio-{image}"
            sectors = sh("blockdev", "--getsz", dev).strip()
            sh("dmsetup", "create", NAME, "--readonly",
               input=f"0 {sectors} delay {dev} 0 {ms}\n")
            try:
                dm = os.path.basename(os.path.realpath(f"/dev/mapper/{NAME}"))
                sh("mount", "-t", "ext4", "-o", "ro,noload", f"/dev/mapper/{NAME}", MNT)
                try:
                    for name, argv in spec["workloads"].items():
                        for trial in range(spec["trials"]):
                            row = {"delay": delay, "ms": ms, "image": image,
                                   "workload": name, "trial": trial, **measure(argv, dm)}
                            print(json.dumps(row), flush=True)
                finally:
                    sh("umount", MNT)
            finally:
                sh("dmsetup", "remove", NAME)


main()
