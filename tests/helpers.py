"""Helpers the tests share: the CLI as a real subprocess, waiting, exact wait statuses, and
result databases built with the real Store API from seeded synthetic samples (a fake
executor: statistics, storage and plots are tested fast against known truth), and the
Debian package, built from a copy of the checkout."""

from __future__ import annotations

import math
import mmap
import os
import signal
import socket
import sqlite3
import struct
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from backburner import spawn, system
from backburner.base.errors import SystemStateError
from backburner.bench.executor import Measurement
from backburner.bench.prepare import StepResult
from backburner.bench.probes import ProbeResult
from backburner.kernel import proc_events
from backburner.store import Store
from backburner.store.cell import Cell

BB = [sys.executable, "-m", "backburner"]
#: A command's prefix that runs it where no cgroup v2 hierarchy is mounted, as on a
#: system that mounts only v1 hierarchies: a mount namespace of its own, the cgroup2
#: mounts gone from it (exit 90 where one cannot be unmounted).
WITHOUT_CGROUP2 = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                   'for m in $(awk \'$3 == "cgroup2" {print $2}\' /proc/self/mounts); '
                   'do umount "$m" || exit 90; done; exec "$@"', "sh"]
TIMEOUT = 120  # generous: most commands take < 1 s alone, a report a few; the suite runs them
#               on workers beside a guest on 2 cores, where a report took over 30 s


@dataclass
class Result:
    pid: int
    returncode: int
    stdout: bytes
    stderr: bytes

    @property
    def err(self) -> str:
        return self.stderr.decode(errors="replace")

    @property
    def out(self) -> str:
        return self.stdout.decode(errors="replace")


def bb(*args: str, input: bytes | None = None, timeout: float = TIMEOUT, **kw: object) -> Result:
    """Run `python -m backburner ARGS` to completion; bytes captured, pid kept."""
    with subprocess.Popen(
        [*BB, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw
    ) as proc:
        try:
            out, err = proc.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise
        return Result(proc.pid, proc.returncode, out, err)


def in_own_mount_namespace(code: str, timeout: float = TIMEOUT
                           ) -> subprocess.CompletedProcess[str]:
    """Python `code` run as root in a mount namespace of its own (private: nothing it
    mounts or unmounts reaches the host, nor the other tests running beside it); its
    stdout, stderr and status."""
    return subprocess.run(["unshare", "--mount", "--propagation", "private", sys.executable,
                           "-c", code], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def wait_for(predicate: Callable[[], object], timeout: float = TIMEOUT, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or predicate}")
        time.sleep(0.005)


def raw_status(proc: subprocess.Popen, timeout: float = TIMEOUT) -> int:
    """The raw wait status of a Popen child (os.waitpid), which Popen.returncode hides."""
    deadline = time.monotonic() + timeout
    while True:
        pid, status = os.waitpid(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return status
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"{proc.args} did not end within {timeout} s")
        time.sleep(0.005)


def one_line_error(result: Result) -> str:
    """Assert stderr is exactly one line and no traceback; return it."""
    assert "Traceback" not in result.err, result.err
    lines = result.err.strip().splitlines()
    assert len(lines) == 1, result.err
    return lines[0]


# --- `backburner run`'s exact end: the cases run/test_job.py checks here and vm/test_guest_run.py
# checks in a Debian guest under systemd; `py` is the Python the segfaulting job runs with

SEGFAULT = "import ctypes; ctypes.string_at(0)"
RUN_EXIT_CODES = (0, 1, 3, 255)
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


def run_signal_deaths(py: str) -> list:
    """(job, signal) for jobs that die of a signal: backburner then dies of it too."""
    return [pytest.param(["sh", "-c", "kill -TERM $$"], signal.SIGTERM, id="SIGTERM"),
            pytest.param(["sh", "-c", "kill -KILL $$"], signal.SIGKILL, id="SIGKILL"),
            pytest.param([py, "-c", SEGFAULT], signal.SIGSEGV, id="segfault")]


def run_shell_statuses(py: str) -> list:
    """(job, status a shell shows for backburner): 128 + the job's signal."""
    return [pytest.param([py, "-c", SEGFAULT], 139, id="segfault"),
            pytest.param(["sh", "-c", "kill -TERM $$"], 143, id="SIGTERM")]


#: a job that traps the forwarded signals: writes the name to argv[1], exits 40 + signal
TRAP_JOB = r"""
import os, signal, sys, time
out = sys.argv[1]
def got(signum, frame):
    with open(out, "w") as f:
        f.write(signal.Signals(signum).name)
    os._exit(40 + signum)
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
    signal.signal(s, got)
open(out + ".ready", "w").close()
time.sleep(10)
os._exit(99)
"""


def timed_reads(path: str | os.PathLike[str], offsets: list[int], size: int) -> list[float]:
    """O_DIRECT reads of ``size`` bytes at each offset; the latency of each.

    The reading thread runs at nice -10 (we are root) so that a busy test machine does not add
    the reader's own wake-up delays to what is meant to be the disk's latency (the daemon
    raises its own priority the same way).
    """
    buf = mmap.mmap(-1, max(size, mmap.PAGESIZE))  # page-aligned, as O_DIRECT needs
    view = memoryview(buf)[:size]
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    nice = os.getpriority(os.PRIO_PROCESS, 0)
    os.setpriority(os.PRIO_PROCESS, 0, min(nice, -10))
    try:
        out = []
        for off in offsets:
            t0 = time.perf_counter()
            assert os.preadv(fd, [view], off) == size
            out.append(time.perf_counter() - t0)
        return out
    finally:
        os.setpriority(os.PRIO_PROCESS, 0, nice)
        view.release()
        os.close(fd)
        buf.close()


# --- result databases ----------------------------------------------------------------------

PROBE = "gimp --version"
DEVICE = "testbed:4G"
LOAD = "writers:4:seq"
LOAD2 = "readers:2:rand"
COMMAND = "backburner bench --probe 'gimp --version' --load none --load writers:4:seq"

#: (scheduler, load, policy) -> median start-up seconds
MEDIANS: dict[tuple[str, str, str], float] = {
    ("mq-deadline", "none", "-"): 0.27,
    ("mq-deadline", LOAD, "default"): 3.4,
    ("mq-deadline", LOAD, "background"): 1.3,
    ("bfq", "none", "-"): 0.30,
    ("bfq", LOAD, "default"): 0.9,
    ("bfq", LOAD, "background"): 0.35,
    ("bfq", LOAD, "gentle"): 0.302,
}
ENV = {"kernel": "6.1.0-test", "cpu_model": "Synthetic CPU @ 3.0GHz", "cpus": 8,
       "cpu_governor": "performance", "memory_bytes": 16 * 2**30, "backburner": "0.1.0",
       "device": {"name": "loop7", "model": "loop7", "rotational": "1",
                  "schedulers": ["none", "mq-deadline", "bfq"], "filesystem": "ext4"}}


def key_of(sched: str, load: str, policy: str, probe: str = PROBE, device: str = DEVICE) -> str:
    return "|".join((probe, device, sched, load, policy))


def make_db(path: str | os.PathLike, *, medians: dict | None = None, trials: int = 10,
            seed: int = 1, spread: float = 0.03, finish: bool = True,
            special: dict | None = None, rounds: dict | None = None, cold: int = 1,
            device: str = DEVICE, store: Store | None = None, command: str = COMMAND,
            close: bool = True, hostname: str | None = None,
            env: dict | None = None, probe: str = PROBE, machine: str | None = None,
            settings: dict | None = None, bulk: dict | None = None) -> Store:
    """A result database as bench would write it.

    medians: {(sched, load, policy[, prepare]): median}; special: {(sched, load, policy
    [, prepare], round): status} overrides ("timeout", "failed", "aborted"); rounds: {(sched,
    load, policy[, prepare]): number of counted rounds} for interrupted runs; settings: more
    of the run's configuration; bulk: {(sched, load, policy): (bytes/s, every)}: the load's
    own work, stored on every `every`-th counted trial (a load that lives for a block).
    Warm-ups and failed trials get absurd wall times, so
    including them would show.
    """
    medians = MEDIANS if medians is None else medians
    special = special or {}
    rounds = rounds or {}
    if store is None:
        store = Store.create(str(path))
        store.conn.execute("PRAGMA synchronous=OFF")  # test speed; durability is not tested here
    loads = list(dict.fromkeys(k[1] for k in medians))
    config = {"probe": probe, "loads": loads, "trials": trials, "seed": seed, "cold": bool(cold),
              "schedulers": list(dict.fromkeys(k[0] for k in medians)), "device": device,
              **(settings or {})}
    run = store.add_run(command, config, seed, {**ENV, **(env or {})}, "0.1.0",
                        hostname=hostname, machine=machine)
    rng = np.random.default_rng(seed)
    t0 = 1_700_000_000.0
    for key, med in medians.items():
        sched, load, pol, *prepare = key
        cid = store.add_cell(run, Cell(probe, device, sched, load, pol, *prepare))
        for rnd in range(rounds.get(key, trials) + 1):
            status = special.get((*key, rnd), "ok")
            wall: float | None = float(med * math.exp(rng.normal(0, spread)))
            if rnd == 0:
                wall = 100.0 + rnd  # warm-up: never counted
            if status == "timeout":
                wall = 12.0
            elif status == "failed":
                wall = 50.0
            elif status == "aborted":
                wall = None
            loaded = load != "none"
            extra: dict = {"limit_s": 12.0}
            if key in (bulk or {}) and rnd and rnd % bulk[key][1] == 0:
                rate = bulk[key][0] * math.exp(rng.normal(0, spread))
                extra["bulk"] = {"unit": "bytes", "units": rate * 10.0, "seconds": 10.0}
            store.add_trial(
                run, cid, round=rnd, warmup=int(rnd == 0), status=status, cold=cold,
                wall_s=wall, user_s=0.05, sys_s=0.02, max_rss_kb=51200,
                in_blocks=8000 if cold else 0,
                out_blocks=0, exit_code=1 if status == "failed" else 0, signal=None,
                load_read_bps=float(rng.uniform(1e6, 2e6)) if loaded else 0.0,
                load_write_bps=float(rng.uniform(150e6, 160e6)) if loaded else 0.0,
                started_at=t0, ended_at=t0 + (wall or 0.0), extra=extra)
            t0 += 10
    if finish:
        store.finish_run(run)
    if close:
        store.close()
    return store


def raw_samples(path, key: str, cold: int = 1, status: str = "ok") -> list[float]:
    """Independent of report: the counted ok wall times (or those of another status: a
    timeout's is the limit it hit), straight from SQL."""
    conn = sqlite3.connect(path)
    rows = conn.execute(
        "SELECT t.wall_s FROM trials t JOIN cells c ON c.id = t.cell_id WHERE c.key=? AND "
        "t.warmup=0 AND t.status=? AND t.cold=? ORDER BY t.id", (key, status, cold)).fetchall()
    conn.close()
    return [r[0] for r in rows]


#: cells with and without a prepare step (a replayed readahead pack starts faster)
PREPARED: dict[tuple[str, ...], float] = {
    ("bfq", "none", "-"): 0.30, ("bfq", LOAD, "default"): 3.0,
    ("bfq", "none", "-", "replay"): 0.10, ("bfq", LOAD, "default", "replay"): 0.12}

SPECIAL = {
    ("mq-deadline", LOAD, "default", 3): "timeout",
    ("mq-deadline", LOAD, "default", 7): "timeout",
    ("mq-deadline", LOAD, "default", 8): "aborted",
    ("bfq", LOAD, "default", 2): "failed",
}




# --- a throwaway PostgreSQL cluster --------------------------------------------------------


@dataclass
class PgCluster:
    """A private PostgreSQL server run as the `postgres` user on a Unix socket only."""

    root: str
    socket_dir: str
    port: int

    def url(self, dbname: str, user: str = "postgres") -> str:
        return f"postgresql://{user}@/{dbname}?host={self.socket_dir}&port={self.port}"

    def psql(self, sql: str, dbname: str = "postgres") -> str:
        r = subprocess.run(["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h",
                            self.socket_dir, "-p", str(self.port), "-U", "postgres", "-d",
                            dbname, "-c", sql], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        return r.stdout

    def new_database(self) -> str:
        PgCluster._count += 1
        name = f"bb_{os.getpid()}_{PgCluster._count}"
        self.psql(f"CREATE DATABASE {name}")
        return self.url(name)

    _count = 0


def pg_binary(name: str) -> str | None:
    import glob
    import shutil

    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found[-1] if found else shutil.which(name)


def start_pg_cluster() -> PgCluster:
    """initdb + pg_ctl start in a private directory owned by `postgres` (the server refuses
    to run as root). Local connections are trusted, except for the role `secured`, which
    must give a password (to test refused credentials)."""
    import pwd
    import socket
    import tempfile

    initdb, pg_ctl = pg_binary("initdb"), pg_binary("pg_ctl")
    if not initdb or not pg_ctl:
        raise RuntimeError("PostgreSQL's initdb/pg_ctl are not installed (apt-get install "
                           "postgresql; scripts/setup --test does)")
    pw = pwd.getpwnam("postgres")
    root = tempfile.mkdtemp(prefix="bb-pg-")
    os.chown(root, pw.pw_uid, pw.pw_gid)
    os.chmod(root, 0o755)  # the socket must be reachable; the data dir inside stays 0700
    data, sock = os.path.join(root, "data"), root
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    as_pg = ["runuser", "-u", "postgres", "--"]
    subprocess.run([*as_pg, initdb, "-D", data, "-A", "trust", "-U", "postgres", "--no-sync",
                    "-E", "UTF8"], check=True, capture_output=True, timeout=120)
    hba = os.path.join(data, "pg_hba.conf")
    with open(hba) as f:
        rules = f.read()
    with open(hba, "w") as f:
        f.write("local all secured scram-sha-256\n" + rules)
    subprocess.run([*as_pg, pg_ctl, "-D", data, "-w", "-t", "60", "-l",
                    os.path.join(root, "log"), "-o",
                    f"-k {sock} -c listen_addresses='' -p {port} -F -c max_connections=100",
                    "start"], check=True, capture_output=True, timeout=120)
    return PgCluster(root, sock, port)


def stop_pg_cluster(cluster: PgCluster) -> None:
    import shutil

    pg_ctl = pg_binary("pg_ctl")
    subprocess.run(["runuser", "-u", "postgres", "--", str(pg_ctl), "-D",
                    os.path.join(cluster.root, "data"), "-m", "immediate", "stop"],
                   capture_output=True, timeout=60)
    shutil.rmtree(cluster.root, ignore_errors=True)


# --- store tests: one run's configuration, environment and trials ------------------------------

STORE_CONFIG = {"probe": "/bin/true", "loads": ["none", "readers:1:seq"], "trials": 2, "seed": 5}
STORE_ENV = {"kernel": "6.18", "cpus": 2}


def store_trial(i: int) -> dict:
    """Trial i: every status, exit code and signal case within three trials."""
    return {
        "round": i, "warmup": int(i == 0), "status": ["ok", "failed", "timeout"][i % 3],
        "cold": 1, "wall_s": 0.125 + i, "user_s": 0.01 * i, "sys_s": 0.02, "max_rss_kb": 1000 + i,
        "in_blocks": 8 * i, "out_blocks": 0, "exit_code": i % 2, "signal": None if i else 9,
        "load_read_bps": 1.5e8, "load_write_bps": 0.0, "started_at": 1000.5 + i,
        "ended_at": 1001.25 + i, "extra": {"limit_s": 60.0, "nested": [1, "two"]},
    }


def proc_event_datagram(what: int, data: bytes, seq: int = 7, cpu: int = 1, idx: int = 1
                        ) -> bytes:
    """One process event as the kernel's connector sends it (nlmsghdr, cn_msg, proc_event)."""
    body = struct.pack("=IIQ", what, cpu, 123) + data
    msg = struct.pack("=IIIIHH", idx, 1, seq, 0, len(body), 0) + body
    return struct.pack("=IHHII", 16 + len(msg), 3, 0, 0, 0) + msg


def _queued(sock: socket.socket) -> Iterator[proc_events.Event]:
    """Every event queued on `sock` now (without waiting)."""
    buf = bytearray(65536)
    while True:
        try:
            n = sock.recv_into(buf, 0, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return
        yield from proc_events.parse(buf, n)


def unsubscribed_by_close(fileno: int, close: Callable[[], object]) -> bool:
    """Whether the kernel stopped sending a listener events once `close()` was called:
    a second descriptor on the same socket keeps it open past the close, and a process
    started after it must bring no event there (the kernel drops every event for a socket
    that said IGNORE, and counts one listener less). The same process started before the
    close is seen there, so the descriptor does see what the socket is sent."""
    twin = socket.socket(fileno=os.dup(fileno))
    try:
        before = subprocess.Popen(["true"])
        before.wait()
        assert any(e.tgid == before.pid for e in _queued(twin)), "the twin sees events"
        close()
        list(_queued(twin))
        after = subprocess.Popen(["true"])
        after.wait()  # its fork, exec and exit were sent as they happened
        return not any(after.pid in (e.tgid, e.ptgid) for e in _queued(twin))
    finally:
        twin.close()


# -- the Debian package ----------------------------------------------------------------------

DEB_BUILD_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"  # Debian's tools, as scripts/build-deb uses


def build_wheel(checkout: Path, out: Path) -> Path:
    """The wheel of checkout's tracked files as they are now, built as a user's pip builds
    it (not a copy of src/), from a scratch copy: setuptools leaves build/ and an egg-info
    in the tree it builds, and the checkout must not change while the guest part builds
    its wheel beside the host part's check that a .deb build leaves it clean."""
    import shutil
    import tempfile

    files = subprocess.run(["git", "-C", str(checkout), "ls-files", "-z"], check=True,
                           capture_output=True, timeout=TIMEOUT).stdout.decode().split("\0")
    with tempfile.TemporaryDirectory(prefix="bb-wheel-") as scratch:
        for name in filter(None, files):
            src, dst = checkout / name, Path(scratch, name)
            if src.exists():  # a tracked file deleted in the worktree is not built
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dst)
        subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                        "--no-build-isolation", "-w", str(out), scratch], check=True,
                       timeout=300, cwd=out)
    (wheel,) = out.glob("backburner-*.whl")
    return wheel


def checkout_status(checkout: Path) -> list[str]:
    """The checkout's changed and ignored files, less the bytecode caches that tests running
    beside the caller write (an isolated `python -I` writes them wherever it may)."""
    out = subprocess.run(["git", "-C", str(checkout), "status", "--porcelain", "--ignored"],
                         check=True, capture_output=True, text=True, timeout=TIMEOUT).stdout
    return [ln for ln in out.splitlines() if not ln.endswith("/__pycache__/")]


def build_deb(checkout: Path, out: Path) -> Path:
    """The .deb of checkout's tracked files as they are now, built by scripts/build-deb
    into out (from a scratch copy: checked here, the checkout is not written to), with this
    interpreter as the man page and completion generator where Debian 12 lacks them.

    Under scripts/test (BACKBURNER_TEST_SHARED: a private directory of the run's) the .deb
    is built once, by whichever of the host part (test_debian) and the guest part
    (test_guest_deb) asks first, and copied for the other: a build costs a minute of both
    CPUs."""
    import fcntl
    import shutil

    shared = os.environ.get("BACKBURNER_TEST_SHARED")
    if not shared:
        return _build_deb(checkout, out)
    with open(os.path.join(shared, "deb.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        cache = Path(shared, "deb")
        if not cache.is_dir():
            made = Path(shared, "deb.building")
            shutil.rmtree(made, ignore_errors=True)
            made.mkdir()
            _build_deb(checkout, made)
            made.rename(cache)
        out.mkdir(parents=True, exist_ok=True)
        for made in cache.iterdir():  # the .deb, and the .changes lintian reads
            shutil.copy2(made, out)
        (deb,) = out.glob("backburner_*_all.deb")
        return deb


def _build_deb(checkout: Path, out: Path) -> Path:
    before = checkout_status(checkout)
    done = subprocess.run([str(checkout / "scripts/build-deb"), str(out)], capture_output=True,
                          text=True, timeout=600, env={**os.environ, "PYTHON": sys.executable})
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert checkout_status(checkout) == before  # built from a copy
    (deb,) = out.glob("backburner_*_all.deb")
    return deb


# --- bench: an executor that touches nothing ------------------------------------------------

BULK = {"unit": "bytes", "units": 1e6, "seconds": 1.0}
Times = Callable[[Cell], tuple[str, float]]


def usual(cell: Cell) -> tuple[str, float]:
    return "ok", 0.1 if cell.unloaded else 0.4


def scripted_outcome(status: str, wall: float) -> spawn.Outcome:
    code, sig = {"ok": (0, None), "failed": (3, None), "timeout": (None, 9)}[status]
    return spawn.Outcome(pid=4242, status=9 if sig else code << 8, exit_code=code, signal=sig,
                         core_dumped=False, wall_s=wall, user_s=0.01, sys_s=0.02,
                         max_rss_kb=2048, in_blocks=16, out_blocks=0, started_at=0.0,
                         launcher_rss_kb=1024, nvcsw=5, nivcsw=1, majflt=2)


class Scripted:
    """An executor that touches nothing: it writes down every call, in order, and answers
    each probe start from `times` (status and seconds; a timeout lasts the limit given)."""

    def __init__(self, times: Times = usual, *, weight_raising: dict[str, float] | None = None,
                 interrupt_at: int | None = None, dies_after: dict[int, str] | None = None,
                 ends_while_settling: str | None = None,
                 load_fails: dict[int, list[str]] | None = None,
                 prepared: Callable[[Cell], StepResult | None] = lambda _c: None) -> None:
        self.times = times
        self.prepared = prepared
        self.weight_raising = weight_raising or {}
        self.interrupt_at = interrupt_at  # the n-th probe start (from 0) is ^C'd
        self.dies_after = dies_after or {}  # the load that ends after the n-th probe start
        self.ends_while_settling = ends_while_settling
        self.load_fails = load_fails or {}  # the n-th probe start's load fails, saying this
        self._failed: dict[str, list[str]] = {}
        self.calls: list[tuple[Any, ...]] = []
        self.running: set[str] = set()
        self.measured = 0

    @contextmanager
    def open(self) -> Iterator[dict[str, Any]]:
        self.calls.append(("open",))
        try:
            yield {"name": "scripted0"}
        finally:
            self.calls.append(("close",))

    def check_alive(self) -> None:
        pass

    def prepare_trial(self, cell: Cell) -> StepResult | None:
        """--prepare: as `prepared` says for the cell (None: no --prepare)."""
        self.calls.append(("prepare", cell))
        return self.prepared(cell)

    def use_scheduler(self, scheduler: str) -> None:
        self.calls.append(("scheduler", scheduler))

    def drop_caches(self) -> None:
        self.calls.append(("drop",))

    def weight_raising_s(self, scheduler: str) -> float:
        return self.weight_raising.get(scheduler, 0.0)

    def start_load(self, cell: Cell) -> None:
        self.calls.append(("start", cell))
        self.running.add(cell.load)

    def settle(self, load: str, seconds: float) -> None:
        self.calls.append(("settle", load, seconds))
        if load == self.ends_while_settling:
            raise SystemStateError(f"load {load!r} ended during settling: gone")

    def load_alive(self, load: str) -> bool:
        return load in self.running

    def stop_load(self, load: str) -> dict[str, Any]:
        self.calls.append(("stop", load))
        self.running.discard(load)
        failure = self._failed.pop(load, None)
        return {**BULK, "failure": failure} if failure else dict(BULK)

    def measure(self, cell: Cell, limit_s: float) -> Measurement:
        self.calls.append(("measure", cell, limit_s))
        n, self.measured = self.measured, self.measured + 1
        if n == self.interrupt_at:
            raise KeyboardInterrupt
        if n in self.dies_after:
            self.running.discard(self.dies_after[n])
        if n in self.load_fails:
            self.running.discard(cell.load)
            self._failed[cell.load] = self.load_fails[n]
        status, wall = self.times(cell)
        wall = limit_s if status == "timeout" else wall
        extra = {"prepare": {"status": "ok"}} if cell.prepare != "none" else {}
        tail = ["the reason it failed"] if status != "ok" else []
        return Measurement(ProbeResult(status, scripted_outcome(status, wall), wall), 0.5,
                           (16 * 512 + 1000, 0), extra, tail)

    def measures(self) -> list[tuple[Cell, float]]:
        return [(c[1], c[2]) for c in self.calls if c[0] == "measure"]


def rules_dir(tmp_path: Path, text: str, name: str = "test.toml") -> Path:
    """A govern rules directory the daemon accepts: root's, 0755, its file 0644."""
    d = tmp_path / "rules"
    d.mkdir(mode=0o755, exist_ok=True)
    d.chmod(0o755)
    (d / name).write_text(text)
    (d / name).chmod(0o644)
    return d


#: Where a local user could leave modules for root's interpreter: our package's name and
#: standard-library names our helpers import.
PLANTED = ("backburner/__init__.py", "json.py", "argparse.py", "socket.py", "struct.py",
           "logging/__init__.py", "dataclasses.py")


def plant_modules(where: Path, marker: Path) -> None:
    """A local user's modules in `where`, each leaving its name in `marker` when imported
    (and ending the interpreter there)."""
    for rel in PLANTED:
        path = where / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"open({str(marker)!r}, 'a').write({rel!r} + '\\n')\n"
                        "raise SystemExit(0)\n")


@contextmanager
def loop_ext4(where: Path, size: int = 64 << 20) -> Iterator[tuple[str, Path]]:
    """(loop device, mount point) of a fresh ext4 made and mounted through `system` (so its
    undo is the code under test's own), all of it gone when the block ends."""
    image = where / "disk.img"
    mnt = where / "mnt"
    mnt.mkdir()
    with system.Transaction("test-bed") as tx:
        tx.apply(system.MadeFile(str(image), size))
        loop = tx.apply(system.LoopDevice(str(image)))
        tx.apply(system.Filesystem(loop, str(image), "ext4", ["-q", "-F"]))
        tx.apply(system.Mount(loop, str(mnt), "ext4"))
        yield loop, mnt


class Daemon:
    """`backburner govern run` as a subprocess, ready once its ready file exists."""

    def __init__(self, tmp_path: Path, rules: Path, *extra: str) -> None:
        ready_dir = tmp_path / f"ready-{uuid.uuid4().hex[:6]}"
        ready_dir.mkdir(mode=0o700)
        self.ready = ready_dir / "ready"
        self.proc = subprocess.Popen([*BB, "govern", "run", "--rules", str(rules),
                                      "--no-defaults", "--ready-file", str(self.ready),
                                      *extra], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        wait_for(lambda: self.ready.exists() or self.proc.poll() is not None,
                 what="the daemon to be ready")
        assert self.ready.exists(), self.finish()[1]
        assert int(self.ready.read_text()) == self.proc.pid

    def finish(self, sig: int = signal.SIGTERM) -> tuple[int, str]:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            _, err = self.proc.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        return self.proc.returncode, err.decode(errors="replace")
