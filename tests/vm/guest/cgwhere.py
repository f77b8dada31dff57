"""Run by a bench in the guest as its probe or its load: appends one JSON line to a record
file saying where it runs (its group, the group's io/cpu files, the scope's controllers,
the probe group's io.latency, the root's io.cost.qos line) and, as a load, how many bytes
its own buffered writes put into its group's io.stat once `sync` has written them back.

    python3 cgwhere.py probe|load RECORD DEVNO [MIB]
"""

import json
import os
import subprocess
import sys
import time

ROOT = "/sys/fs/cgroup"
FILES = ("io.weight", "io.bfq.weight", "cpu.weight", "io.prio.class", "io.latency")


def read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def wbytes(group, devno):
    for line in (read(f"{group}/io.stat") or "").splitlines():
        if line.split(" ", 1)[0] == devno:
            fields = dict(item.split("=") for item in line.split()[1:])
            return int(fields.get("wbytes", 0))
    return 0


def main():
    role, record, devno = sys.argv[1:4]
    rel = read("/proc/self/cgroup").split("::", 1)[1]
    group = ROOT + rel
    scope = os.path.dirname(group)
    qos = [ln for ln in (read(f"{ROOT}/io.cost.qos") or "").splitlines()
           if ln.startswith(devno + " ")]
    ionice = subprocess.run(["ionice", "-p", str(os.getpid())], capture_output=True,
                            text=True).stdout.strip()
    out = {"role": role, "group": rel, "pid": os.getpid(), "ionice": ionice,
           "files": {n: read(f"{group}/{n}") for n in FILES},
           "scope_controllers": read(f"{scope}/cgroup.subtree_control"),
           "probe_latency": read(f"{scope}/probe/io.latency"),
           "qos": qos[0] if qos else None}
    if role == "load":
        mib = int(sys.argv[4])
        before = wbytes(group, devno)
        with open("written", "wb") as f:  # in the load's own directory, on the device
            for _ in range(mib):
                f.write(b"\x5a" * (1 << 20))
        os.sync()  # the flusher writes the dirty pages back, charged as cgroup v2 says
        out["wrote"] = mib << 20
        out["charged"] = wbytes(group, devno) - before
        os.unlink("written")
    with open(record, "a") as f:
        f.write(json.dumps(out) + "\n")
    if role == "load":
        while True:
            time.sleep(1)


main()
