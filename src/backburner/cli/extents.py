"""`extents`: a file's physical map (show, map, verify, save, check).

Results that are not errors have exit statuses of their own, like cmp(1) and diff(1):
verify and save exit 1 on a mismatch; check exits 1 when the file moved and 2 when its
content changed. Errors keep the one-line message and the statuses of errors.py.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from ..base import quantities
from .common import add_command, add_force, add_format, err

if TYPE_CHECKING:
    from ..extents.device import BlockDevice

DESCRIPTION = """\
A file's exact physical map, proven byte for byte and watched for moves.

Offsets are on the filesystem's block device (the partition, whose start on the disk is
shown), in bytes and 512-byte sectors. Exit statuses: verify/save 1 = the device's bytes
differ from the file's; check 1 = moved (or the device bytes at the map differ), 2 = the
file's content changed; errors as for every command (65 = refused or bad map file,
66 = missing, 69 = no FIEMAP here, 77 = needs root).
"""

BAR_FROM = 64 << 20  # a progress bar for reads larger than this, on a terminal


@contextmanager
def _progress(label: str) -> Iterator[Callable[[int, int], None] | None]:
    """A rich progress bar on stderr when it is a terminal; nothing otherwise."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    bar = Progress(BarColumn(), DownloadColumn(binary_units=True), TransferSpeedColumn(),
                   TimeRemainingColumn(), console=Console(stderr=True), transient=True,
                   auto_refresh=False)
    task = None
    last = 0.0

    def report(done: int, total: int) -> None:
        nonlocal task, last
        if total < BAR_FROM:
            return
        if task is None:
            bar.start()
            task = bar.add_task(label, total=total)
        now = time.monotonic()
        if now - last > 0.1 or done == total:
            bar.update(task, completed=done, refresh=True)
            last = now

    try:
        yield report
    finally:
        bar.stop()


def _show(args: argparse.Namespace) -> int:
    from ..extents import layout_of, render

    lay = layout_of(args.file)
    if args.format == "json":
        json.dump(render.show_json(lay), sys.stdout, indent=1)
        print()
    else:
        sys.stdout.write(render.show_text(lay))
    return 0


def _map(args: argparse.Namespace) -> int:
    from ..extents import layout_of, render, tables

    if args.saved:
        return _map_saved(args)
    lay = layout_of(args.file)
    if args.loop_args:
        la = tables.loop_args(lay.runs, lay.file.size, lay.device.path,
                              allow_shared=args.allow_shared)
        print(" ".join(la.argv()))
        err(f"losetup --find --show --read-only {' '.join(la.argv())}  # {lay.file.path}")
        return 0
    targets = tables.dm_targets(lay.runs, lay.file.size, zero_unwritten=args.zero_unwritten,
                                allow_shared=args.allow_shared)
    sys.stdout.write("".join(t.line(lay.device.path) + "\n" for t in targets))
    err(f"{lay.file.path}: {tables.describe_targets(targets)} on {render.device_line(lay)}")
    if lay.totals.shared_bytes:
        err(f"{quantities.human_size(lay.totals.shared_bytes)} of it is shared with other files: "
            "use the mapping read-only")
    err(_load_hint(lay.device))
    return 0


def _map_saved(args: argparse.Namespace) -> int:
    """The table of a map kept by `save`, once it is proven to hold (extents/saved.py)."""
    from ..base.errors import UsageError
    from ..extents import saved, tables

    if args.loop_args:
        raise UsageError("--saved gives a device-mapper table", "use --dm-table with --saved")
    with _progress("prove") as bar:
        proven = saved.prove(args.file, progress=bar)
    targets = tables.dm_targets(list(proven.runs), proven.saved.size,
                                zero_unwritten=args.zero_unwritten,
                                allow_shared=args.allow_shared)
    sys.stdout.write("".join(t.line(proven.saved.device.path) + "\n" for t in targets))
    err(f"{proven.saved.path}: {tables.describe_targets(targets)} on "
        f"{proven.saved.device.path}; {proven.how}")
    err(_load_hint(proven.device))
    return 0


def _load_hint(device: BlockDevice) -> str:
    """How to load the table, said only after asking whether the kernel would take it now."""
    from ..extents.device import claim_of

    claim = claim_of(device)
    load = "dmsetup create NAME --readonly < TABLE"
    if claim.free:
        return f"load it with: {load} ({claim.why})"
    if claim.free is None:
        return f"load it with: {load}, where nothing claims {device.path} ({claim.why})"
    return (f"not loadable now: {claim.why}. Load it where the filesystem is not mounted "
            "(from an initramfs or a rescue system where the same device node names the "
            "device), from a map kept with `extents save`: `extents map --dm-table --saved "
            f"MAP` proves it still holds, then {load}")


def _verify(args: argparse.Namespace) -> int:
    from ..extents import render, verify

    with _progress("verify") as bar:
        res = verify(args.file, include_unwritten=args.include_unwritten, progress=bar)
    print(render.verify_text(res))
    return res.status


def _save(args: argparse.Namespace) -> int:
    from ..extents import render, save

    with _progress("save") as bar:
        res = save(args.file, args.output, force=args.force, progress=bar)
    print(render.save_text(res))
    return res.status


def _check(args: argparse.Namespace) -> int:
    from ..extents import check, render

    with _progress("check") as bar:
        res = check(args.map, quick=args.quick, progress=bar)
    print(render.check_text(res))
    return res.status


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("extents", help="a file's physical map: show, map, verify, save, check",
                       description=DESCRIPTION,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    s = p.add_subparsers(dest="extents_cmd", metavar="ACTION", required=True)
    sh = add_command(s, "show", _show,
                     help="merged physical runs, flags, holes, totals, fragmentation")
    sh.add_argument("file")
    add_format(sh, ("text", "json"), what="text, or JSON (docs/reference/extents-map.md)")
    m = add_command(s, "map", _map, help="a dm-linear table, or losetup arguments")
    m.add_argument("file", help="the file, or with --saved a map file written by save")
    m.add_argument("--saved", action="store_true",
                   help="FILE is a map kept by save: prove it still holds (against the file, "
                   "or the device's bytes where the file is not mounted), then its table")
    how = m.add_mutually_exclusive_group(required=True)
    how.add_argument("--dm-table", action="store_true", help="a device-mapper table")
    how.add_argument("--loop-args", action="store_true",
                     help="losetup --offset/--sizelimit, when the file is one run")
    m.add_argument("--zero-unwritten", action="store_true",
                   help="map holes and unwritten space to dm zero targets (they read as zeros; "
                   "writes to them are lost)")
    m.add_argument("--allow-shared", action="store_true",
                   help="map reflinked (shared) space too: use the mapping read-only")
    v = add_command(s, "verify", _verify,
                    help="read every mapped range from the device, compare with the file")
    v.add_argument("file")
    v.add_argument("--include-unwritten", action="store_true",
                   help="compare unwritten space too (shows what a map treating it as data "
                   "would serve)")
    sv = add_command(s, "save", _save, help="prove the map and keep it, with checksums")
    sv.add_argument("file")
    sv.add_argument("-o", "--output", required=True,
                    help="the map file to write (an existing one only with --force)")
    add_force(sv, "an existing map file")
    c = add_command(s, "check", _check,
                    help="exit 0 if the file is still exactly where the map says")
    c.add_argument("map", help="a map file written by save")
    c.add_argument("--quick", action="store_true",
                   help="compare FIEMAP and the file's identity only, read no data")
