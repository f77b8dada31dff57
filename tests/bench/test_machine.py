"""bench.machine, the real executor, under the runner on real testbeds (root): every slot
stored, the system left exactly as it was (after success, after an exception mid-run), and
resume after a SIGKILL. The runner's rules themselves are tested in test_runner.py against
a scripted executor."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers import BB, TIMEOUT, bb

from backburner import system
from backburner.bench import config, devices, loads, runner
from backburner.bench.executor import Measurement
from backburner.bench.machine import MachineExecutor
from backburner.report import caveats
from backburner.report.data import load as load_report
from backburner.store import Store
from backburner.store.cell import Cell

pytestmark = pytest.mark.root

CGROUP_ROOT = Path("/sys/fs/cgroup")


# --- what "nothing left behind" means, for one bench process --------------------------------


def _work(state_dir: Path) -> Path:
    return state_dir / "work"  # system.work_root() under the test's private state dir


def _testbeds(state_dir: Path) -> list[Path]:
    return sorted(_work(state_dir).glob("testbed-*"))


def _loop_backings() -> list[str]:
    out = []
    for dev in Path("/sys/block").glob("loop*"):
        try:
            out.append((dev / "loop" / "backing_file").read_text().strip())
        except OSError:
            pass
    return out


def _mount_targets() -> list[str]:
    return [ln.split()[1] for ln in Path("/proc/self/mounts").read_text().splitlines()]


def _procs_mentioning(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if text.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            pass
    return found


def _own_fds_under(path: Path) -> list[str]:
    """Our own open descriptors on the device under test: one would keep it from unmounting."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(f"{path}/"):
            found.append(target)
    return found


def _bench_cgroups(pid: int) -> list[Path]:
    return [p for hier in CGROUP_ROOT.iterdir() if hier.is_dir()
            for p in (hier / "backburner").glob(f"bench-{pid}-*")]


def _journals(state_dir: Path) -> list[Path]:
    jdir = state_dir / "journal"
    return sorted(jdir.iterdir()) if jdir.is_dir() else []


def assert_nothing_left(pid: int, state_dir: Path) -> None:
    """Nothing of bench process `pid` remains: loop, mounts, files, cgroups, journal, loads."""
    work = str(_work(state_dir))
    assert [b for b in _loop_backings() if b.startswith(work)] == []
    losetup = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    assert work not in losetup, losetup
    assert [m for m in _mount_targets() if m.startswith(work)] == []
    assert not os.path.isdir(work) or os.listdir(work) == []
    assert _bench_cgroups(pid) == []
    assert _journals(state_dir) == []
    assert _procs_mentioning(work) == []  # no fio (or anything) still using the testbed


# --- a tiny bench on a testbed -----------------------------------------------------------------


@pytest.fixture
def tiny_fio(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loads, "FIO_FILE_SIZE", "32m")


def _config(**kw: object) -> config.BenchConfig:
    base: dict = dict(probes=["/bin/true"], loads=["none", "readers:1:seq"],
                      policies=["default", "background"], schedulers=["mq-deadline", "bfq"],
                      device="testbed:1G", trials=2, settle_s=0.3, timeout_s=30, seed=11)
    base.update(kw)
    return config.BenchConfig(**base)  # type: ignore[arg-type]


def _start(cfg: config.BenchConfig, db: str, rec: Recorder, **kw: object
           ) -> tuple[Store, int]:
    return runner.start(config.plan(cfg), db, rec.report, rec.warn, **kw)  # type: ignore


class Recorder:
    def __init__(self) -> None:
        self.progress: list[tuple[int, int, str]] = []
        self.warnings: list[str] = []

    def report(self, p: runner.Progress) -> None:
        self.progress.append((p.done, p.total, p.cell))

    def warn(self, msg: str) -> None:
        self.warnings.append(msg)


class Spying(MachineExecutor):
    """The real executor, with a look at the machine just before each probe starts and at
    each cache drop."""

    def __init__(self, plan: config.Plan, warn: Callable[[str], None],
                 before_probe: Callable[[], None] = lambda: None) -> None:
        super().__init__(plan, warn)
        self.before_probe = before_probe
        self.drops = 0

    def drop_caches(self) -> None:
        self.drops += 1
        super().drop_caches()

    def measure(self, cell: Cell, limit_s: float) -> Measurement:
        self.before_probe()
        return super().measure(cell, limit_s)


def test_tiny_bench_on_a_testbed(tmp_path: Path, state_dir: Path, tiny_fio: None) -> None:
    cfg = _config()
    db = str(tmp_path / "r.db")
    rec = Recorder()
    plan = config.plan(cfg)
    machine = Spying(plan, rec.warn)
    store, run_id = runner.start(plan, db, rec.report, rec.warn, command="bb test",
                                 executor=machine)
    store.close()
    assert machine.drops == len(plan.cells) * cfg.trials  # not before the warm-ups
    assert_nothing_left(os.getpid(), state_dir)

    s = Store.open(db, readonly=True)
    (run,) = s.runs()
    assert run.id == run_id and run.command == "bb test" and run.finished_at is not None
    assert config.BenchConfig.from_dict(run.config) == cfg
    dev = run.environment["device"]
    assert dev["name"].startswith("loop") and dev["filesystem"] == "ext4"
    backing = Path(dev["loop_backing_file"])
    assert backing.name == "disk.img" and backing.parent.parent == _work(state_dir)
    assert backing.parent.name.startswith("testbed-")
    assert dev["size_bytes"] == 1 << 30 and dev["rotational"] == "1"
    assert {"mq-deadline", "bfq"} <= set(dev["schedulers"])
    assert dev["probe_files_copied"] >= 2
    assert run.environment["kernel"] == os.uname().release
    # which levers acted, per scheduler and policy (this host: cgroup v1, blkio)
    bfq = {"acted": ["io", "io-weight"], "ignored": [], "weight": "blkio.bfq.weight",
           "writeback": False}
    assert dev["levers"]["bfq"]["background"] == bfq
    deadline = dev["levers"]["mq-deadline"]["background"]
    # mq-deadline: the IO class acts where it has priorities; a weight never does
    assert deadline["ignored"][-1:] == ["io-weight"] and deadline["weight"] is None
    assert dev["levers"]["bfq"]["default"] == {"acted": [], "ignored": [], "weight": None,
                                               "writeback": False}
    said = caveats.levers_text(load_report(db))
    assert "levers under bfq on the device under test: background: the IO class and the " \
           "IO weight (blkio.bfq.weight) acted, not on buffered writeback" in said
    assert any(line.startswith("levers under mq-deadline") and "the IO weight did nothing"
               in line for line in said)

    cells = list(plan.cells)
    stored = {c.key: c for c in s.cells(run_id)}
    assert set(stored) == {c.key for c in cells} and len(cells) == 6
    trials = s.trials(include_warmup=True)
    assert len(trials) == len(cells) * (cfg.trials + 1)
    by_id = {c.id: c for c in stored.values()}
    # stored in exactly the seeded slot order, with the right rounds and warm-up flags
    slots = plan.slots()
    assert [(by_id[t["cell_id"]].key, t["round"]) for t in trials] == \
        [(sl.cell.key, sl.round) for sl in slots]
    for t in trials:
        # the warm-up runs warm (the not-cold reference); counted rounds are cold
        assert t["warmup"] == int(t["round"] == 0) and t["cold"] == int(t["round"] > 0)
        assert t["status"] == "ok", t
        assert 0 < t["wall_s"] < 5 and t["exit_code"] == 0 and t["signal"] is None
        assert t["started_at"] <= t["ended_at"]
        assert t["load_read_bps"] >= 0 and t["load_write_bps"] >= 0
        assert t["extra"]["limit_s"] > 0
    assert Counter(by_id[t["cell_id"]].key for t in trials) == {c.key: 3 for c in cells}
    assert len(s.trials()) == len(cells) * cfg.trials  # warm-ups excluded by default
    # loaded cells got the abort limit from their scheduler's unloaded median
    for t in trials:
        if by_id[t["cell_id"]].cell.load == "none":
            assert t["extra"]["limit_s"] == cfg.timeout_s
        elif t["round"] > 0 and _earlier_cold_unloaded(trials, t, by_id):
            # max(1 s, 30 × a few ms) from cold unloaded trials, never above the timeout
            assert 1.0 <= t["extra"]["limit_s"] < cfg.timeout_s
        else:  # no cold unloaded time yet (warm warm-ups do not set cold limits)
            assert t["extra"]["limit_s"] == cfg.timeout_s
    assert rec.progress[-1][:2] == (len(slots), len(slots))


def _earlier_cold_unloaded(trials: list[dict], t: dict, by_id: dict) -> bool:
    sched = by_id[t["cell_id"]].cell.scheduler
    return any(u["id"] < t["id"] and u["cold"] and by_id[u["cell_id"]].cell.load == "none"
               and by_id[u["cell_id"]].cell.scheduler == sched for u in trials)


def test_no_thread_runs_while_probes_are_spawned(tmp_path: Path, state_dir: Path) -> None:
    """With the real progress bar drawing to a terminal, no extra thread exists whenever a
    probe is launched (spawn forks and runs a pre-exec hook)."""
    import io

    from rich.console import Console

    from backburner.bench import ui

    seen: list[int] = []
    cfg = _config(loads=["none"], policies=["default"], schedulers=["bfq"], trials=1,
                  device="testbed:256M")
    plan = config.plan(cfg)
    warn = Recorder().warn
    machine = Spying(plan, warn, lambda: seen.append(threading.active_count()))
    console = Console(file=io.StringIO(), force_terminal=True, width=120)
    before = threading.active_count()
    with ui.progress_bar(console) as reporter:
        runner.start(plan, str(tmp_path / "r.db"), reporter, warn, executor=machine)[0].close()
    assert seen and set(seen) == {before}, (before, seen)
    assert_nothing_left(os.getpid(), state_dir)


# --- a device given as a path: its scheduler is put back ---------------------------------


@pytest.fixture
def own_disk(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A loop device with ext4 mounted at tmp/mnt, its scheduler set to none first.
    Yields (mountpoint, queue dir); detached after."""
    image = tmp_path / "own.img"
    with open(image, "wb") as f:
        f.truncate(256 << 20)
    dev = subprocess.run(["losetup", "--find", "--show", str(image)], capture_output=True,
                         text=True, timeout=TIMEOUT, check=True).stdout.strip()
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    queue = Path("/sys/block", os.path.basename(dev), "queue")
    try:
        subprocess.run(["mkfs.ext4", "-q", "-F", dev], check=True, timeout=120,
                       capture_output=True)
        subprocess.run(["mount", dev, str(mnt)], check=True, timeout=TIMEOUT)
        (queue / "scheduler").write_text("none")
        assert system.selected((queue / "scheduler").read_text()) == "none"
        yield mnt, queue
    finally:
        unmounted = subprocess.run(["umount", str(mnt)], timeout=TIMEOUT).returncode == 0
        subprocess.run(["losetup", "-d", dev], timeout=TIMEOUT, check=True)
        assert unmounted, f"{mnt} stayed busy after the bench"


def _sched(queue: Path) -> str:
    return system.selected((queue / "scheduler").read_text())


def _path_config(mnt: Path, **kw: object) -> config.BenchConfig:
    return _config(device=str(mnt), schedulers=["bfq", "mq-deadline"],
                   policies=["default"], trials=1, **kw)


def test_path_device_scheduler_restored(own_disk: tuple[Path, Path], tmp_path: Path,
                                        state_dir: Path, tiny_fio: None) -> None:
    mnt, queue = own_disk
    rec = Recorder()
    seen: list[str] = []
    plan = config.plan(_path_config(mnt))
    db = str(tmp_path / "r.db")
    machine = Spying(plan, rec.warn, lambda: seen.append(_sched(queue)))
    store, run_id = runner.start(plan, db, rec.report, rec.warn, executor=machine)
    store.close()
    assert {"bfq", "mq-deadline"} <= set(seen)  # it really switched
    assert _sched(queue) == "none"
    assert sorted(os.listdir(mnt)) == ["lost+found"]  # its private load dir is gone
    assert _own_fds_under(mnt) == []  # nothing keeps the user's filesystem busy
    assert _journals(state_dir) == []
    assert _bench_cgroups(os.getpid()) == []
    s = Store.open(db, readonly=True)
    assert len(s.trials(include_warmup=True)) == 4 * 2  # 2 schedulers × (none, 1 load) × 2
    assert s.runs()[0].environment["device"]["name"] == queue.parent.name
    # /bin/true lives on the root disk, not on the device under test: the user is told
    assert any("not on the device under test" in w for w in rec.warnings), rec.warnings


def test_path_device_scheduler_restored_after_interrupt(
        own_disk: tuple[Path, Path], tmp_path: Path, state_dir: Path, tiny_fio: None) -> None:
    mnt, queue = own_disk
    calls = []

    def flaky() -> None:
        calls.append(_sched(queue))
        if len(calls) == 2:  # in the second trial's probe
            raise KeyboardInterrupt

    db = str(tmp_path / "r.db")
    rec = Recorder()
    plan = config.plan(_path_config(mnt, seed=3))
    with pytest.raises(KeyboardInterrupt):
        runner.start(plan, db, rec.report, rec.warn, executor=Spying(plan, rec.warn, flaky))
    assert calls[1] in ("bfq", "mq-deadline")  # interrupted with a scheduler switched
    assert _sched(queue) == "none"
    assert sorted(os.listdir(mnt)) == ["lost+found"]
    assert _journals(state_dir) == []
    assert _procs_mentioning(str(mnt)) == []
    assert _own_fds_under(mnt) == []
    s = Store.open(db, readonly=True)  # the one finished trial is kept; the run is unfinished
    assert len(s.trials(include_warmup=True)) == 1
    assert s.runs()[0].finished_at is None


def test_exception_before_any_trial_leaves_no_database(tmp_path: Path, state_dir: Path,
                                                       tiny_fio: None,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A scheduler the device does not offer is found only once the testbed exists: all of
    it is undone, and no database is left."""
    db = tmp_path / "r.db"
    rec = Recorder()
    from backburner.base.errors import UnavailableError

    monkeypatch.setattr(devices.Device, "schedulers", lambda self: ["none", "mq-deadline"])
    with pytest.raises(UnavailableError, match="'bfq' is not offered"):
        _start(_config(schedulers=["mq-deadline", "bfq"]), str(db), rec)
    assert not db.exists() and not Path(f"{db}-wal").exists()
    assert_nothing_left(os.getpid(), state_dir)


def test_work_root_shared_with_a_concurrent_run(tmp_path: Path, state_dir: Path) -> None:
    """Another run's testbed appears in the shared work root while we run. Our undo must
    neither fail on it nor touch it."""
    other = _work(state_dir) / "testbed-another-run"
    rec = Recorder()
    cfg = _config(loads=["none"], policies=["default"], schedulers=["bfq"], trials=1,
                  device="testbed:256M")
    plan = config.plan(cfg)
    machine = Spying(plan, rec.warn, lambda: other.mkdir(parents=True, exist_ok=True))
    runner.start(plan, str(tmp_path / "r.db"), rec.report, rec.warn,
                 executor=machine)[0].close()
    assert other.is_dir()
    other.rmdir()
    assert_nothing_left(os.getpid(), state_dir)


# --- resume after SIGKILL, through the CLI ----------------------------------------------------


def _trial_count(db: Path) -> int:
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
        try:
            return int(conn.execute("SELECT count(*) FROM trials").fetchone()[0])
        finally:
            conn.close()
    except sqlite3.Error:
        return 0


def test_resume_after_sigkill(tmp_path: Path, state_dir: Path) -> None:
    db = tmp_path / "r.db"
    args = ["bench", "--probe", "/bin/true", "--load", "readers:1:seq", "--policy",
            "background", "--scheduler", "mq-deadline", "--scheduler", "bfq", "--device",
            "testbed:1G", "--trials", "2", "--settle", "0.3", "--seed", "9", "-o", str(db)]
    log = open(tmp_path / "bench.log", "wb")
    proc = subprocess.Popen([*BB, *args], stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 60
        # killed in the middle of a loaded trial: its fio load must not outlive the bench
        while _trial_count(db) < 3 or not _procs_mentioning(str(_work(state_dir))):
            assert proc.poll() is None, (tmp_path / "bench.log").read_text()
            assert time.monotonic() < deadline, "no loaded trial after 3 trials within 60 s"
            time.sleep(0.02)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(TIMEOUT)
    assert proc.returncode == -signal.SIGKILL
    killed_at = _trial_count(db)
    assert 3 <= killed_at < 12
    assert len(_journals(state_dir)) == 1  # the undo journal outlived its owner
    assert len(_testbeds(state_dir)) == 1

    r = bb("restore")
    assert r.returncode == 0, r.err
    assert "undid" in r.out
    assert_nothing_left(proc.pid, state_dir)

    r = bb("bench", "--resume", str(db), timeout=120)
    assert r.returncode == 0, r.err
    assert (tmp_path / "r.html").is_file()  # the report, next to the database
    assert_nothing_left(r.pid, state_dir)

    s = Store.open(str(db), readonly=True)
    (run,) = s.runs()
    assert run.finished_at is not None
    cells = {c.id: c for c in s.cells(run.id)}
    assert len(cells) == 4  # 2 schedulers × (none, readers:1:seq × background)
    keys = Counter((cells[t["cell_id"]].key, t["round"]) for t in s.trials(include_warmup=True))
    assert set(keys.values()) == {1}  # none duplicated
    assert set(keys) == {(c.key, rnd) for c in cells.values() for rnd in (0, 1, 2)}
    assert sum(keys.values()) == len(cells) * (2 + 1)
    assert all(t["status"] == "ok" for t in s.trials(include_warmup=True))


def test_resume_of_a_finished_run_adds_nothing(tmp_path: Path, state_dir: Path,
                                               tiny_fio: None) -> None:
    """Resuming a complete run adds nothing (and sets up nothing that is left behind)."""
    db = str(tmp_path / "r.db")
    rec = Recorder()
    cfg = _config(loads=["none"], policies=["default"], trials=1)
    _start(cfg, db, rec)[0].close()
    before = Store.open(db, readonly=True).trials(include_warmup=True)
    store, _ = runner.resume(db, rec.report, rec.warn)
    store.close()
    after = Store.open(db, readonly=True).trials(include_warmup=True)
    assert after == before and len(after) == 2 * 2
    assert_nothing_left(os.getpid(), state_dir)
