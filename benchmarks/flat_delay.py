#!/usr/bin/env python3
"""The original method beside ours: the same two images (ordinary, and laid out by
`layout build-ext4` with the hot files first) and the same cold starts, on a flat read
delay and on slowdisk's seek-aware drive.

A flat delay (dm-delay: every read held for the same time, as the original DVD work did
with 125 ms) charges a read the same wherever it lands, so it cannot see layout except
through the number of reads; a real drive charges mostly for the head's travel, which a
layout removes. So:

* **flat delay, in the VM guest** (its stock kernel has dm-delay; this host has no
  device-mapper): each image attached read-only to a guest of the rig (tests/vm), behind
  `delay` targets of 125 ms (`dvd`, the original's figure) and 17 ms (`hdd-5400`: its
  average seek plus half a turn), and of 0 ms (the emulated machine's own time: the guest
  runs under software emulation, so every figure there includes it; compare within a row);
* **slowdisk, on this host**: the same images on `slowdisk` with the `dvd` and `hdd-5400`
  profiles.

Workloads and images are those of benchmarks/readahead_slowdisk.py (its `build`): Python
importing ~340 modules from the image, and `cat` of 300 small files of a data directory.
Every start from a cold page cache, medians of --trials; the reads that reached the device
are counted (the guest's dm device; slowdisk's own statistics on the host are in
readahead_slowdisk.py).

Usage (root): .venv/bin/python benchmarks/flat_delay.py [--trials 3] [--keep DIR]
Takes about 20 minutes (most of it the guest: the 125 ms reads, and emulation).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

import readahead_slowdisk as rs  # noqa: E402

from backburner import system  # noqa: E402
from backburner.base import interrupts  # noqa: E402
from backburner.base.quantities import fmt_factor, fmt_s  # noqa: E402

FLAT_MS = {"none": 0, "dvd": 125, "hdd-5400": 17}
GUEST_MNT = "/mnt/bb"  # flat_delay_guest.MNT


def guest_workloads(host: list[rs.Workload], mnt: str) -> dict[str, list[str]]:
    """The workloads with the guest's mount point (the data list's names inlined)."""
    out = {}
    for w in host:
        if w.name == "data":
            listfile = w.argv[-1].split("< ")[1].split(" >")[0]
            names = [os.path.basename(p) for p in Path(listfile).read_text().split("\0") if p]
            out[w.name] = ["sh", "-c", f"cd {GUEST_MNT}/data && cat {' '.join(names)} "
                           "> /dev/null"]
        else:
            out[w.name] = [a.replace(mnt, GUEST_MNT) for a in w.argv]
    return out


def flat_in_guest(images: dict[str, str], workloads: dict[str, list[str]], trials: int,
                  work: str) -> list[dict]:
    from vm.image import ensure_image
    from vm.rig import BootSpec, Guest

    spec = BootSpec(images={name: Path(path) for name, path in images.items()})
    rows: list[dict] = []
    with Guest(ensure_image(log=print), spec) as g:
        g.put("/root/flat_delay_guest.py", (HERE / "flat_delay_guest.py").read_text())
        for delay, ms in FLAT_MS.items():
            job = {"delays": {delay: ms}, "images": list(images), "workloads": workloads,
                   "trials": trials}
            g.put("/root/flat.json", json.dumps(job))
            r = g.run(["python3", "/root/flat_delay_guest.py", "/root/flat.json"],
                      timeout=3600, check=True)
            for line in r.out.splitlines():
                row = json.loads(line)
                print(f"guest {row['delay']} {row['image']} {row['workload']} #{row['trial']}: "
                      f"{row['seconds']} s, {row['reads']} reads, status {row['status']}",
                      flush=True)
                rows.append(row)
    Path(work, "guest.json").write_text(json.dumps(rows))
    return rows


def slowdisk_on_host(b: rs.Built, work: str, trials: int) -> list[dict]:
    rows = []
    for profile in ("dvd", "hdd-5400"):
        for kind in ("ordinary", "layout"):
            with system.Transaction("bench-flat-delay") as tx:
                bed = rs.slow_bed(tx, b.images[kind], b.mnt, profile)
                for w in rs.workloads(b.mnt, work):
                    for t in rs.trials(trials, rs.clean(lambda w=w, bed=bed: rs.cold(w, bed))):
                        rows.append({"delay": profile, "image": kind, "workload": w.name,
                                     "seconds": t})
                        print(f"host slowdisk {profile} {kind} {w.name}: {fmt_s(t)} s",
                              flush=True)
    return rows


def table(guest: list[dict], host: list[dict]) -> list[str]:
    def med(rows: list[dict], **key: str) -> float:
        xs = [r["seconds"] for r in rows if all(r[k] == v for k, v in key.items())]
        return statistics.median(xs)

    def reads(**key: str) -> int:
        xs = [r["reads"] for r in guest if all(r[k] == v for k, v in key.items())]
        return round(statistics.median(xs))

    out = ["| workload | medium | model | ordinary | layout | ordinary / layout "
           "| reads ordinary / layout |", "|---|---|---|--:|--:|--:|--:|"]
    for w in ("python", "data"):
        for medium in ("dvd", "hdd-5400"):
            o, lay = med(guest, delay=medium, image="ordinary", workload=w), \
                med(guest, delay=medium, image="layout", workload=w)
            floor_o = med(guest, delay="none", image="ordinary", workload=w)
            floor_l = med(guest, delay="none", image="layout", workload=w)
            out.append(f"| {w} | {medium} | flat {FLAT_MS[medium]} ms per read (guest; "
                       f"{fmt_s(floor_o)} / {fmt_s(floor_l)} s with 0 ms) | {fmt_s(o)} s "
                       f"| {fmt_s(lay)} s | {fmt_factor(o / lay)}× | "
                       f"{reads(delay=medium, image='ordinary', workload=w)} / "
                       f"{reads(delay=medium, image='layout', workload=w)} |")
            so, sl = med(host, delay=medium, image="ordinary", workload=w), \
                med(host, delay=medium, image="layout", workload=w)
            out.append(f"| {w} | {medium} | slowdisk `{medium}` (host) | {fmt_s(so)} s | "
                       f"{fmt_s(sl)} s | {fmt_factor(so / sl)}× | |")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--keep", help="keep the tree, images and rows in this new directory")
    args = ap.parse_args()
    system.require_root("this benchmark (loop devices, mounts, slowdisk, QEMU)")
    interrupts.install()
    t0 = time.monotonic()
    with rs.scratch("bb-flat-delay-", args.keep, "/var/tmp") as work:
        b = rs.build(work, rs.Figures())
        host = slowdisk_on_host(b, work, args.trials)
        guest = flat_in_guest(b.images, guest_workloads(rs.workloads(b.mnt, work), b.mnt),
                              args.trials, work)
        print(f"\n## Flat delay vs slowdisk ({time.strftime('%Y-%m-%d')}), medians of "
              f"{args.trials}\n")
        for line in table(guest, host):
            print(line)
        print(f"\n(benchmark ran {fmt_s(time.monotonic() - t0)} s)")
        return 0


if __name__ == "__main__":
    sys.exit(main())
