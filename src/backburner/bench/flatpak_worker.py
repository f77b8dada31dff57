"""The flatpak-api load's worker: one long-lived process that installs an app bundle and
uninstalls it again, round after round, through libflatpak's transactions (GObject
introspection), as GNOME Software and KDE Discover do: one process holding the
installation, no new `flatpak` per operation.

It runs on the system's Python 3, where Debian packages PyGObject and the Flatpak typelib
(python3-gi, gir1.2-flatpak-1.0); backburner's virtual environment has neither. So it imports
nothing of backburner and is told everything on its command line. After each install it
appends "FILES BYTES" to --progress (how the bench counts the bulk work); a failed install or
uninstall ends it with the error on stderr and exit status 1.
"""

from __future__ import annotations

import argparse
import os
import sys


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="flatpak_worker")
    p.add_argument("--installation", required=True, help="a flatpak installation's directory")
    p.add_argument("--bundle", required=True, help="the app's .flatpak bundle")
    p.add_argument("--ref", required=True, help="the app's ref, app/ID/ARCH/BRANCH")
    p.add_argument("--progress", required=True)
    p.add_argument("--files", type=int, required=True)
    p.add_argument("--bytes", type=int, required=True)
    args = p.parse_args(argv)

    import gi

    gi.require_version("Flatpak", "1.0")
    from gi.repository import Flatpak, Gio, GLib

    installation = Flatpak.Installation.new_for_path(
        Gio.File.new_for_path(args.installation), False, None)
    bundle = Gio.File.new_for_path(args.bundle)
    progress = os.open(args.progress, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW)

    def transaction() -> Flatpak.Transaction:
        tx = Flatpak.Transaction.new_for_installation(installation, None)
        tx.set_no_interaction(True)
        return tx

    try:
        while True:
            tx = transaction()
            tx.add_install_bundle(bundle, None)
            tx.run(None)
            os.write(progress, f"{args.files} {args.bytes}\n".encode())
            tx = transaction()
            tx.add_uninstall(args.ref)
            tx.run(None)
    except GLib.Error as err:
        print(f"flatpak-api: {err.message}", file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
