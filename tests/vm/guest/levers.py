"""Run in the guest: the levers model on a disk switched through each scheduler it offers,
then under `none` with io.cost on; prints JSON {scheduler: [io_class, weight, writeback]}
and the groups. Puts the scheduler and io.cost back.

    levers.py DISKNAME
"""

import json
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

from backburner.kernel import block, cgroups, levers


def main() -> None:
    name = sys.argv[1]
    for module in ("bfq", "kyber-iosched", "mq-deadline"):  # modules: loaded on demand
        subprocess.run(["modprobe", module], check=False)
    queue = Path("/sys/block", name, "queue", "scheduler")
    before = block.in_force(name)
    root = cgroups.unified_root()
    groups = levers.read_groups(["io"])  # what systemd turns on for a unit's IOWeight=
    out = {}
    try:
        for sched in block.offered(name):
            queue.write_text(sched)
            e = levers.effect(name, groups, cgroup2=root)
            out[sched] = [e.io_class, e.weight, e.writeback]
        queue.write_text("none")
        devno = block.devno_text(name)
        Path(root, "io.cost.qos").write_text(f"{devno} enable=1")
        try:
            e = levers.effect(name, groups, cgroup2=root)
            out["none+iocost"] = [e.io_class, e.weight, e.writeback]
        finally:
            Path(root, "io.cost.qos").write_text(f"{devno} enable=0")
    finally:
        queue.write_text(before or "none")
    print(json.dumps({"levers": out, "groups": asdict(groups)}))


main()
