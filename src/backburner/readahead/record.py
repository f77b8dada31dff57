"""Record what a start reads: fanotify for which files, the page cache for which bytes.

While a program runs (or, with ``--system``, for a number of seconds), a fanotify group
marks the filesystems involved (FAN_MARK_FILESYSTEM, or FAN_MARK_MOUNT where a filesystem
refuses that) for FAN_OPEN | FAN_OPEN_EXEC | FAN_CLOSE_NOWRITE (and FAN_ACCESS with
``--system``, where files opened before the recording began are read too). Each event
comes with an fd on the file, from which a reader thread takes its identity and path.
Which process read it is decided at the end: the target's process tree is its PID and
everything forked below it, from the kernel's process connector (fork events arrive even
for children that lived a millisecond, whose /proc entries are long gone), with each new
PID's ancestry read from /proc as a fallback. ``--system`` keeps everything but
backburner's own processes.

Then the page cache says which bytes of those files are resident (cachestat, then mincore
on a mapping), which includes what was read through mmap (shared libraries), where
fanotify sees only the open. For a command it is asked when the command is done, on the
first fd of each file, held until then (the less the reader does while the program runs,
the less it slows it; a page evicted before the end by memory pressure is missed), and the
closes of held files are not asked for; its events are read in batches, half a second
after the first of them, not as each arrives (which process read a file is known from fork
events, whoever is still alive then). With ``--system``, which must not hold files open at
boot, it is asked when a reader closes the file (FAN_CLOSE_NOWRITE, on the event's own fd)
and the pack holds the union; its events are read as they come, since which process is
backburner's own is judged then.

After a cold start (``--drop-caches``, or ``--system`` at boot) the filesystem's metadata
the start read (inode tables, directories) is taken from its block device's page cache
as a device entry (`metadata_entry`); for a command, less what was still cached just
after the drop on a settled filesystem (buffers it keeps pinned, which the start did not
read: `_drop_caches`).

While recording, the devices' read-ahead is lowered through a `system.SysfsValue`
(journaled, put back at the end, even after ^C) so the resident pages are close to what
was really asked for.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shlex
import signal
import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .. import spawn, system
from ..base import interrupts
from ..base.errors import NotFoundError, UnavailableError, UsageError
from ..files import outfile
from . import packfile, traced
from .listener import MASK_SYSTEM, Listener, is_backburner, tree_of
from .pack import Entry, Pack
from .ranges import Ranges
from .resident import build_pack, device_cache, metadata_entry
from .watched import Watched, watched_filesystems

log = logging.getLogger(__name__)

DEFAULT_READ_AHEAD_KB = 16
#: A command's events are read this long after the first of them (its tree is known from
#: fork events, not from who is alive when they are read).
BATCH_S = 0.5
_STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}


@dataclass(frozen=True)
class RecordOptions:
    output: str
    mounts: tuple[str, ...] = ()  # watch only the filesystems holding these paths
    read_ahead_kb: int | None = DEFAULT_READ_AHEAD_KB  # None: leave read-ahead alone
    drop_caches: bool = False  # start cold, so the pack holds only what this start read
    hash: bool = False  # a digest of each file's recorded bytes
    force: bool = False  # replace an existing pack (else refused before recording)
    lookups: bool = False  # also what it looks up, stats and lists, and in which order


@dataclass(frozen=True)
class RecordResult:
    output: str
    pack: Pack
    size: int  # bytes of the pack file
    seconds: float
    watched: tuple[Watched, ...]
    files_seen: int  # by anyone, on the watched filesystems
    gone: int  # read, but deleted or replaced before the end
    overflows: int  # fanotify queue overflows (events lost)
    forks_lost: bool  # the process connector dropped events (the tree may be incomplete)
    order: str = ""  # with lookups: why the order of reads is missing ("" when it is there)


def _lower_read_ahead(tx: system.Transaction, watched: Sequence[Watched], kb: int | None
                      ) -> None:
    if kb is None:
        return
    for path in dict.fromkeys(w.read_ahead_path for w in watched):
        if os.path.exists(path):
            tx.apply(system.SysfsValue(path, str(kb)))


# --- recording -------------------------------------------------------------------------------


def _check(opts: RecordOptions) -> list[Watched]:
    system.require_root("recording file accesses (fanotify)")
    out = os.path.abspath(opts.output)
    if not os.path.isdir(os.path.dirname(out)):
        raise NotFoundError(f"directory {os.path.dirname(out)} does not exist",
                            "create it first")
    if os.path.isdir(out):
        raise UsageError(f"{opts.output} is a directory", "give a file name for the pack")
    outfile.check_new(opts.output, opts.force)  # before the recording, not after it
    if opts.read_ahead_kb is not None and opts.read_ahead_kb < 0:
        raise UsageError("--read-ahead-kb must be 0 or more")
    watched = watched_filesystems(opts.mounts)
    if not watched:
        raise UnavailableError("no filesystem on a block device to watch")
    return watched


def record_command(argv: Sequence[str], opts: RecordOptions
                   ) -> tuple[RecordResult, spawn.Outcome]:
    """Run `argv` in the foreground (signals forwarded) and record what its tree read.

    The pack is written whatever the program's exit status: what a failing start read is
    still what the next one will read. The caller mirrors the outcome (`spawn.die_like`).
    """
    if not argv:
        raise UsageError("no command to record", "put it after --")
    watched = _check(opts)
    t0 = time.monotonic()
    asked = traced.Seen()
    with system.Transaction("readahead-record") as tx:
        _lower_read_ahead(tx, watched, opts.read_ahead_kb)
        tracing = traced.Tracing(tx, [w.dev for w in watched]) if opts.lookups else None
        try:
            pinned = _drop_caches(watched) if opts.drop_caches else {}
            listener = Listener(watched, track_ancestry=True, hold=True, batch_s=BATCH_S)
            with listener:
                outcome = spawn.run_foreground(tracing.argv(argv) if tracing else argv)
            seen = listener.stop()
            if tracing is not None:
                asked = tracing.finish(os.fsencode(os.getcwd()))
        finally:
            if tracing is not None:
                tracing.close()
        read_ahead = traced.read_ahead_kb([w.read_ahead_path for w in watched])
    tree = tree_of(asked.first_pid or outcome.pid,
                   listener.forks.parents if listener.forks else {}, seen.ancestry)
    files = seen.files_of(lambda pid: pid in tree)
    meta = _metadata(watched, {k[0] for k, _ in files}, pinned) if opts.drop_caches else []
    pack, gone = build_pack(files, shlex.join(argv), opts.hash, seen.resident, meta)
    if tracing is not None:
        pack = traced.attach(pack, asked, lambda pid: pid in tree, {w.dev for w in watched},
                             read_ahead, outcome.wall_s, outcome.user_s + outcome.sys_s)
    size = packfile.save(opts.output, pack)
    result = RecordResult(opts.output, pack, size, time.monotonic() - t0, tuple(watched),
                          len(seen.paths), gone, seen.overflows, listener.forks_lost,
                          asked.order if tracing is not None else "")
    return result, outcome


def record_system(seconds: float, opts: RecordOptions,
                  ready: Callable[[Sequence[Watched]], None] = lambda _w: None) -> RecordResult:
    """Record everything read on the watched filesystems for `seconds` (at boot), except by
    backburner itself. SIGTERM or ^C ends the recording early; the pack is still written.
    `ready` is called once the filesystems are marked."""
    if not seconds > 0:
        raise UsageError("--seconds must be above 0")
    watched = _check(opts)
    t0 = time.monotonic()
    with system.Transaction("readahead-record") as tx:
        _lower_read_ahead(tx, watched, opts.read_ahead_kb)
        if opts.drop_caches:  # what is pinned is not looked for: others read meanwhile
            system.drop_caches()
        listener = Listener(watched, track_ancestry=False, exclude=_excluder(),
                            mask=MASK_SYSTEM)
        # a stop signal from the moment `ready` says so is taken by _wait (ends the
        # recording early), never raised: systemctl stop right after the start wrote no pack
        with listener, interrupts.held(_STOP_SIGNALS):
            ready(watched)
            _wait(seconds)
        seen = listener.stop()
    files = seen.files_of(lambda _pid: True)
    meta = _metadata(watched, {k[0] for k, _ in files}, {})
    pack, gone = build_pack(files, f"system, {seconds:g} s", opts.hash, seen.resident, meta)
    size = packfile.save(opts.output, pack)
    return RecordResult(opts.output, pack, size, time.monotonic() - t0, tuple(watched),
                        len(seen.paths), gone, seen.overflows, False)


def _drop_caches(watched: Sequence[Watched]) -> dict[int, Ranges]:
    """Drop the page cache; what the devices of settled filesystems still have cached
    (`device_cache`). Only there is what survives a drop pinned for good: on a writable
    ext4 whose journal was not checkpointed, metadata written since is held by the journal
    and survives the drop too, though a start may read it (and the next boot will not
    find it cached). Elsewhere nothing is left out."""
    settled = [w for w in watched if _settled(w.mountpoint)]
    system.drop_caches()
    return device_cache(settled)


_EXT4_IOC_CHECKPOINT = 0x4004662B  # _IOW('f', 43, __u32); Linux 5.13


def _settled(mountpoint: str) -> bool:
    """Read-only, or a writable ext4 whose journal was just checkpointed (its metadata
    written to where it belongs and let go: like sync, nothing to put back)."""
    try:
        if os.statvfs(mountpoint).f_flag & os.ST_RDONLY:
            return True
        fd = os.open(mountpoint, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.ioctl(fd, _EXT4_IOC_CHECKPOINT, struct.pack("I", 0))
        return True
    except OSError as err:  # not ext4 (ENOTTY), no journal (EINVAL), an older kernel
        log.debug("%s: no journal checkpoint (%s)", mountpoint, err.strerror)
        return False
    finally:
        os.close(fd)


def _metadata(watched: Sequence[Watched], devs: set[int], pinned: dict[int, Ranges]
              ) -> list[Entry]:
    """Device entries for the watched filesystems that files were recorded on, without
    what was `pinned` in their caches before the recording began."""
    out = []
    for w in watched:
        if w.dev in devs and (e := metadata_entry(w, pinned.get(w.dev, ()))) is not None:
            out.append(e)
    return out


def _excluder() -> Callable[[int], bool]:
    verdicts: dict[int, bool] = {}

    def exclude(pid: int) -> bool:
        if pid not in verdicts:
            verdicts[pid] = is_backburner(pid)
        return verdicts[pid]

    return exclude


def _wait(seconds: float) -> None:
    """Sleep until `seconds` have passed or a stop signal arrives (taken, not raised)."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    try:
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            if signal.sigtimedwait(_STOP_SIGNALS, left) is not None:
                log.debug("stop signal: ending the recording early")
                return
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
