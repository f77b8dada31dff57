"""`slowdisk`: simulated slow hardware (HDD, DVD, SD card) as a loop device."""

from __future__ import annotations

import argparse
import json

from ..base import quantities
from .common import add_command, add_format, err, recover_if_needed


def _create(args: argparse.Namespace) -> int:
    from ..slowdisk import device

    opts = device.CreateOptions(profile=args.profile, image=args.image,
                                size=quantities.parse_size(args.size) if args.size else None,
                                read_only=args.read_only, scheduler=args.scheduler)
    device.validate(opts)
    recover_if_needed()
    disk = device.create(opts)
    print(disk.device, flush=True)
    err(f"{disk.profile} slowdisk {disk.device} on {disk.image} "
        f"({quantities.human_size(disk.size_bytes)}, {'read-only' if disk.read_only else 'rw'}, "
        f"rotational {int(disk.rotational)}, scheduler {disk.scheduler}); "
        f"remove it with: backburner slowdisk remove {disk.device}")
    return 0


def _remove(args: argparse.Namespace) -> int:
    from ..slowdisk import device

    entry = device.remove(args.device)
    what = f"{entry.disk.profile} slowdisk on {entry.disk.image}" if entry.disk else "slowdisk"
    print(f"removed {entry.device} ({what})")
    return 0


def _stats(args: argparse.Namespace) -> int:
    from ..slowdisk import describe, device

    stats = device.read_stats(args.device)
    print(json.dumps(stats, indent=1, sort_keys=True) if args.format == "json"
          else describe.format_stats(stats))
    return 0


def _profiles(args: argparse.Namespace) -> int:
    from ..slowdisk import describe

    print(json.dumps(describe.profiles_json(), indent=1) if args.format == "json"
          else describe.format_profiles())
    return 0


def _list(args: argparse.Namespace) -> int:
    from ..slowdisk import device

    found = device.entries()
    for e in found:
        d = e.disk
        info = f"{d.profile:<9} {d.image}  daemon {d.daemon_pid}" if d else ""
        print(f"{e.device or '?':<12} {e.state:<22} {info}".rstrip())
    if not found:
        print("no slowdisk is set up")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("slowdisk", help="simulated slow hardware: HDD, DVD, SD card",
                       description="A loop device whose IO takes as long as on a slow device: "
                       "a FUSE daemon serves the image with a seek-aware timing model.")
    s = p.add_subparsers(dest="slowdisk_cmd", metavar="ACTION", required=True)
    c = add_command(s, "create", _create,
                    help="serve an image as a slow loop device; prints /dev/loopN")
    c.add_argument("image", help="image file (created sparse if missing and --size is given)")
    c.add_argument("--profile", required=True,
                   help="hdd-5400, hdd-7200, dvd, sdcard or flat:MS (see `slowdisk profiles`)")
    c.add_argument("--size", help="image size, e.g. 8G (a new image is made this big; an "
                   "existing one must be at least this big)")
    c.add_argument("--read-only", action="store_true",
                   help="serve the image read-only (dvd always is)")
    c.add_argument("--scheduler", default="mq-deadline",
                   help="IO scheduler of the loop device: mq-deadline, bfq, kyber, none")
    r = add_command(s, "remove", _remove,
                    help="detach the loop device, stop the daemon, unmount")
    r.add_argument("device", help="/dev/loopN as printed by create")
    st = add_command(s, "stats", _stats, help="requests, seeks and modelled busy time, live")
    st.add_argument("device", help="/dev/loopN")
    add_format(st, ("text", "json"), what="text, or the raw counters as JSON")
    pr = add_command(s, "profiles", _profiles,
                     help="the built-in profiles, their parameters and sources")
    add_format(pr, ("text", "json"), what="text or JSON")
    add_command(s, "list", _list, help="the slowdisks set up now")
