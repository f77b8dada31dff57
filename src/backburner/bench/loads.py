"""Background loads: what runs behind the probe, started through the spawn core.

Spec grammar (also in `backburner bench --help`):
  none
  readers:N:seq|rand[:OPTION...]          fio, N jobs reading their own files
  writers:N:seq|rand[:OPTION...]          fio, N jobs writing their own files
      OPTION: direct | buffered (default direct); a request size, e.g. 4k or 1m (default
      1m sequential, 4k random); passes (fio's loops with invalidate=1, as the S suite
      writes its jobs, instead of one time-based stream; both drop the file's cache
      at each wrap, measured); s-suite (the BFQ authors' S suite's readers and writers:
      buffered:4k:passes, fio's own defaults)
  A+B                                     several of the above at once (a mix)
  install-loop[:shell-loop|long-lived]    unpack thousands of small files with fsync, delete, repeat
  copy                                    one large file copied over and over, fsync'd
  dpkg-loop[:FILES:SIZE]                  dpkg installs and purges a generated .deb
  flatpak-loop[:FILES:SIZE]               the flatpak command installs and uninstalls a bundle
  flatpak-api[:FILES:SIZE]                one process does the same through libflatpak
  cmd:'COMMAND'                           any command, run with sh -c in the load directory

Every load runs in its own process group and dies with the bench (a parent-death signal);
`stop` ends its whole tree and then verifies by PID that nothing of it is left. The helpers
that lay out a load's files are stopped the same way if the bench is interrupted. A load that
ends by itself with a failure is reported by `stop` (`failure`: its last lines of output),
so that its trial fails rather than timing the probe against no load.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass

from .. import spawn
from ..base.errors import SystemStateError, UnavailableError, UsageError
from ..base.quantities import parse_size
from ..files import logtail, safepath
from ..policy import grammar
from . import loadio, pkgloads
from .packages import Shape

FIO_FILE_SIZE = "256m"
COPY_SIZE = "1g"


@dataclass(frozen=True)
class FioPart:
    role: str  # readers | writers
    jobs: int
    pattern: str  # seq | rand
    mode: str  # direct | buffered
    #: bytes per request; None: the pattern's default (1 MiB sequential, 4 KiB random)
    request: int | None = None
    #: whole-file passes (fio's loops with invalidate=1, as S writes its readers) instead
    #: of one time-based stream; fio drops the file's cache at each wrap in both forms
    passes: bool = False

    @property
    def rw(self) -> str:
        base = "read" if self.role == "readers" else "write"
        return base if self.pattern == "seq" else f"rand{base}"

    @property
    def bs(self) -> str:
        if self.request is not None:
            return str(self.request)
        return "1m" if self.pattern == "seq" else "4k"


@dataclass(frozen=True)
class LoadSpec:
    text: str
    kind: str  # none | fio | install-loop | copy | cmd | dpkg-loop | flatpak-loop | flatpak-api
    fio: tuple[FioPart, ...] = ()
    variant: str = ""
    command: str = ""
    shape: Shape | None = None  # the generated app of a package-manager load

    @property
    def is_none(self) -> bool:
        return self.kind == "none"

    @property
    def data_bytes(self) -> int:
        """The bytes of data files `Load.prepare` lays out (and a copy writes), so a device
        too small for them is refused before anything is built. An install loop's archive
        and a cmd's own files are not known here (0)."""
        if self.kind == "fio":
            return sum(part.jobs for part in self.fio) * parse_size(FIO_FILE_SIZE)
        if self.kind == "copy":
            return 2 * parse_size(COPY_SIZE)  # the source and its copy
        if self.shape is not None:  # the package, the app installed, what a round leaves
            return 3 * self.shape.size
        return 0

    @property
    def headroom_bytes(self) -> int:
        """Free space the load's tool insists on keeping (flatpak's), shared by all loads."""
        return pkgloads.FLATPAK_MIN_FREE if self.kind.startswith("flatpak") else 0


_FIO_RE = re.compile(r"(readers|writers):(\d+):(seq|rand)((?::[^:+]+)*)")
#: The request sizes a fio part may ask for: a whole sector at least (direct IO needs it),
#: and no more than a request that would measure memory copies rather than the device.
MIN_REQUEST, MAX_REQUEST = 512, 64 << 20
_GRAMMAR_HINT = ("use none, readers:N:seq|rand[:direct|buffered][:SIZE][:passes|s-suite], "
                 "writers:N:…, A+B, install-loop[:shell-loop|long-lived], copy, dpkg-loop, "
                 "flatpak-loop, flatpak-api or cmd:'…'")


def _fio_part(text: str, piece: str) -> FioPart:
    """One `readers:…`/`writers:…` piece; its options in any order, each at most once."""
    fm = _FIO_RE.fullmatch(piece)
    if not fm or int(fm.group(2)) < 1:
        raise UsageError(f"load spec {text!r} does not parse", _GRAMMAR_HINT)
    mode: str | None = None
    request: int | None = None
    passes = s_suite = False
    for option in fm.group(4).split(":")[1:]:
        if option in ("direct", "buffered"):
            if mode is not None:
                raise UsageError(f"load spec {text!r} gives direct/buffered twice",
                                 "give one of them")
            mode = option
        elif option in ("passes", "s-suite"):
            if passes:
                raise UsageError(f"load spec {text!r} gives passes/s-suite twice",
                                 "s-suite already means buffered:4k:passes")
            passes, s_suite = True, option == "s-suite"
        elif re.fullmatch(r"\d+[kKmM]?", option):
            if request is not None:
                raise UsageError(f"load spec {text!r} gives a request size twice",
                                 "give one, e.g. 4k or 1m")
            request = parse_size(option, what="request size")
            if not MIN_REQUEST <= request <= MAX_REQUEST or request % MIN_REQUEST:
                raise UsageError(f"request size {option!r} in {text!r} is out of range",
                                 "use a multiple of 512 bytes from 512 to 64m, e.g. 4k")
        else:
            raise UsageError(f"load spec {text!r}: unknown option {option!r}", _GRAMMAR_HINT)
    if s_suite:
        if mode == "direct":
            raise UsageError(f"load spec {text!r}: s-suite readers are buffered",
                             "drop direct, or use passes with direct")
        mode, request = "buffered", request or 4096
    return FioPart(fm.group(1), int(fm.group(2)), fm.group(3), mode or "direct", request,
                   passes)


def parse(text: str) -> LoadSpec:
    text = text.strip()
    if text == "none":
        return LoadSpec(text, "none")
    if text.startswith("cmd:"):
        command = text[4:].strip()
        if len(command) >= 2 and command[0] == command[-1] and command[0] in "'\"":
            command = command[1:-1]
        if not command:
            raise UsageError("load cmd: needs a command", "e.g. --load cmd:'tar xf big.tar'")
        return LoadSpec(text, "cmd", command=command)
    if text == "copy":
        return LoadSpec(text, "copy")
    m = re.fullmatch(r"(dpkg-loop|flatpak-loop|flatpak-api)(?::(\d+):([^:]+))?", text)
    if m:
        return LoadSpec(text, m.group(1), shape=Shape.parse(text, m.group(2), m.group(3)))
    m = re.fullmatch(r"install-loop(?::(shell-loop|long-lived))?", text)
    if m:
        return LoadSpec(text, "install-loop", variant=m.group(1) or "shell-loop")
    parts = tuple(_fio_part(text, piece.strip()) for piece in text.split("+"))
    return LoadSpec(text, "fio", fio=parts)


#: fio's loops for whole-file passes: more than any run reads (runtime still bounds it)
FIO_PASSES = 1_000_000


def fio_jobfile(spec: LoadSpec, directory: str) -> str:
    """One fio job section per part; files are named per part so they are laid out once.

    A part with `passes` is written as the S suite writes its readers: fio's `loops`
    with invalidate=1, each pass a whole file. A time-based part wraps around instead;
    fio 3.33 drops the file's cached pages at every wrap in both forms, so every pass of
    a buffered reader reaches the device even when its files fit in memory
    (`test_every_pass_reaches_the_device`)."""
    lines = ["[global]", f"directory={directory}", f"size={FIO_FILE_SIZE}", "ioengine=psync",
             "time_based=1", "runtime=86400", "group_reporting=1", ""]
    for i, part in enumerate(spec.fio):
        name = f"{part.role}-{part.pattern}"
        lines += [f"[{name}-{i}]", f"rw={part.rw}", f"bs={part.bs}", f"numjobs={part.jobs}",
                  f"direct={1 if part.mode == 'direct' else 0}",
                  f"filename_format=bbload.{part.role}.{i}.$jobnum"]
        if part.passes:
            lines += ["time_based=0", f"loops={FIO_PASSES}", "invalidate=1"]
        lines.append("")
    return "\n".join(lines)


def require_fio() -> str:
    from shutil import which

    path = which("fio")
    if not path:
        raise UnavailableError("fio is not installed", "apt-get install fio (scripts/setup does)")
    return path


def _installer_argv(archive: str, dest: str, once: bool, progress: str) -> list[str]:
    argv = spawn.python_module("backburner.bench.installer", "run", "--archive", archive,
                               "--dest", dest, "--progress", progress)
    return argv + (["--once"] if once else [])


@dataclass(frozen=True)
class Bulk:
    """How much work the load itself did while it ran: the price of protecting the probe.

    unit: "bytes" (fio, copy: what it read and wrote), "io bytes" (a package manager: what
    its process tree read and wrote, `loadio`, counted as it goes, so a round cut short by
    the trial's end counts for what it did), "files" (install-loop: files installed with
    fsync), "units" (a cmd load's own count, appended to $BACKBURNER_PROGRESS) or "device
    bytes" (a cmd load that counts nothing: the device's traffic while it ran, the probe's
    own reads and writes taken out).
    """

    unit: str
    units: float
    seconds: float
    #: other counts of the same work (a package-manager load: its rounds and files)
    counts: tuple[tuple[str, float], ...] = ()

    @property
    def rate(self) -> float:
        return self.units / self.seconds if self.seconds > 0 else 0.0

    def as_dict(self) -> dict[str, float | str]:
        return {"unit": self.unit, "units": self.units, "seconds": self.seconds,
                **dict(self.counts)}


PROGRESS_ENV = "BACKBURNER_PROGRESS"
FAILURE_LINES, FAILURE_CHARS = 5, 600  # as much of a failed load's output as of a probe's


class Load:
    """A load bound to a directory: `prepare` once, then `start`/`stop` around each trial
    (or around each block of trials, when the load lives for a cell's block)."""

    def __init__(self, spec: LoadSpec, directory: str) -> None:
        self.spec = spec
        self.dir = directory
        self.child: spawn.Child | None = None
        self.log = os.path.join(directory, "load.log")
        self.progress = os.path.join(directory, "progress")
        self._fio_json = os.path.join(directory, "fio.json")
        self._started = 0.0
        #: the last lines of its output, when the load ended by itself with a failure
        self.failure: list[str] = []
        self.installation = (pkgloads.Installation(spec.kind, spec.shape, directory)
                             if spec.shape is not None else None)
        #: its tree's bytes, sampled while it runs; `ran` holds the last run's whole
        self.io: loadio.TreeIO | None = None
        self.ran: loadio.Window | None = None

    def prepare(self) -> None:
        """Lay out data files so trials measure steady-state work, not file creation."""
        if self.spec.kind == "fio":
            require_fio()
            job = os.path.join(self.dir, "load.fio")
            _write_new(job, fio_jobfile(self.spec, self.dir))
            _check(spawn.run_helper(["fio", "--create_only=1", "--output=/dev/null", job],
                                    cwd=self.dir, stdout=subprocess.DEVNULL),
                   "laying out fio files")
        elif self.spec.kind == "install-loop":
            _check(spawn.run_helper(spawn.python_module("backburner.bench.installer", "make",
                                                         "--archive", self._archive),
                                    cwd=self.dir),
                   "making the archive")
        elif self.spec.kind == "copy":
            require_fio()
            _check(spawn.run_helper(["fio", "--name=copysrc", f"--filename={self._copy_src}",
                                     f"--size={COPY_SIZE}", "--create_only=1",
                                     "--output=/dev/null"], cwd=self.dir,
                                    stdout=subprocess.DEVNULL), "making the file to copy")
        elif self.installation is not None:
            self.installation.prepare()

    @property
    def _archive(self) -> str:
        return os.path.join(self.dir, "install.tar")

    @property
    def _copy_src(self) -> str:
        return os.path.join(self.dir, "copy.src")

    def argv(self) -> list[str]:
        kind = self.spec.kind
        if kind == "fio":
            return ["fio", "--output-format=json", f"--output={self._fio_json}",
                    os.path.join(self.dir, "load.fio")]
        if kind == "install-loop":
            dest = os.path.join(self.dir, "install.d")
            if self.spec.variant == "long-lived":
                return _installer_argv(self._archive, dest, False, self.progress)
            one = shlex.join(_installer_argv(self._archive, dest, True, self.progress))
            return ["sh", "-c", f"while :; do {one} || exit 1; done"]
        if kind == "copy":
            return spawn.python_module("backburner.bench.copier", self._copy_src,
                                       os.path.join(self.dir, "copy.dst"), "--progress",
                                       self.progress)
        if kind == "cmd":
            return ["sh", "-c", self.spec.command]
        if self.installation is not None:
            return self.installation.argv(self.progress)
        raise AssertionError(kind)

    def start(self, policy: grammar.Policy, cgroup_procs: list[str]) -> None:
        if self.spec.is_none:
            return
        for stale in (self.progress, self._fio_json):
            if os.path.lexists(stale):
                os.unlink(stale)
        os.close(safepath.create_new(self.progress))
        self.failure = []
        env = {**os.environ, PROGRESS_ENV: self.progress,
               **(self.installation.env() if self.installation else {})}
        fd = os.open(self.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW
                     | os.O_CLOEXEC, 0o600)
        try:
            self.child = spawn.launch(self.argv(), policy=policy, cgroup_procs=cgroup_procs,
                                      cwd=self.dir, new_group=True, stdin=subprocess.DEVNULL,
                                      stdout=fd, stderr=fd, die_with_parent=True,
                                      env=env)
        finally:
            os.close(fd)
        self._started = time.monotonic()
        self.ran = None
        self.io = loadio.TreeIO(self.child.pid)

    def last_words(self) -> str:
        """The last line of the load's log, for a message that outlives the log (which goes
        with the testbed)."""
        return next(iter(logtail.last_lines(self.log)), "it wrote nothing to its log")

    def alive(self) -> bool:
        return self.child is not None and self.child.poll() is None

    def stop(self) -> spawn.Outcome | None:
        """End the load's whole process tree and prove by PID that none of it survives
        (fio's job processes call setsid(), so they are in no group of ours: spawn tracks
        descendants too). A load that had already ended with a failure leaves its last
        lines in `failure`; a package manager's installation is made whole again."""
        if self.child is None:
            return None
        child, self.child = self.child, None
        ended = child.poll()
        if self.io is not None:  # before the tree is reaped, which takes its counts along
            self.ran, self.io = self.io.stop(), None
        out = child.stop_tree(grace=10.0)
        if ended is not None and not ended.ok:
            self.failure = logtail.last_lines(self.log, FAILURE_LINES, FAILURE_CHARS) or [
                f"it ended: {ended.describe()}"]
        if self.installation is not None:
            self.installation.recover()
        return out

    def mark(self) -> float | None:
        """A sample of the running load's bytes now, and its time: the edge of a window
        (`during`); None when it is not running."""
        return self.io.sample() if self.io is not None else None

    def during(self, t0: float, t1: float) -> loadio.Window | None:
        """What the running load did between two marks."""
        return self.io.window(t0, t1) if self.io is not None else None

    def ran_s(self) -> float:
        return max(time.monotonic() - self._started, 1e-9) if self._started else 0.0

    def bulk(self) -> Bulk | None:
        """The load's own work since it started, once it is stopped (None: it counts none)."""
        seconds = self.ran_s()
        if self.spec.kind == "fio":
            return Bulk("bytes", _fio_bytes(self._fio_json), seconds)
        if self.installation is not None:
            done = pkgloads.progress(self.progress)
            if done is None or self.ran is None:
                return None
            rounds, files, installed = done
            return Bulk("io bytes", self.ran.bytes, self.ran.seconds,
                        (("rounds", rounds), ("files", files), ("installed_bytes", installed),
                         ("longest_stall_s", self.ran.longest_stall_s)))
        if self.spec.kind in ("install-loop", "copy", "cmd"):
            counted = _sum_lines(self.progress)
            if counted is None:
                return None
            return Bulk("files" if self.spec.kind == "install-loop" else
                        "bytes" if self.spec.kind == "copy" else "units", counted, seconds)
        return None


def room_needed(specs: Iterable[LoadSpec]) -> int:
    """The bytes a device must have free for these loads: their files, and the most free
    space one of their tools insists on."""
    specs = list(specs)
    return (sum(s.data_bytes for s in specs)
            + max((s.headroom_bytes for s in specs), default=0))


def _fio_bytes(path: str) -> float:
    """Bytes fio read and wrote, from the JSON it writes when it ends (also on SIGTERM)."""
    import json

    try:
        with open(path, "rb") as f:
            text = f.read().decode(errors="replace")
        data = json.loads(text[text.index("{"):])
    except (OSError, ValueError):
        return 0.0
    return float(sum(job.get(d, {}).get("io_bytes", 0) for job in data.get("jobs", [])
                     for d in ("read", "write", "trim")))


def _sum_lines(path: str) -> float | None:
    """The sum of the numbers a load appended, one per line; None when it wrote none."""
    try:
        with open(path, "rb") as f:
            lines = f.read().split()
    except OSError:
        return None
    total = 0.0
    for line in lines:
        try:
            total += float(line)
        except ValueError:
            continue
    return total if lines else None


def _write_new(path: str, text: str) -> None:
    fd = safepath.create_new(path, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def _check(outcome: spawn.Outcome | None, what: str) -> None:
    if outcome is None or not outcome.ok:
        raise SystemStateError(f"{what} failed ({outcome.describe() if outcome else 'timeout'})")
