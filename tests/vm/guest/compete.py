"""Run in the guest: two direct-IO readers of one disk (under BFQ), each in a transient scope
of its own, for SECONDS; prints as JSON the bytes each read (io.stat of its scope's group).

    compete.py DISK SECONDS BULK_SLICE BULK_IONICE_CLASS|- BULK_SLICE_IOWEIGHT|-

The "desktop" reader is in user.slice at the default class; the "bulk" one in BULK_SLICE,
in IO class BULK_IONICE_CLASS (ionice -c) if given. A BULK_SLICE_IOWEIGHT makes the slice a
transient one with that IOWeight= (held by a sleeping service while it runs).
"""

import json
import os
import subprocess
import sys
import time

DESK, BULK, HOLDER = "bb-desk.scope", "bb-bulk.scope", "bb-slice-holder.service"


def reader(unit: str, slc: str, disk: str, offset_mb: int, ionice: str) -> subprocess.Popen:
    cmd = ["systemd-run", "--scope", "--quiet", f"--unit={unit}", f"--slice={slc}",
           "-p", "IOAccounting=yes", "--"]
    if ionice != "-":
        cmd += ["ionice", "-c", ionice]
    loop = (f"while :; do dd if={disk} of=/dev/null bs=1M skip={offset_mb} count=512 "
            "iflag=direct status=none; done")
    return subprocess.Popen([*cmd, "sh", "-c", loop])


def rbytes(unit: str) -> int:
    group = subprocess.run(["systemctl", "show", "-P", "ControlGroup", unit],
                           capture_output=True, text=True, check=True).stdout.strip()
    assert group, f"{unit} has no group"
    text = open(f"/sys/fs/cgroup{group}/io.stat").read()
    return sum(int(f.split("=")[1]) for line in text.splitlines()
               for f in line.split()[1:] if f.startswith("rbytes="))


def main() -> None:
    disk, seconds, slc, ionice, weight = sys.argv[1:6]
    name = os.path.basename(os.path.realpath(disk))
    with open(f"/sys/block/{name}/queue/scheduler", "w") as f:
        f.write("bfq")
    for unit in (DESK, BULK, HOLDER):
        subprocess.run(["systemctl", "stop", unit], capture_output=True)
    if weight != "-":
        subprocess.run(["systemctl", "stop", slc], capture_output=True)
        subprocess.run(["systemd-run", "--quiet", f"--slice={slc}", f"--unit={HOLDER}",
                        "-p", f"IOWeight={weight}", "sleep", "3600"], check=True)
        subprocess.run(["systemctl", "set-property", "--runtime", slc, f"IOWeight={weight}"],
                       check=True)
    procs = [reader(DESK, "user.slice", disk, 0, "-"), reader(BULK, slc, disk, 1024, ionice)]
    try:
        time.sleep(4)  # both running, past BFQ's weight raising of a new queue
        before = {u: rbytes(u) for u in (DESK, BULK)}
        time.sleep(float(seconds))
        after = {u: rbytes(u) for u in (DESK, BULK)}
    finally:
        for p in procs:
            p.kill()
        subprocess.run(["systemctl", "stop", DESK, BULK, HOLDER], capture_output=True)
        if weight != "-":  # a slice of its own: gone, with its runtime weight
            subprocess.run(["systemctl", "stop", slc], capture_output=True)
            subprocess.run(["systemctl", "revert", slc], capture_output=True)
    print(json.dumps({"desktop": after[DESK] - before[DESK], "bulk": after[BULK] - before[BULK]}))


main()
