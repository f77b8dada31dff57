"""Run in the guest by tests/vm/test_guest_netv1.py (as root, this commit's wheel
installed, systemd 252 as PID 1 booted on cgroup v1 alone: no cgroup2 mount at all).
`backburner run --net background --net-uplink 1mbit` on the testbed's client interface
(`1mbit:40ms`, netem): the job runs in its systemd scope and in the run's net_cls group,
its ACKs go through the paced class and its upload's data through the upload class, its
status is mirrored; after it the interface's classes, the net_cls groups and the journal
are as before. Prints one JSON object.

python3 netv1.py
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import netbg  # beside this script in the guest

from backburner import system
from backburner.kernel import procfs
from backburner.net import link, netcls, policy, testbed

JOURNAL = "/var/lib/backburner/journal"

def packets(bed: testbed.Testbed, classid: str) -> int:
    return next((c["packets"] for c in system.tc_classes(bed.client_ns, bed.client_dev)
                 if c["handle"] == classid), 0)


def ours() -> list[str]:
    """The net_cls groups of backburner's, wherever the hierarchy is mounted."""
    root = netcls.mounted()
    return sorted(p.name for p in Path(root).glob("backburner-*")) if root else []


def main() -> dict[str, object]:
    out: dict[str, object] = {
        "cgroup_fs": sorted({m.fstype for m in procfs.mounts() if "cgroup" in m.fstype}),
        "net_cls_at": netcls.mounted(), "pid1": Path("/proc/1/cgroup").read_text()}
    bb = shutil.which("backburner")
    assert bb is not None
    doctor = subprocess.run([bb, "doctor"], capture_output=True, text=True, timeout=60)
    out["doctor"] = [ln for ln in doctor.stdout.splitlines() if "network policy" in ln]
    t0 = time.monotonic()
    with system.Transaction("guest-netv1") as tx:
        bed = testbed.build(tx, link.parse("1mbit:40ms"))
        testbed.start_server(bed)
        before = (system.tc_classes(bed.client_ns, bed.client_dev), ours())
        Path("/root/netv1-job.py").write_text(netbg.RUN_JOB)
        proc = subprocess.Popen([bb, "run", "-v", "--net", "background", "--net-dev",
                                 bed.client_dev, "--netns", bed.client_ns, "--net-uplink",
                                 "1mbit", "--", sys.executable, "/root/netv1-job.py",
                                 testbed.SERVER_ADDR, str(testbed.PORT)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # the most each class has counted: the run takes them away one by one at its end
        seen: dict[str, object] = {"ack_packets": 0, "upload_packets": 0, "groups": []}
        while proc.poll() is None:
            if len(system.tc_classes(bed.client_ns, bed.client_dev)) > 2:
                seen["ack_packets"] = max(seen["ack_packets"], packets(bed, policy.BULK_CLASS))
                seen["upload_packets"] = max(seen["upload_packets"],
                                             packets(bed, policy.UPLOAD_CLASS))
                seen["groups"] = ours() or seen["groups"]
            time.sleep(0.3)
        job, err = proc.communicate()
        Path("/root/netv1-job.py").unlink()
        out |= {"seen": seen, "status": proc.returncode, "job": job, "stderr": err,
                "same_after": (system.tc_classes(bed.client_ns, bed.client_dev),
                               ours()) == before}
    out["journal"] = os.listdir(JOURNAL) if os.path.isdir(JOURNAL) else []
    out["seconds"] = round(time.monotonic() - t0, 1)
    return out


if __name__ == "__main__":
    print(json.dumps(main()), flush=True)
