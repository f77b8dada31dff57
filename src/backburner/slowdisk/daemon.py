"""The slowdisk FUSE daemon: mounts one image file as `fs.SlowDiskFS` and serves it until
it is unmounted or signalled.

The mount contains exactly two files::

    disk.img     the image (size = image size); every read/write goes through the model
    stats.json   live counters, read-only, a fresh JSON snapshot per open

The slowdisk device (`device`) puts a loop device (``losetup --direct-io=on``) on
``disk.img``, so the block layer (IO schedulers, queue limits, ``iostat``) sees a real
request queue with the timing of a spinning disk, a DVD or an SD card.

No page cache in between: the FUSE file is opened with ``direct_io`` (libfuse config
``direct_io``, i.e. FOPEN_DIRECT_IO), so every read reaches the daemon even for buffered
readers, and the backing image is read with O_DIRECT where it can be (`image`). No
``max_read`` option is passed: libfuse 3.14 refuses to mount with it ("init() and
fuse_session_new() requested different maximum read size") unless init() also sets
conn->max_read; it is not needed, the kernel already splits requests at max_pages (1 MiB
with libfuse 3). ``max_idle_threads`` is passed because without it libfuse 3.14 prints a
spurious "Ignoring invalid max threads value".

Why mfusepy: it is a maintained ctypes binding (pure Python: no compiler, no build
dependencies) with libfuse 3 support and the familiar fusepy high-level API. pyfuse3 needs a
compiled extension (Cython + libfuse3 headers) and trio; fusepy has been unmaintained since
2018 and only speaks libfuse 2.

Entry point::

    python -m backburner.slowdisk.daemon --profile NAME --image PATH --mountpoint DIR
                                         [--read-only] [--roundtrip-us US] [--log FILE]

The daemon always runs in the foreground: the process that starts it (backburner's
`system.Daemon`, through `spawn`) owns it, journals its PID and stops it; it never forks
itself away. On SIGTERM/SIGINT/SIGHUP libfuse leaves its loop, in-flight requests complete,
the file system is unmounted and the process exits with status 0. Errors are one line on
stderr and a sysexits-style status.
"""

from __future__ import annotations

import argparse
import ctypes
import logging
import os
import stat
import sys
from typing import Any

from ..base.errors import (
    BackburnerError,
    NotFoundError,
    SystemStateError,
    UnavailableError,
    UsageError,
)
from ..kernel import syscalls
from .drive import Profile
from .fs import SlowDiskFS
from .hostqueue import HOST_QUEUE_DEPTH
from .image import ImageFile
from .model import Disk
from .profiles import get_profile, profile_names
from .roundtrip import MAX_ROUNDTRIP_COMPENSATION_S

#: CPU priority of the daemon when it may raise it (root): -10, like other IO helpers.
DAEMON_NICE = -10


def _set_timer_slack(ns: int = 1000) -> None:
    """Tighter sleeps: threads created later (libfuse workers) inherit the timer slack."""
    try:
        syscalls.prctl(syscalls.PR_SET_TIMERSLACK, ns)
    except OSError:
        pass


def _raise_priority(nice: int = DAEMON_NICE) -> None:
    """Run the daemon (and the libfuse workers, which inherit it) at a higher CPU priority.

    An emulated disk should not slow down because the machine is busy computing; as root we
    lower our nice value. Best effort: unprivileged, this silently does nothing.
    """
    try:
        if os.getpriority(os.PRIO_PROCESS, 0) > nice:
            os.setpriority(os.PRIO_PROCESS, 0, nice)
    except OSError:
        pass


def fuse_options(read_only: bool, profile: Profile | None = None) -> dict[str, Any]:
    """Options handed to mfusepy.FUSE (besides foreground): a thread per request the
    daemon may hold (the host queue of a drive without command queueing)."""
    host_queue = profile is not None and not profile.command_queueing
    opts: dict[str, Any] = {
        "fsname": "slowdisk",
        "subtype": "slowdisk",
        "direct_io": True,  # libfuse 3: fuse_config.direct_io -> FOPEN_DIRECT_IO on every open
        "default_permissions": True,
        "max_threads": HOST_QUEUE_DEPTH + 8 if host_queue else 32,
        "max_idle_threads": 8,
    }
    if os.geteuid() == 0:
        opts["allow_other"] = True  # so a non-root `slowdisk stats` can read stats.json
    if read_only:
        opts["ro"] = True
    return opts


def _check_environment(image: str, mountpoint: str) -> None:
    if not os.path.exists("/dev/fuse"):
        raise UnavailableError("/dev/fuse does not exist", "load the fuse module: modprobe fuse")
    if not os.path.exists(image):
        raise NotFoundError(f"image {image!r} does not exist")
    st = os.lstat(image)
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISBLK(st.st_mode)):
        raise UsageError(f"image {image!r} is not a regular file")
    if not os.path.isdir(mountpoint):
        raise NotFoundError(f"mount point {mountpoint!r} is not a directory")
    if os.path.ismount(mountpoint):
        raise SystemStateError(f"{mountpoint!r} is already a mount point")


def _load_mfusepy() -> Any:
    """Import mfusepy, pointing it at libfuse 3 directly.

    Without FUSE_LIBRARY_PATH mfusepy asks ctypes.util.find_library for "fuse" then "fuse3",
    which runs gcc/ld (~0.3 s) and would pick libfuse 2 if that is installed too.
    """
    if not os.environ.get("FUSE_LIBRARY_PATH"):
        try:
            ctypes.CDLL("libfuse3.so.3")
            os.environ["FUSE_LIBRARY_PATH"] = "libfuse3.so.3"
        except OSError:
            pass
    import mfusepy

    return mfusepy


def _mount(fs: SlowDiskFS, mountpoint: str, read_only: bool) -> None:
    try:
        mfusepy = _load_mfusepy()
    except (ImportError, OSError) as e:
        raise UnavailableError(f"cannot load mfusepy/libfuse3: {e}",
                               "install the fuse3 package and mfusepy") from None
    logging.getLogger("fuse").setLevel(logging.ERROR)
    logging.getLogger("mfusepy").setLevel(logging.ERROR)
    opts = fuse_options(read_only, fs.disk.profile)
    if (mfusepy.fuse_version_major, mfusepy.fuse_version_minor) < (3, 12):
        opts.pop("max_threads")
    _set_timer_slack()
    _raise_priority()
    try:
        mfusepy.FUSE(fs, mountpoint, foreground=True, **opts)
    except RuntimeError as e:
        # fuse_main_real returns 8 when its loop ended with an error, which in libfuse 3 includes
        # the normal way out: SIGTERM/SIGINT/SIGHUP set the session error to the signal number.
        # After a successful mount that is a clean shutdown (libfuse has already unmounted).
        if fs.ready and str(e) == "8":
            return
        # Otherwise mounting failed (libfuse printed why on stderr): 1-7 in fuse_main_real.
        raise SystemStateError(
            f"FUSE mount on {mountpoint!r} failed (libfuse status {e})"
        ) from None


def serve(profile: Profile, image_path: str, mountpoint: str, *, read_only: bool = False,
          roundtrip_s: float | None = None, image_id: str | None = None) -> int:
    """Mount and serve until unmounted or signalled. Returns the exit status (0)."""
    image_path = os.path.abspath(image_path)
    mountpoint = os.path.abspath(mountpoint)
    read_only = read_only or profile.read_only_medium
    _check_environment(image_path, mountpoint)
    image = ImageFile(image_path, writable=not read_only, identity=image_id)
    if image.size <= 0:
        image.close()
        raise UsageError(f"image {image_path!r} is empty")
    disk = Disk(profile, image.size)
    fs = SlowDiskFS(disk, image, read_only=read_only, mountpoint=mountpoint,
                    roundtrip_s=roundtrip_s)
    try:
        _mount(fs, mountpoint, read_only)
    finally:
        image.close()
    return 0


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="python -m backburner.slowdisk.daemon",
        description="Serve an image file through FUSE with a seek-aware slow-disk timing model.",
    )
    p.add_argument("--profile", required=True,
                   help="timing profile: " + ", ".join(profile_names()))
    p.add_argument("--image", required=True, help="backing image file (not a symlink)")
    p.add_argument("--image-id", metavar="DEV:INO",
                   help="serve the image only if it is this file (device and inode numbers)")
    p.add_argument("--mountpoint", required=True, help="empty directory to mount on")
    p.add_argument("--read-only", action="store_true", help="refuse writes (EROFS)")
    p.add_argument("--log", metavar="FILE",
                   help="append stdout and stderr to FILE (a daemon started by backburner must "
                   "not hold its parent's terminal or pipes open)")
    p.add_argument("--roundtrip-us", type=float, default=None, metavar="US",
                   help="FUSE round trip to compensate for, in microseconds "
                   "(default: measured through the mount at start-up; 0 = none)")
    return p


def _redirect_output(path: str) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    except OSError as e:
        raise NotFoundError(f"cannot open log file {path!r}: {e.strerror}") from None
    sys.stdout.flush()
    sys.stderr.flush()
    for target in (1, 2):
        os.dup2(fd, target)
    os.close(fd)


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if args.log:
            _redirect_output(args.log)
        profile = get_profile(args.profile)
        roundtrip = None
        if args.roundtrip_us is not None:
            if not 0 <= args.roundtrip_us <= MAX_ROUNDTRIP_COMPENSATION_S * 1e6:
                raise UsageError("--roundtrip-us must be between 0 and 1000")
            roundtrip = args.roundtrip_us / 1e6
        return serve(profile, args.image, args.mountpoint, read_only=args.read_only,
                     roundtrip_s=roundtrip, image_id=args.image_id)
    except BackburnerError as e:
        print(f"slowdisk: {e}", file=sys.stderr)
        return e.exit_status


if __name__ == "__main__":
    sys.exit(main())
