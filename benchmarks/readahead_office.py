#!/usr/bin/env python3
"""A desktop application's cold start from simulated slow media, where the start reads
only parts of its large files: the ordinary image against `layout build-ext4` with large
hot files whole (``--whole-files``) and split into the ranges the start read.

The application is this machine's LibreOffice (Debian's 7.4, ``/usr/lib/libreoffice``),
copied to the image with its symlinks resolved (the registry under /etc, the icon themes
under /usr/share) and its ``fundamentalrc`` pointed at its own directory
(``BRAND_BASE_DIR=${ORIGIN}/..``), so everything it reads of its own comes from the image;
system libraries (libc, libstdc++, fontconfig) come from the host's disk, as Python's
interpreter does in benchmarks/readahead_slowdisk.py. No chroot: a chroot would need a
whole system on the image, and LibreOffice finds its installation from its own path.

The start: ``soffice.bin --headless --norestore --convert-to pdf`` of a one-line text
file, with a user profile on the host made by one start beforehand: Writer's import,
the PDF export and the UNO bootstrap, reading parts of ``libmergedlo.so`` (66 MiB),
``libswlo.so`` (18 MiB) and the other large libraries. (``--terminate_after_init`` exits
after the bootstrap and reads little.)

Read-ahead is 128 KiB on every device here, the recording's too (``record
--read-ahead-kb 128``, not the default 16): a split layout keeps out of the hot region
what the pack does not name, so the pack must name what a start on the slow medium
reads, read-ahead included.

Usage (root): .venv/bin/python benchmarks/readahead_office.py [--profiles dvd,hdd-5400]
              [--trials N] [--hot-region start|end] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from readahead_slowdisk import ordinary_image, tree_bytes  # noqa: E402
from slowstart import (  # noqa: E402
    ATTEMPTS,
    INTERFERENCE,
    Built,
    Figures,
    Workload,
    fast_bed,
    note_reclaim,
    predict,
    scratch,
    slow_part,
)

from backburner import system
from backburner.base import interrupts
from backburner.base.quantities import MiB, fmt_s, human_size
from backburner.readahead import ext4image, layout, record  # noqa: E402
from backburner.readahead.pack import Pack  # noqa: E402

LIBREOFFICE = "/usr/lib/libreoffice"
READ_AHEAD_KB = 128
#: The layout images: name, build-ext4's whole-files choice.
LAYOUTS = (("layout", True), ("layout-split", False))


def build_tree(src: Path) -> None:
    shutil.copytree(LIBREOFFICE, src / "lo", symlinks=False, ignore_dangling_symlinks=True)
    rc = src / "lo/program/fundamentalrc"
    text = rc.read_text()
    text = re.sub(r"(?m)^BRAND_BASE_DIR=.*$", "BRAND_BASE_DIR=${ORIGIN}/..", text)
    text = text.replace("file:///etc/libreoffice/registry", "${BRAND_BASE_DIR}/share/registry")
    rc.write_text(text)


def workloads(mnt: str, work: str) -> list[Workload]:
    doc = os.path.join(work, "tiny.txt")
    if not os.path.exists(doc):
        Path(doc).write_text("A line of text.\n")
    return [Workload("office", [f"{mnt}/lo/program/soffice.bin", "--headless", "--norestore",
                                "--convert-to", "pdf", "--outdir", os.path.join(work, "out"),
                                doc, f"-env:UserInstallation=file://{work}/profile"])]


def set_read_ahead(tx: system.Transaction, device: str) -> None:
    tx.apply(system.SysfsValue(f"/sys/block/{os.path.basename(device)}/queue/read_ahead_kb",
                               str(READ_AHEAD_KB)))


def record_all(b: Built, kind: str, work: str) -> None:
    with system.Transaction("bench-office") as tx:
        bed = fast_bed(tx, b.images[kind], b.mnt)
        set_read_ahead(tx, bed.device)
        for w in workloads(b.mnt, work):
            key = f"{kind}-{w.name}"
            b.paths[key] = os.path.join(work, f"{key}.pack")
            with bed.fresh():
                res, outcome = record.record_command(w.argv, record.RecordOptions(
                    b.paths[key], mounts=(b.mnt,), read_ahead_kb=None, drop_caches=True))
            assert outcome.ok, outcome.describe()
            b.packs[key] = res.pack


def warm_profile(b: Built, work: str) -> None:
    """Starts until one converts: the first makes the user profile (on the host) and exits
    with 81, LibreOffice's "restart me" (the `soffice` script restarts it); every measured
    start then finds the profile."""
    with system.Transaction("bench-office") as tx:
        bed = fast_bed(tx, b.images["ordinary"], b.mnt)
        with bed.fresh():
            for w in workloads(b.mnt, work):
                for _ in range(3):
                    if subprocess.run(w.argv, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, cwd="/").returncode == 0:
                        break
                else:
                    raise SystemExit(f"{w.shown()} failed three times")


def describe_pack(out: Figures, pack: Pack, top: int = 6) -> None:
    """The pack's largest files: how much of each the start read."""
    rows = sorted(((e.state.size, e.bytes, e.path) for e in pack.entries if not e.device),
                  reverse=True)[:top]
    out.add("  - largest files: " + "; ".join(
        f"{os.path.basename(p).decode(errors='replace')} {human_size(got)} of "
        f"{human_size(size)}" for size, got, p in rows))


def build(work: str, out: Figures, region: str) -> Built:
    src = Path(work, "tree")
    build_tree(src)
    size = -(-int(tree_bytes(src) * 1.12 + 24 * MiB) // (4 * MiB)) * 4 * MiB
    mnt = os.path.join(work, "mnt")
    os.mkdir(mnt)
    b = Built({"ordinary": os.path.join(work, "ordinary.img")}, {}, {}, size, mnt)
    ordinary_image(src, b.images["ordinary"], size)
    out.add(f"# LibreOffice's start from slow media ({time.strftime('%Y-%m-%d')}, kernel "
            f"{os.uname().release})\n")
    out.add(f"tree: {human_size(tree_bytes(src))} ({LIBREOFFICE}, symlinks resolved); "
            f"images: {human_size(size)} ext4 each; read-ahead {READ_AHEAD_KB} KiB")
    for w in workloads(mnt, work):
        out.add(f"- workload `{w.name}`: `{w.shown()}` (MNT = the image's mount point)")
    warm_profile(b, work)
    record_all(b, "ordinary", work)
    pack = b.packs["ordinary-office"]
    out.add(f"- pack on the ordinary image: {len(pack.entries)} files, "
            f"{human_size(pack.bytes)} read")
    describe_pack(out, pack)
    for kind, whole in LAYOUTS:
        b.images[kind] = os.path.join(work, f"{kind}.img")
        built = ext4image.build_ext4(pack, ext4image.BuildOptions(
            str(src), b.images[kind], size, root=mnt, hot_region=region, used_ranges=not whole))
        b.region_at[kind] = built.region_at or 0
        flags = " --whole-files" if whole else ""
        out.add(f"- {kind} image: `backburner layout build-ext4 --pack ordinary-office.pack "
                f"--root MNT --size {size >> 20}M --hot-region {region}{flags} TREE "
                f"{kind}.img` ({built.hot_files} hot files, {human_size(built.hot_bytes)} in "
                f"the hot region; {built.split_files} split, {human_size(built.split_out)} "
                f"unread left out; {fmt_s(built.seconds)} s)")
        if built.after is not None:
            out.add(f"  - `layout check`: {layout.describe_check(built.after)}")
        record_all(b, kind, work)
    predict(out, b)
    return b


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profiles", default="dvd")
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--hot-region", choices=("start", "end"), default="start")
    ap.add_argument("--keep", help="keep the tree and images in this new directory")
    args = ap.parse_args()
    system.require_root("this benchmark (loop devices, mounts, slowdisk, fanotify)")
    if not os.path.exists(f"{LIBREOFFICE}/program/soffice.bin"):
        ap.error(f"no LibreOffice in {LIBREOFFICE} (apt-get install libreoffice-writer)")
    interrupts.install()
    t0 = time.monotonic()
    with scratch("bb-office-bench-", args.keep) as work:
        out = Figures()
        b = build(work, out, args.hot_region)
        note_reclaim(out)
        for profile in [p for p in args.profiles.split(",") if p]:
            slow_part(out, profile, b, workloads(b.mnt, work), args.trials,
                      device_setup=set_read_ahead)
        out.add(f"\nmeasurements taken again because another program dropped the page cache "
                f"during them: {INTERFERENCE.retried}; kept although disturbed (after "
                f"{ATTEMPTS} attempts): {INTERFERENCE.tainted}")
        out.add(f"(benchmark ran {fmt_s(time.monotonic() - t0)} s)")
        return 0

if __name__ == "__main__":
    sys.exit(main())
