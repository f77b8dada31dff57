"""scripts/vm: the guest checks' rig by hand (docs/design/vm.md).

  scripts/vm build [--rebuild]   build the image, or check the cached one; say where it is
  scripts/vm shell [--no-wheel]  boot a guest with its console here: a root shell
                                 (Ctrl-A X quits QEMU; the guest's disk is thrown away)
  scripts/vm run [--no-wheel] -- CMD...
                                 boot a guest, run CMD in it through the agent, show its
                                 output and exit with its status
  scripts/vm clean               remove every cached image and left-over run directory
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from .image import CACHE, ensure_image, image_key, remove_tree
from .rig import BootSpec, Guest, remove_stale_runs

ROOT = Path(__file__).parents[2]


def _wheel(out: Path) -> Path:
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "--no-build-isolation", "-w", str(out), str(ROOT)], check=True, cwd=out)
    (wheel,) = out.glob("backburner-*.whl")
    return wheel


def _log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="scripts/vm", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build")
    build.add_argument("--rebuild", action="store_true", help="throw the cached image away first")
    for name in ("shell", "run"):
        p = sub.add_parser(name)
        p.add_argument("--no-wheel", action="store_true",
                       help="do not install this worktree's wheel in the guest")
        if name == "run":
            p.add_argument("cmd", nargs="+")
    sub.add_parser("clean")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        _log("scripts/vm: needs root (the image is built with debootstrap, cached as root's)")
        return 77

    if args.command == "clean":
        for stale in remove_stale_runs():
            _log(f"removed {stale}")
        for entry in CACHE.iterdir() if CACHE.exists() else ():
            if entry.name not in ("run", ".lock"):
                remove_tree(entry)
                _log(f"removed {entry}")
        return 0
    if args.command == "build" and args.rebuild:
        remove_tree(CACHE / image_key())
    image = ensure_image(log=_log)
    if args.command == "build":
        print(image.path)
        return 0
    tmp = Path(tempfile.mkdtemp(prefix="backburner-vm-wheel-"))
    try:
        spec = BootSpec(wheel=None if args.no_wheel else _wheel(tmp))
        if args.command == "shell":
            _log("booting; the console follows (Ctrl-A X quits QEMU)")
            return Guest(image, spec).shell()
        with Guest(image, spec) as guest:
            _log(f"booted in {guest.boot_seconds:.1f} s")
            result = guest.run(args.cmd, timeout=3600)
        sys.stdout.buffer.write(result.stdout)
        sys.stderr.buffer.write(result.stderr)
        return result.status if result.status >= 0 else 128 - result.status
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
