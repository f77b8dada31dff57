#!/usr/bin/env python3
"""What a guest costs the host with one vCPU or two, under software emulation (TCG) on a
host as busy as the test suite keeps it: N busy loops run beside each guest. For each
variant, in turn: a boot to a finished boot (the rig's command line, no wheel), then a
serial piece of work (process starts), then a parallel one (two writers with fsync), each
with its wall time and the CPU QEMU spent on it.

    .venv/bin/python benchmarks/guest_vcpus.py [--rounds 2] [--busy 2]   (as root)

One line per round and variant; the variants alternate in order from round to round. The
rig's default follows the cheaper (tests/vm/rig.py BootSpec.cpus).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from tests.vm.image import ensure_image  # noqa: E402
from tests.vm.proc import dies_with_us  # noqa: E402
from tests.vm.rig import BootSpec, Guest  # noqa: E402

WORK = {
    "20 python3 starts": "for i in $(seq 20); do python3 -c pass; done",
    "2 writers of 64 MiB": ("for i in 1 2; do dd if=/dev/zero of=/var/tmp/w$i bs=1M count=64 "
                            "conv=fsync status=none & done; wait; rm -f /var/tmp/w1 /var/tmp/w2"),
}


def qemu_cpu(guest: Guest) -> float:
    """Seconds of CPU QEMU has used (user and system)."""
    assert guest.qemu
    fields = Path(f"/proc/{guest.qemu.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one(image: object, cpus: int) -> str:
    started = time.monotonic()
    with Guest(image, BootSpec(cpus=cpus)) as guest:  # type: ignore[arg-type]
        cells = [f"boot {time.monotonic() - started:.1f} s (CPU {qemu_cpu(guest):.1f} s)"]
        for name, script in WORK.items():
            began, cpu = time.monotonic(), qemu_cpu(guest)
            guest.run(["sh", "-c", script], timeout=900, check=True)
            cells.append(f"{name} {time.monotonic() - began:.1f} s "
                         f"(CPU {qemu_cpu(guest) - cpu:.1f} s)")
    return f"-smp {cpus}: " + ", ".join(cells)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--busy", type=int, default=2, help="busy loops beside each guest")
    args = parser.parse_args()
    image = ensure_image(log=lambda line: print(line, file=sys.stderr))
    busy = [subprocess.Popen([sys.executable, "-I", "-c", "while True: pass"], cwd="/",
                             preexec_fn=dies_with_us())
            for _ in range(args.busy)]
    try:
        for r in range(args.rounds):
            for cpus in ((2, 1) if r % 2 == 0 else (1, 2)):
                print(f"round {r + 1} {one(image, cpus)}", flush=True)
    finally:
        for p in busy:
            p.kill()
            p.wait()
    print(f"busy loops beside: {args.busy}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
