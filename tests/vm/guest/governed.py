"""What the kernel says about the guest's test processes, as JSON: for every process
named on the command line, its group, IO class and CPU policy; the weights of the groups
the check looks at; and the runtime drop-ins systemd holds (run by test_guest_govern)."""

import ctypes
import json
import os
import sys

libc = ctypes.CDLL(None, use_errno=True)
CLASSES = {0: "none", 1: "realtime", 2: "best-effort", 3: "idle"}


def ioclass(pid: int) -> str:
    value = libc.syscall(252, 1, pid)  # ioprio_get(IOPRIO_WHO_PROCESS, pid), x86_64
    return CLASSES.get(value >> 13, str(value)) if value >= 0 else "gone"


def group(pid: int) -> str:
    with open(f"/proc/{pid}/cgroup") as f:
        return f.read().strip().split("::", 1)[1]


def comm(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def weights(path: str) -> dict:
    out = {}
    for name in ("io.weight", "cpu.weight"):
        try:
            with open(f"/sys/fs/cgroup{path}/{name}") as f:
                out[name] = f.read().strip()
        except OSError:
            out[name] = None
    return out


names = sys.argv[1:]
procs = []
for pid in (p for p in os.listdir("/proc") if p.isdigit()):
    name = comm(pid)
    if name in names:
        try:
            procs.append({"pid": int(pid), "comm": name, "group": group(int(pid)),
                          "io": ioclass(int(pid)),
                          "cpu": os.sched_getscheduler(int(pid))})
        except OSError:
            pass
# runtime drop-ins: of unit files' units, and of transient units
dropins = sorted(os.path.join(d, f)
                 for top in ("/run/systemd/system.control", "/run/systemd/transient")
                 for d, _, fs in os.walk(top) if d.endswith(".d") for f in fs)
print(json.dumps({"procs": procs, "dropins": dropins,
                  "weights": {g: weights(g) for g in {p["group"] for p in procs}
                              | {"/backburner.slice",
                                 "/system.slice/bbtest-updater.service"}}}))
