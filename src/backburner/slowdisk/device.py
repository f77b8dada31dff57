"""slowdisk devices: the FUSE daemon serving an image, with a loop device on top.

Layers, top to bottom::

    /dev/loopN          queue: rotational as the profile says, an IO scheduler set explicitly
      | direct IO on    (no page cache between the loop device and the daemon)
    FUSE disk.img       <state dir>/work/slowdisk-<random>/fuse/disk.img (a private 0700
      |                 directory), served with the profile's timing by
      |                 `python -m backburner.slowdisk.daemon`
    the image           a (sparse) file of the user's

Everything is set up through one `system.Transaction`: work dir, daemon log, FUSE mount
point, a `FuseMount` entry (so undo unmounts even after the daemon was SIGKILLed), the daemon
(`system.Daemon`, a child started through `spawn`), the loop device, then its queue settings.
Undo runs in reverse: queue settings, loop detach, daemon stop, FUSE unmount, directories, so
the loop device is gone before the daemon stops (otherwise it would return EIO).

`create` hands the transaction over to the daemon (`Transaction.hand_over`), with a JSON note
naming the loop device, profile, image and mount point: the slowdisk outlives the CLI,
`remove` undoes that journal on request, and `backburner restore` undoes it once the daemon
has died. `serve_blank` does the same inside a caller's transaction (no hand-over) for a new
sparse image: the bench builds its ext4 testbed on the loop device it returns.

Default IO scheduler: mq-deadline, what the kernel picks for a real single-queue disk (a SATA
hard disk, an SD card reader), so a slowdisk is scheduled like the device it stands for.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import signal
import stat
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .. import spawn, system
from ..base.errors import (
    ExistsError,
    NotFoundError,
    SystemStateError,
    UnavailableError,
    UnsafePathError,
    UsageError,
)
from ..base.quantities import human_size
from ..files import safepath
from ..kernel import block, procfs
from .drive import Profile
from .profiles import get_profile

log = logging.getLogger(__name__)

LABEL = "slowdisk"  # the journal label of `slowdisk create`
DEFAULT_SCHEDULER = "mq-deadline"
SERVED_NAME = "disk.img"
STATS_NAME = "stats.json"
REQUESTS_NAME = "requests.log"
DAEMON_READY_TIMEOUT = 20.0
MIN_SIZE = 1 << 20
#: Test hook: SIGKILL ourselves at this point of `create` ("daemon", "loop" or "handover").
CRASH_ENV = "BACKBURNER_SLOWDISK_CRASH_AT"


@dataclass(frozen=True)
class CreateOptions:
    profile: str
    image: str
    size: int | None = None  # bytes; needed when the image does not exist yet
    read_only: bool = False
    scheduler: str = DEFAULT_SCHEDULER


@dataclass(frozen=True)
class SlowDisk:
    """A slowdisk that is set up: what the journal note records."""

    device: str  # /dev/loopN
    profile: str
    image: str
    size_bytes: int
    read_only: bool
    workdir: str
    mountpoint: str  # the FUSE mount serving disk.img and stats.json
    daemon_pid: int
    rotational: bool
    scheduler: str = ""  # "" when someone else (the bench) sets it

    @property
    def stats_path(self) -> str:
        return os.path.join(self.mountpoint, STATS_NAME)

    @property
    def requests_path(self) -> str:
        return os.path.join(self.mountpoint, REQUESTS_NAME)

    def note(self) -> str:
        return json.dumps({"slowdisk": 1, **asdict(self)}, sort_keys=True)

    @classmethod
    def from_note(cls, note: str) -> SlowDisk | None:
        try:
            data = json.loads(note)
        except (json.JSONDecodeError, TypeError):
            return None
        if not isinstance(data, dict) or data.pop("slowdisk", None) != 1:
            return None
        try:
            return cls(**data)
        except TypeError:
            return None


# --- input checks -------------------------------------------------------------------------


def _check_fuse() -> None:
    if not os.path.exists("/dev/fuse"):
        raise UnavailableError("/dev/fuse does not exist", "load the fuse module: modprobe fuse")


def prepare_image(path: str, size: int | None, read_only: bool, profile: Profile
                  ) -> tuple[str, bool]:
    """Check (or create, sparse) the image. Returns (absolute path, created by us).

    Never through a symlink (a user's link in /tmp to a file of root's would be served
    read-write by root): the path is checked without following it, opened with O_NOFOLLOW,
    and the daemon checks that what it opens is this very file (`image_identity`)."""
    image = os.path.abspath(path)
    if size is not None and size < MIN_SIZE:
        raise UsageError(f"size {size} bytes is too small", "give at least 1M")
    try:
        st = os.lstat(image)
    except FileNotFoundError:
        st = None
    if st is not None and stat.S_ISLNK(st.st_mode):
        raise UnsafePathError(f"image {path!r} is a symbolic link",
                              "give the path of the image itself")
    if st is None:
        if profile.read_only_medium:
            raise NotFoundError(
                f"image {path!r} does not exist; a {profile.name} slowdisk serves an existing "
                "image (the medium is read-only, so an empty one would be useless)",
                "make one first, e.g. with genisoimage or dd")
        if read_only:
            raise NotFoundError(f"image {path!r} does not exist; a read-only slowdisk serves "
                                "an existing image", "drop --read-only to create an empty one")
        if size is None:
            raise UsageError(f"image {path!r} does not exist", "give --size to create it")
        if not os.path.isdir(os.path.dirname(image)):
            raise NotFoundError(f"directory {os.path.dirname(image)!r} does not exist")
        try:
            fd = safepath.create_new(image)
        except OSError as e:
            raise SystemStateError(f"cannot create image {path!r}: {e.strerror}") from None
        try:
            os.ftruncate(fd, size)  # sparse: no blocks are allocated
        except OSError as e:
            os.close(fd)
            os.unlink(image)
            raise SystemStateError(f"cannot size image {path!r}: {e.strerror}") from None
        os.close(fd)
        return image, True
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISBLK(st.st_mode)):
        raise UsageError(f"image {path!r} is not a regular file")
    if st.st_size < 512:
        raise UsageError(f"image {path!r} is empty (smaller than one 512-byte sector)",
                         "delete it and give --size to create a new one")
    if size is not None and st.st_size < size:
        raise UsageError(
            f"image {path!r} is {human_size(st.st_size)} ({st.st_size} bytes), smaller than "
            f"the {human_size(size)} asked for with --size",
            "give a smaller --size, or grow the image with truncate -s")
    if not (read_only or profile.read_only_medium):
        try:
            os.close(os.open(image, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC))
        except OSError as e:
            raise UsageError(f"image {path!r} cannot be opened for writing: {e.strerror}",
                             "pass --read-only to serve it read-only") from None
    for disk in _slowdisks():
        if disk.image == image:
            raise ExistsError(f"image {path!r} is already served by slowdisk {disk.device}",
                              f"backburner slowdisk remove {disk.device}")
    return image, False


def image_identity(image: str) -> str:
    """'DEV:INO' of the image at this path (not followed), for the daemon to check that it
    serves the file that was checked."""
    st = os.lstat(image)
    return f"{st.st_dev}:{st.st_ino}"


# --- setting up -----------------------------------------------------------------------------


def _crash_point(stage: str) -> None:
    if os.environ.get(CRASH_ENV) == stage:
        signal.raise_signal(signal.SIGKILL)


def _new_workdir(prefix: str, tx: system.Transaction) -> str:
    """A private (0700, random name) directory under the root-owned work root."""
    return str(tx.apply(system.PrivateDir(str(system.work_root()), f"{prefix}-")))


def _last_line(path: str) -> str:
    try:
        lines = Path(path).read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1].removeprefix("slowdisk: ") if lines else ""


@dataclass(frozen=True)
class _Served:
    loop: str
    mountpoint: str
    pid: int
    start: int
    log: str


def _serve(tx: system.Transaction, work: str, profile: Profile, image: str,
           read_only: bool) -> _Served:
    """Daemon serving `image` on work/fuse, and a direct-IO loop device over disk.img."""
    daemon_log = os.path.join(work, "daemon.log")
    tx.apply(system.MadeFile(daemon_log))
    mnt = os.path.join(work, "fuse")
    tx.apply(system.MadeDir(mnt))
    tx.apply(system.FuseMount(mnt))  # before the daemon: undone after it stops, even if killed
    argv = spawn.python_module("backburner.slowdisk.daemon", "--profile", profile.name,
                              "--image", image, "--image-id", image_identity(image),
                              "--mountpoint", mnt, "--log", daemon_log)
    if read_only:
        argv.append("--read-only")
    daemon = system.Daemon(argv, ready_path=os.path.join(mnt, STATS_NAME),
                           ready_timeout=DAEMON_READY_TIMEOUT)
    # ^C/SIGTERM wait until the daemon's PID is in the journal, so undo can stop it.
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM,
                                                     signal.SIGHUP})
    try:
        result = tx.apply(daemon)
    except SystemStateError as err:
        why = _last_line(daemon_log)
        raise SystemStateError(f"the slowdisk daemon did not start: {why or err}") from None
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
    _crash_point("daemon")
    served = os.path.join(mnt, SERVED_NAME)
    loop = tx.apply(system.LoopDevice(served, direct_io=True, read_only=read_only))
    _crash_point("loop")
    name = os.path.basename(loop)
    try:
        dio = Path(f"/sys/block/{name}/loop/dio").read_text().strip()
    except OSError:
        dio = "?"
    if dio != "1":
        raise SystemStateError(f"{loop}: direct IO could not be enabled on the loop device",
                               "the page cache would hide the modelled timing")
    return _Served(loop, mnt, int(result["pid"]), int(result["start"]), daemon_log)


def _apply_queue(tx: system.Transaction, loop: str, rotational: bool, scheduler: str) -> None:
    queue = f"/sys/block/{os.path.basename(loop)}/queue"
    tx.apply(system.SysfsValue(f"{queue}/rotational", "1" if rotational else "0"))
    try:
        tx.apply(system.SysfsValue(f"{queue}/scheduler", scheduler))
    except SystemStateError:
        offered = block.offered(os.path.basename(loop))
        raise UnavailableError(f"IO scheduler {scheduler!r} is not available for {loop}",
                               "available: " + ", ".join(offered)) from None


def attach(opts: CreateOptions, tx: system.Transaction) -> SlowDisk:
    """Set up a slowdisk on an image prepared by `prepare_image`, inside `tx` (no hand-over).

    `create` hands the result over; the accuracy benchmark lets its transaction undo it.
    """
    profile = get_profile(opts.profile)
    read_only = opts.read_only or profile.read_only_medium
    image = os.path.abspath(opts.image)
    work = _new_workdir("slowdisk", tx)
    served = _serve(tx, work, profile, image, read_only)
    _apply_queue(tx, served.loop, profile.rotational, opts.scheduler)
    return SlowDisk(device=served.loop, profile=profile.name, image=image,
                    size_bytes=os.stat(image).st_size, read_only=read_only, workdir=work,
                    mountpoint=served.mountpoint, daemon_pid=served.pid,
                    rotational=profile.rotational, scheduler=opts.scheduler)


def validate(opts: CreateOptions) -> Profile:
    """The checks that need no root and change nothing."""
    profile = get_profile(opts.profile)
    block.check_scheduler(opts.scheduler)
    return profile


def create(opts: CreateOptions) -> SlowDisk:
    """`backburner slowdisk create`: set up and hand over to the daemon, so it outlives us."""
    profile = validate(opts)
    system.require_root("creating a slowdisk (a FUSE mount and a loop device)")
    _check_fuse()
    read_only = opts.read_only or profile.read_only_medium
    image, made = prepare_image(opts.image, opts.size, read_only, profile)
    done = False
    try:
        with system.Transaction(LABEL) as tx:
            disk = attach(CreateOptions(profile.name, image, opts.size, read_only,
                                        opts.scheduler), tx)
            _crash_point("handover")
            tx.hand_over(disk.daemon_pid, note=disk.note())
        done = True
    except BaseException:
        if made and not done:  # the image is the user's data; only a failed create removes it
            try:
                os.unlink(image)
            except OSError:
                pass
        raise
    return disk


# --- finding, removing, stats ---------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    """A slowdisk journal: the note if it was handed over, else what its results say."""

    info: system.JournalInfo
    disk: SlowDisk | None  # None: not handed over (being created, or its creator crashed)
    device: str

    @property
    def state(self) -> str:
        if self.disk is None:
            return "being created" if self.info.alive else "stale (creator died)"
        return "running" if self.info.alive else "stale (daemon died)"


def entries() -> list[Entry]:
    out = []
    for info in system.journals():
        if info.label != LABEL:
            continue
        disk = SlowDisk.from_note(info.note) if info.note else None
        device = disk.device if disk else next(
            (r for r in info.results if isinstance(r, str) and r.startswith("/dev/loop")), "")
        out.append(Entry(info, disk, device))
    return out


def _slowdisks() -> list[SlowDisk]:
    return [e.disk for e in entries() if e.disk is not None]


def normalise_device(text: str) -> str:
    path = text if text.startswith("/") else os.path.join("/dev", text)
    return os.path.realpath(path)


def find(device: str) -> Entry:
    dev = normalise_device(device)
    for entry in entries():
        if entry.device == dev:
            return entry
    known = [e.device for e in entries() if e.device]
    raise NotFoundError(f"{device} is not a slowdisk",
                        "slowdisks: " + ", ".join(known) if known else "there is none")


def remove(device: str, report: Callable[[str], None] = lambda _m: None) -> Entry:
    """`backburner slowdisk remove`: undo the journal of that device (daemon alive or not)."""
    system.require_root("removing a slowdisk")
    entry = find(device)
    if entry.disk is None and entry.info.alive:
        raise SystemStateError(f"{entry.device} is still being set up by process "
                               f"{entry.info.owner_pid}", "wait for it, or interrupt it")
    if entry.info.alive and _in_use(entry.device):
        raise SystemStateError(f"{entry.device} is in use (mounted, or held open exclusively)",
                               "unmount it first")
    system.undo_journal(entry.info.journal, report)
    return entry


def _in_use(dev: str) -> bool:
    """Mounted or claimed: stopping the daemon under it would turn its IO into EIO."""
    try:
        os.close(os.open(dev, os.O_RDONLY | os.O_EXCL | os.O_CLOEXEC))
    except OSError as err:
        return err.errno == errno.EBUSY
    return False


def read_stats(device: str) -> dict[str, Any]:
    """The daemon's live stats.json, plus the device and its current queue settings."""
    entry = find(device)
    if entry.disk is None:
        raise SystemStateError(f"{entry.device} is not set up completely ({entry.state})",
                               "run `backburner restore` if its creator died")
    disk = entry.disk
    try:
        with open(disk.stats_path) as f:
            data = json.load(f)
    except (OSError, json.JSONDecodeError) as err:
        code = err.errno if isinstance(err, OSError) else None
        why = os.strerror(code) if code else str(err)
        alive = entry.info.alive and code not in (errno.ENOTCONN, errno.ENOENT)
        raise SystemStateError(
            f"cannot read the stats of {disk.device} ({why})"
            + ("" if alive else f": its daemon (pid {disk.daemon_pid}) is gone"),
            "run `backburner restore` to release it" if not alive else None) from None
    name = os.path.basename(disk.device)
    sched = block.in_force(name) or "?"
    flag = block.rotational(name)
    rot = "?" if flag is None else str(int(flag))
    return {"device": disk.device, "mountpoint": disk.mountpoint, "scheduler": sched,
            "rotational": rot, **data}


# --- a blank slowdisk for a caller's transaction -------------------------------------------


@dataclass(frozen=True)
class Blank:
    """A slowdisk over a new sparse image, inside someone else's transaction."""

    loop: str
    served: str  # the file the loop device is over: the daemon's view of the image
    workdir: str
    profile: Profile
    facts: dict[str, Any]
    daemon: _Served

    def check_alive(self) -> None:
        """A daemon that died leaves every read failing with EIO: say so, with the last line
        of its log (the log itself goes with the work directory when the run is undone)."""
        if procfs.start_time(self.daemon.pid) != self.daemon.start:
            why = _last_line(self.daemon.log) or "nothing in its log"
            raise SystemStateError(f"the slowdisk daemon (pid {self.daemon.pid}) died: {why}",
                                   "the trials stored so far are kept; --resume continues")


def serve_blank(tx: system.Transaction, profile_name: str, size: int,
                fill: Callable[[str], None] | None = None) -> Blank:
    """A new sparse image served with `profile`'s timing as a loop device, everything applied
    in `tx` (no hand-over): the bench builds its testbed on the loop device. `fill(path)`
    writes the image instead (a copy of a prepared one), in our private work directory."""
    profile = get_profile(profile_name)
    if profile.read_only_medium:
        raise UsageError(f"a {profile.name} slowdisk is read-only: the bench needs to write "
                         "its files", "use hdd-5400, hdd-7200, sdcard or flat:MS")
    _check_fuse()
    work = _new_workdir("slowdisk-bench", tx)
    image = os.path.join(work, "image.img")
    if fill is None:
        tx.apply(system.MadeFile(image, size))
    else:
        fill(image)
    served = _serve(tx, work, profile, image, read_only=False)
    facts = {**profile.as_dict(), "image_bytes": os.path.getsize(image),
             "fuse_mountpoint": served.mountpoint, "daemon_pid": served.pid}
    return Blank(served.loop, os.path.join(served.mountpoint, SERVED_NAME), work, profile, facts,
                 served)


__all__ = [
    "DEFAULT_SCHEDULER",
    "CreateOptions",
    "Entry",
    "SlowDisk",
    "attach",
    "serve_blank",
    "create",
    "entries",
    "find",
    "prepare_image",
    "read_stats",
    "remove",
]
