#!/usr/bin/env python3
"""What the guest's clock source costs under software emulation (TCG): the test rig boots
with `tsc=reliable`, because the kernel otherwise takes the vCPUs' TSCs for unsynchronised
and reads the time from the emulated HPET. One guest, both clock sources switched in turn
through sysfs, each round timing three loops in the guest's Python: a control (no clock),
100,000 clock reads, and 30 process starts, each with the CPU QEMU spent on it, and what
QEMU spends while the guest idles for 20 s.

    .venv/bin/python benchmarks/guest_clocksource.py [--rounds 2]   (as root)

Prints one line per round and clock source; the difference between the clock loop and the
control is the cost of the reads.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from tests.vm.image import ensure_image  # noqa: E402
from tests.vm.rig import BootSpec, Guest  # noqa: E402

CURRENT = "/sys/devices/system/clocksource/clocksource0/current_clocksource"
LOOPS = {
    "control": "for i in range(100000): abs(i)",
    "100k clock reads": "import time\nfor i in range(100000): time.monotonic()",
    "30 process starts": "import subprocess\nfor i in range(30): subprocess.run(['/bin/true'])",
}


def qemu_cpu(guest: Guest) -> float:
    """Seconds of CPU QEMU has used (user and system)."""
    assert guest.qemu
    fields = Path(f"/proc/{guest.qemu.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed(guest: Guest, code: str) -> str:
    started, cpu = time.monotonic(), qemu_cpu(guest)
    guest.run(["python3", "-c", code], timeout=600, check=True)
    return f"{time.monotonic() - started:.2f} s (CPU {qemu_cpu(guest) - cpu:.2f} s)"


def idle(guest: Guest, seconds: float = 20) -> str:
    cpu = qemu_cpu(guest)
    time.sleep(seconds)
    return f"idle {seconds:g} s: CPU {qemu_cpu(guest) - cpu:.2f} s"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    image = ensure_image(log=lambda line: print(line, file=sys.stderr))
    with Guest(image, BootSpec()) as guest:  # the rig's command line: tsc=reliable
        offered = guest.get(CURRENT.replace("current", "available")).decode().split()
        for _ in range(args.rounds):
            for source in ("tsc", "hpet"):
                if source not in offered:
                    print(f"{source}: not offered ({' '.join(offered)})")
                    continue
                guest.run(["sh", "-c", f"echo {source} > {CURRENT}"], check=True)
                cells = [f"{name} {timed(guest, code)}" for name, code in LOOPS.items()]
                print(f"{source:5} " + ", ".join([*cells, idle(guest)]), flush=True)
    print(f"load {Path('/proc/loadavg').read_text().split()[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
