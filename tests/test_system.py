"""system: changes on a real loop device and cgroupfs, undone at the end of a Transaction,
on an exception, on SIGINT/SIGTERM, and by `backburner restore` after a SIGKILL."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers import TIMEOUT, bb, one_line_error

from backburner import system
from backburner.base.errors import BackburnerError, SystemStateError
from backburner.kernel import procfs

PY = sys.executable
pytestmark = pytest.mark.timeout(60)  # a hang fails fast instead of at 300 s


@pytest.fixture
def loop_queue(tmp_path: Path) -> Iterator[Path]:
    """/sys/block/loopN/queue of a loop device over a small sparse file, detached after."""
    image = tmp_path / "disk.img"
    with open(image, "wb") as f:
        f.truncate(32 << 20)
    dev = subprocess.run(["losetup", "--find", "--show", str(image)], capture_output=True,
                         text=True, timeout=TIMEOUT, check=True).stdout.strip()
    queue = Path("/sys/block", os.path.basename(dev), "queue")
    before = {name: system.selected((queue / name).read_text())
              for name in ("scheduler", "rotational")}
    if before["scheduler"] == "bfq":  # a loop device keeps its queue from its last user
        (queue / "scheduler").write_text("none")
    try:
        yield queue
    finally:
        for name, value in before.items():  # the queue outlives the attachment
            if system.selected((queue / name).read_text()) != value:
                (queue / name).write_text(value)
        subprocess.run(["losetup", "-d", dev], timeout=TIMEOUT, check=True)


def _sched(queue: Path) -> str:
    return system.selected((queue / "scheduler").read_text())


def _rot(queue: Path) -> str:
    return (queue / "rotational").read_text().strip()


def _journals(state_dir: Path) -> list[Path]:
    jdir = state_dir / "journal"
    return sorted(jdir.iterdir()) if jdir.is_dir() else []


def test_selected() -> None:
    assert system.selected("none [mq-deadline] kyber bfq\n") == "mq-deadline"
    assert system.selected(" 1\n") == "1"


# --- Transaction on a real device -----------------------------------------------------------


@pytest.mark.root
def test_sysfs_value_reads_the_selected_scheduler(loop_queue: Path) -> None:
    text = (loop_queue / "scheduler").read_text()
    assert system.SysfsValue(str(loop_queue / "scheduler"), "bfq").read() == \
        text.split("[")[1].split("]")[0]


@pytest.mark.root
def test_transaction_restores_after_block(loop_queue: Path, state_dir: Path) -> None:
    before = _sched(loop_queue)
    assert before != "bfq"
    with system.Transaction("test") as tx:
        tx.apply(system.SysfsValue(str(loop_queue / "scheduler"), "bfq"))
        assert _sched(loop_queue) == "bfq"
        assert len(_journals(state_dir)) == 1
    assert _sched(loop_queue) == before
    assert _journals(state_dir) == []


@pytest.mark.root
def test_transaction_restores_after_exception(loop_queue: Path, state_dir: Path) -> None:
    before = _sched(loop_queue)
    with pytest.raises(ZeroDivisionError), system.Transaction("test") as tx:
        tx.apply(system.SysfsValue(str(loop_queue / "scheduler"), "bfq"))
        assert _sched(loop_queue) == "bfq"
        _ = 1 / 0
    assert _sched(loop_queue) == before
    assert _journals(state_dir) == []


@pytest.mark.root
def test_failed_apply_is_undone_and_reported(loop_queue: Path, state_dir: Path) -> None:
    before = _sched(loop_queue)
    with pytest.raises(SystemStateError, match="no-such-scheduler"), \
            system.Transaction("test") as tx:
        tx.apply(system.SysfsValue(str(loop_queue / "scheduler"), "bfq"))
        tx.apply(system.SysfsValue(str(loop_queue / "scheduler"), "no-such-scheduler"))
    assert _sched(loop_queue) == before
    assert _journals(state_dir) == []


# A process that holds a transaction: scheduler, rotational, optionally a cgroup, a mkdir.
HOLDER = r"""
import signal, sys, time
from backburner.base import interrupts
from backburner import system
signal.signal(signal.SIGINT, signal.default_int_handler)  # even if started with SIGINT ignored
interrupts.install()
queue, rotational, cgroup, made = sys.argv[1:5]
try:
    with system.Transaction("test") as tx:
        if queue:
            tx.apply(system.SysfsValue(queue + "/scheduler", "bfq"))
            tx.apply(system.SysfsValue(queue + "/rotational", rotational))
        if cgroup:
            tx.apply(system.CgroupDir(cgroup, {"cpu.shares": "50"}))
        for path in made.split(","):
            tx.apply(system.MadeDir(path))
        print("ready", flush=True)
        time.sleep(30)
except KeyboardInterrupt:
    sys.exit(130)
except interrupts.Terminated as term:
    sys.exit(128 + term.signum)
"""


def _hold(queue: Path | None = None, rotational: str = "", cgroup: Path | None = None,
          made: list[Path] = ()) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [PY, "-c", HOLDER, str(queue or ""), rotational, str(cgroup or ""),
         ",".join(map(str, made))],
        stdout=subprocess.PIPE,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if line != b"ready\n":
        proc.kill()
        proc.wait(TIMEOUT)
        raise AssertionError(f"holder failed: {line!r}")
    return proc


def _other(value: str) -> str:
    return "0" if value == "1" else "1"


@pytest.mark.root
@pytest.mark.parametrize("sig, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)],
                         ids=["SIGINT", "SIGTERM"])
def test_signal_to_holder_restores(loop_queue: Path, state_dir: Path, tmp_path: Path,
                                   sig: int, status: int) -> None:
    sched, rot = _sched(loop_queue), _rot(loop_queue)
    made = tmp_path / "made"
    with _hold(loop_queue, _other(rot), made=[made]) as proc:
        assert (_sched(loop_queue), _rot(loop_queue)) == ("bfq", _other(rot))
        assert made.is_dir()
        proc.send_signal(sig)
        proc.wait(TIMEOUT)
    assert proc.returncode == status
    assert (_sched(loop_queue), _rot(loop_queue)) == (sched, rot)
    assert not made.exists()
    assert _journals(state_dir) == []


STUBBORN = r"""
import sys, time
from backburner.base import interrupts
from backburner import spawn, system
interrupts.install()
try:
    with system.Transaction("test") as tx:
        tx.apply(system.MadeDir(sys.argv[1]))
        spawn.launch(["sh", "-c", "trap '' TERM; echo up; sleep 30"], new_group=True)
        print("ready", flush=True)
        time.sleep(30)
except KeyboardInterrupt:
    sys.exit(130)
"""


@pytest.mark.root
def test_a_second_interrupt_while_helpers_stop_does_not_skip_the_undo(
        state_dir: Path, tmp_path: Path) -> None:
    """^C, then ^C again while a helper that ignores SIGTERM is given its grace period:
    the helper is still stopped and the changes still undone."""
    made = tmp_path / "made"
    proc = subprocess.Popen([PY, "-c", STUBBORN, str(made)], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    seen = b""  # the helper and the script write to one pipe: their lines may interleave
    while not {b"up", b"ready"} <= set(seen.replace(b"up", b" up ").split()):
        chunk = os.read(proc.stdout.fileno(), 100)
        assert chunk, seen
        seen += chunk
    assert made.is_dir()
    proc.send_signal(signal.SIGINT)
    time.sleep(1.0)  # inside the helper's grace period (it ignores SIGTERM)
    proc.send_signal(signal.SIGINT)
    proc.wait(TIMEOUT)
    assert proc.returncode == 130
    assert not made.exists()
    assert _journals(state_dir) == []


def _cpu_mount() -> Path:
    for line in Path("/proc/self/mounts").read_text().splitlines():
        _, mnt, fstype, opts = line.split()[:4]
        if fstype == "cgroup" and "cpu" in opts.split(","):
            return Path(mnt)
    raise AssertionError("no cgroup v1 cpu hierarchy")


@pytest.fixture
def test_cgroup() -> Iterator[Path]:
    path = _cpu_mount() / f"bb-test-{uuid.uuid4().hex[:8]}"
    try:
        yield path
    finally:
        if path.exists():
            path.rmdir()


@pytest.mark.root
def test_sigkill_then_restore(loop_queue: Path, state_dir: Path, tmp_path: Path,
                              test_cgroup: Path) -> None:
    """THE KILL-AND-RESTORE TEST: nothing undoes a SIGKILL but the journal."""
    sched, rot = _sched(loop_queue), _rot(loop_queue)
    made = [tmp_path / "made", tmp_path / "made" / "inner"]
    with _hold(loop_queue, _other(rot), test_cgroup, made) as proc:
        proc.kill()
        proc.wait(TIMEOUT)
    assert proc.returncode == -signal.SIGKILL
    # still changed: nobody has undone anything
    assert (_sched(loop_queue), _rot(loop_queue)) == ("bfq", _other(rot))
    assert (test_cgroup / "cpu.shares").read_text().strip() == "50"
    assert made[1].is_dir()
    assert len(_journals(state_dir)) == 1

    r = bb("restore")
    assert r.returncode == 0, r.err
    assert r.out.count("undid ") == 5, r.out
    assert (_sched(loop_queue), _rot(loop_queue)) == (sched, rot)
    assert not test_cgroup.exists()
    assert not made[0].exists()
    assert _journals(state_dir) == []


def test_torn_last_line_is_still_replayed(state_dir: Path, tmp_path: Path) -> None:
    made = [tmp_path / "a", tmp_path / "b"]
    with _hold(made=made) as proc:
        proc.kill()
        proc.wait(TIMEOUT)
    (journal,) = _journals(state_dir)
    with open(journal, "a") as f:
        f.write('{"event": "intent", "seq": 3, "kind": "mkd')  # the crash cut this write
    undone = system.restore_stale()
    assert len(undone) == 2
    assert not made[0].exists() and not made[1].exists()
    assert _journals(state_dir) == []


def test_journal_of_a_live_owner_is_not_touched(state_dir: Path, tmp_path: Path) -> None:
    made = tmp_path / "mine"
    with _hold(made=[made]) as proc:
        try:
            (journal,) = _journals(state_dir)
            content = journal.read_bytes()
            assert system.restore_stale() == []
            assert list(system.stale_journals()) == []
            assert made.is_dir() and journal.read_bytes() == content
        finally:
            proc.terminate()
            proc.wait(TIMEOUT)
    assert proc.returncode == 143  # and the owner undid its own change
    assert not made.exists()
    assert _journals(state_dir) == []


@pytest.mark.root
def test_restore_of_live_owner_via_cli(state_dir: Path, tmp_path: Path) -> None:
    made = tmp_path / "mine"
    with _hold(made=[made]) as proc:
        try:
            r = bb("restore")
            assert r.returncode == 0, r.err
            assert "nothing to restore" in r.out
            assert made.is_dir() and len(_journals(state_dir)) == 1
        finally:
            proc.terminate()
            proc.wait(TIMEOUT)


@pytest.mark.root
def test_restore_with_nothing_to_do(state_dir: Path) -> None:
    r = bb("restore")
    assert r.returncode == 0
    assert r.out.strip() == "nothing to restore: no journal of an interrupted run was found"
    assert r.stderr == b""


def _stale_journal(jdir: Path, name: str, events: list[dict]) -> Path:
    """A journal whose owner is long gone (PID 1's start time never matches 0)."""
    jdir.mkdir(parents=True, exist_ok=True)
    path = jdir / name
    header = {"event": "begin", "label": "test", "pid": 1, "start": 0, "time": 1.0}
    path.write_text("".join(json.dumps(e) + "\n" for e in [header, *events]))
    return path


def test_a_bad_journal_does_not_block_the_others(state_dir: Path, tmp_path: Path) -> None:
    """One journal that cannot be replayed (a kind from a newer version) must not stop the
    rest from being restored; it is reported and kept for another try."""
    jdir = state_dir / "journal"
    made = tmp_path / "made-by-a-crashed-run"
    made.mkdir()
    good = _stale_journal(jdir, "good.jsonl", [
        {"event": "intent", "seq": 1, "kind": "mkdir", "spec": {"path": str(made)},
         "old": False}])
    bad = _stale_journal(jdir, "bad.jsonl", [
        {"event": "intent", "seq": 1, "kind": "from-the-future", "spec": {}, "old": None}])
    with pytest.raises(SystemStateError) as info:
        system.restore_stale()
    assert "from-the-future" in str(info.value)
    assert not made.exists() and not good.exists()
    assert bad.exists()
    said: list[str] = []
    system.recover(said.append)  # what commands do first: warn, do not fail
    assert any("could not recover" in m for m in said)


def test_restore_replays_newest_journal_first(state_dir: Path, tmp_path: Path) -> None:
    """Two crashed runs changed the same value: the older run's old value is the original,
    so the newer journal must be undone first."""
    value = tmp_path / "value"
    value.write_text("c")
    jdir = state_dir / "journal"
    older = {"event": "intent", "seq": 1, "kind": "sysfs",
             "spec": {"path": str(value), "value": "b"}, "old": "a"}
    newer = {"event": "intent", "seq": 1, "kind": "sysfs",
             "spec": {"path": str(value), "value": "c"}, "old": "b"}
    p_old = _stale_journal(jdir, "z-older.jsonl", [older])
    p_new = _stale_journal(jdir, "a-newer.jsonl", [newer])
    text = p_new.read_text().replace('"time": 1.0', '"time": 2.0')
    p_new.write_text(text)
    system.restore_stale()
    assert value.read_text() == "a"
    assert not p_old.exists() and not p_new.exists()


def test_a_loop_device_still_open_is_not_claimed_detached(
        state_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A detach the kernel cannot finish (someone holds the device) fails the undo, keeps
    the journal, and a later restore completes it once the device is free."""
    monkeypatch.setattr(system.loops, "LOOP_DETACH_WAIT_S", 0.5)
    image = tmp_path / "held.img"
    image.write_bytes(b"\0" * (1 << 20))
    held = None
    with pytest.raises(SystemStateError, match="still attached") as err, \
            system.Transaction("test-held") as tx:
        dev = tx.apply(system.LoopDevice(str(image)))
        held = os.open(dev, os.O_RDONLY)
    assert held is not None and system.loops_backed_by(str(image)) == [dev]
    assert f"PID {os.getpid()} (" in str(err.value) and "has it open" in str(err.value)
    journals = list(system.journal_dir().glob("test-held-*"))
    assert len(journals) == 1
    os.close(held)
    system.undo_journal(system.Journal(journals[0]))
    assert system.loops_backed_by(str(image)) == []


DETACH_WAIT_S = system.loops.LOOP_DETACH_WAIT_S  # the default, before a test shortens it


def _holder_named(tmp_path: Path, name: str,
                  hold: Callable[[system.Transaction, str, Path], subprocess.Popen[bytes]]
                  ) -> str:
    """A transaction with a loop device (ext4 on it) that ``hold`` keeps busy through a
    process it starts (which prints "up" when it does): the undo's error, naming the process
    by PID, is returned; a later restore completes once the process is gone."""
    image, mnt = tmp_path / f"{name}.img", tmp_path / "mnt"
    image.write_bytes(b"\0" * (16 << 20))
    mnt.mkdir()
    child = None
    try:
        with pytest.raises(SystemStateError, match="still attached") as err, \
                system.Transaction(f"test-{name}") as tx:
            dev = tx.apply(system.LoopDevice(str(image)))
            subprocess.run(["mkfs.ext4", "-q", dev], check=True)
            child = hold(tx, dev, mnt)
            assert child.stdout is not None and child.stdout.readline() == b"up\n"
        assert f"PID {child.pid} (sleep" in str(err.value), err.value
    finally:
        if child is not None:
            child.kill()
            child.wait()
    journal = next(system.journal_dir().glob(f"test-{name}-*"))
    # the holder is gone: the kernel lets go of the detached filesystem a moment later, on a
    # busy machine more than the short wait the caller set for the undo that must fail
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(system.loops, "LOOP_DETACH_WAIT_S", DETACH_WAIT_S)
        system.undo_journal(system.Journal(journal))
    assert system.loops_backed_by(str(image)) == []
    return str(err.value)


def test_a_mount_in_another_namespace_is_named_as_the_holder(
        state_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that unshared its mounts keeps its copy of a filesystem, and with it the
    loop device, after we unmount ours: the error names that process."""
    monkeypatch.setattr(system.loops, "LOOP_DETACH_WAIT_S", 0.5)

    def hold(_tx: system.Transaction, dev: str, mnt: Path) -> subprocess.Popen[bytes]:
        return subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                                 f"mount {dev} {mnt} && echo up && exec sleep 60"],
                                stdout=subprocess.PIPE)

    assert f"in its own namespace at {tmp_path / 'mnt'}" in _holder_named(tmp_path, "ns", hold)


def test_a_process_in_a_lazily_unmounted_filesystem_is_named_as_the_holder(
        state_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A process whose working directory is on the filesystem makes the unmount lazy, and
    the detached filesystem then keeps the loop device, though nobody has the device open:
    the error names that process rather than "something"."""
    monkeypatch.setattr(system.loops, "LOOP_DETACH_WAIT_S", 0.5)

    def hold(tx: system.Transaction, dev: str, mnt: Path) -> subprocess.Popen[bytes]:
        tx.apply(system.Mount(dev, str(mnt), "ext4", "nosuid,nodev"))
        return subprocess.Popen(["sh", "-c", "echo up && exec sleep 60"], cwd=mnt,
                                stdout=subprocess.PIPE)

    assert "working directory on a filesystem on it" in _holder_named(tmp_path, "cwd", hold)


def test_a_detach_waits_on_while_the_device_still_does_io(
        state_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A lazily unmounted filesystem writing back through the device is progress, not a
    hang: the wait goes on while the device's write counters move (up to the cap); a
    reader alone does not extend it."""
    monkeypatch.setattr(system.loops, "LOOP_DETACH_WAIT_S", 0.3)
    monkeypatch.setattr(system.loops, "LOOP_DETACH_MAX_S", 1.5)
    ticks = iter(range(10**6))
    real = system.loops.procfs.read_small
    monkeypatch.setattr(system.loops.procfs, "read_small", lambda path, size=65536: (
        f"9 0 {next(ticks)} 0 5 0 {next(ticks)} 0 0 0 0".encode()  # reads and writes move
        if path.endswith("/stat") and "/sys/block/" in path else real(path, size)))
    image = tmp_path / "busy.img"
    image.write_bytes(b"\0" * (1 << 20))
    held = None
    with pytest.raises(SystemStateError, match=r"after [12] s") as err, \
            system.Transaction("test-busy") as tx:
        dev = tx.apply(system.LoopDevice(str(image)))
        held = os.open(dev, os.O_RDONLY)
    assert "has it open" in str(err.value)
    assert held is not None
    os.close(held)
    system.undo_journal(system.Journal(next(system.journal_dir().glob("test-busy-*"))))
    monkeypatch.setattr(system.loops.procfs, "read_small", lambda path, size=65536: (
        f"9 0 {next(ticks)} 0 5 0 7 0 0 0 0".encode()  # only reads move
        if path.endswith("/stat") and "/sys/block/" in path else real(path, size)))
    with pytest.raises(SystemStateError, match=r"after 0 s"), \
            system.Transaction("test-reader") as tx:
        dev = tx.apply(system.LoopDevice(str(image)))
        held = os.open(dev, os.O_RDONLY)
    os.close(held)
    system.undo_journal(system.Journal(next(system.journal_dir().glob("test-reader-*"))))
    assert system.loops_backed_by(str(image)) == []


# --- a journal this version cannot read: a warning, never a crash ---------------------------

def _broken_journal(jdir: Path, case: str, victim: Path) -> Path:
    """A stale journal this backburner cannot (or must not) replay."""
    if case == "newer-field":  # a change kind we know, with a field added by a newer version
        return _stale_journal(jdir, "bad.jsonl", [
            {"event": "intent", "seq": 1, "kind": "mkdir",
             "spec": {"path": str(victim), "owner_from_the_future": 0}, "old": False}])
    if case == "unknown-kind":
        return _stale_journal(jdir, "bad.jsonl", [
            {"event": "intent", "seq": 1, "kind": "from-the-future", "spec": {}, "old": None}])
    if case == "retired-kind":  # an older version's "tree" (its undo removed a whole tree)
        return _stale_journal(jdir, "bad.jsonl", [
            {"event": "intent", "seq": 1, "kind": "tree", "spec": {"path": str(victim)},
             "old": None}])
    if case == "not-an-object":
        return _stale_journal(jdir, "bad.jsonl", [[1, 2]])  # type: ignore[list-item]
    path = jdir / "bad.jsonl"
    jdir.mkdir(parents=True, exist_ok=True)
    if case == "garbage-text":
        path.write_text("this is not a journal\nat all\n")
    elif case == "garbage-bytes":
        path.write_bytes(bytes(range(256)) * 4)
    elif case == "unsafe":  # writable by anyone: its content cannot be trusted
        _stale_journal(jdir, "bad.jsonl", [
            {"event": "intent", "seq": 1, "kind": "mkdir", "spec": {"path": str(victim)},
             "old": False}])
        path.chmod(0o666)
    return path


BROKEN = ["newer-field", "unknown-kind", "retired-kind", "not-an-object", "garbage-text",
          "garbage-bytes", "unsafe"]


@pytest.mark.parametrize("case", BROKEN)
def test_a_journal_this_version_cannot_read_is_kept_and_warned_about(
        state_dir: Path, tmp_path: Path, case: str) -> None:
    """Recovery (what every state-changing command does first) restores the journals it can
    and warns once, in one line naming the journal it keeps and saying what to do."""
    jdir = state_dir / "journal"
    made = tmp_path / "made-by-a-crashed-run"
    made.mkdir()
    victim = tmp_path / "not-to-be-touched"
    (victim / "data").mkdir(parents=True)
    good = _stale_journal(jdir, "good.jsonl", [
        {"event": "intent", "seq": 1, "kind": "mkdir", "spec": {"path": str(made)},
         "old": False}])
    bad = _broken_journal(jdir, case, victim)
    content = bad.read_bytes()
    said: list[str] = []
    system.recover(said.append)
    assert not made.exists() and not good.exists()  # the good one is restored
    assert bad.read_bytes() == content and (victim / "data").is_dir()  # the bad one is kept
    warnings = [m for m in said if "could not recover" in m]
    assert len(warnings) == 1 and "\n" not in warnings[0], said
    assert str(bad) in warnings[0] and "delete it" in warnings[0]
    assert list(system.journals()) == []  # `slowdisk remove` and cgroup pruning skip it
    with pytest.raises(BackburnerError):  # `backburner restore` says it failed
        system.restore_stale()


@pytest.mark.root
@pytest.mark.parametrize("case", ["newer-field", "garbage-bytes", "unsafe"])
def test_state_changing_commands_still_work_with_a_broken_journal(
        state_dir: Path, tmp_path: Path, case: str) -> None:
    bad = _broken_journal(state_dir / "journal", case, tmp_path / "victim")
    root = tmp_path / "image"
    root.mkdir()
    r = bb("apply", "--remove", "--root", str(root))
    assert r.returncode == 0, r.err
    assert "nothing to remove" in r.out
    (line,) = r.err.splitlines()
    assert line.startswith("backburner: could not recover") and str(bad) in line
    assert "Traceback" not in r.err and bad.exists()
    r = bb("restore")
    assert r.returncode == (78 if case == "unsafe" else 71), r.err
    assert str(bad) in one_line_error(r)


@pytest.mark.root
@pytest.mark.alone  # it makes and removes the shared blkio `backburner` parent other runs use
def test_prune_keeps_a_live_owners_group_and_not_one_whose_pid_was_reused(
        state_dir: Path) -> None:
    """A group is named for its owner's PID and start time: an empty one whose PID now
    belongs to a later process (another start time) is the dead owner's, and goes."""
    top = Path("/sys/fs/cgroup/blkio/backburner")
    top.mkdir(exist_ok=True)
    mine = top / f"run-{procfs.owner_tag(os.getpid())}"
    reused = top / f"run-{os.getpid()}-1"  # our PID, another process's start time
    for group in (mine, reused):
        group.mkdir()
    try:
        removed = system.prune_empty_cgroups()
        assert str(reused) in removed and not reused.exists()
        assert mine.is_dir()
    finally:
        for group in (mine, reused, top):
            with contextlib.suppress(OSError):
                group.rmdir()


# --- loop devices are known by their backing file's identity, not a path ----------------

ATTACH_AND_DIE = r"""
import os, sys
from backburner import system
tx = system.Transaction("test-swap").__enter__()
print(tx.apply(system.LoopDevice(sys.argv[1])), flush=True)
os.kill(os.getpid(), 9)
"""


def _losetup(image: Path) -> str:
    return subprocess.run(["losetup", "--find", "--show", str(image)], capture_output=True,
                          text=True, timeout=TIMEOUT, check=True).stdout.strip()


def _bound(dev: str) -> bool:
    return Path("/sys/block", os.path.basename(dev), "loop", "backing_file").exists()


@pytest.mark.root
def test_restore_detaches_our_device_even_after_its_path_was_swapped(
        state_dir: Path, tmp_path: Path) -> None:
    """Killed after attaching; the image's path is then made a symlink to another user's
    image, itself on a loop device: restore detaches ours (by device and inode) and leaves
    the other alone."""
    ours, theirs = tmp_path / "ours.img", tmp_path / "theirs.img"
    for f in (ours, theirs):
        f.write_bytes(b"\0" * (1 << 20))
    r = subprocess.run([PY, "-c", ATTACH_AND_DIE, str(ours)], capture_output=True, text=True,
                       timeout=TIMEOUT)
    assert r.returncode == -9, r.stderr
    our_dev = r.stdout.strip()
    their_dev = _losetup(theirs)
    try:
        ours.rename(tmp_path / "moved.img")
        ours.symlink_to(theirs)
        r = bb("restore")
        assert r.returncode == 0, r.err
        assert not _bound(our_dev), "our loop device stayed attached"
        assert _bound(their_dev), "restore detached another user's loop device"
    finally:
        for dev in (our_dev, their_dev):
            subprocess.run(["losetup", "-d", dev], capture_output=True)


@pytest.mark.root
def test_an_attach_killed_before_its_device_was_journaled_is_found_by_identity(
        state_dir: Path, tmp_path: Path) -> None:
    """The journal holds the backing file's identity before the attach: a loop device made
    but not yet written down is still found and detached."""
    image = tmp_path / "early.img"
    image.write_bytes(b"\0" * (1 << 20))
    st = image.stat()
    jdir = state_dir / "journal"
    jdir.mkdir(mode=0o700)
    lines = [{"event": "begin", "label": "test-early", "pid": 999999999, "start": 1,
              "time": time.time()},
             {"event": "intent", "seq": 1, "kind": "loop", "old": None,
              "spec": {"backing": str(image), "direct_io": False, "read_only": False}},
             {"event": "applied", "seq": 1, "result": {"dev": st.st_dev, "ino": st.st_ino}}]
    (jdir / "test-early-1.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    dev = _losetup(image)
    try:
        r = bb("restore")
        assert r.returncode == 0, r.err
        assert not _bound(dev)
    finally:
        subprocess.run(["losetup", "-d", dev], capture_output=True)


@pytest.mark.root
@pytest.mark.parametrize("asked, absent", [("", set()), ("dev", {"nodev"}),
                                           ("ro,suid", {"nosuid"})])
def test_mounts_are_nosuid_and_nodev_unless_asked(
        state_dir: Path, tmp_path: Path, asked: str, absent: set[str]) -> None:
    target = tmp_path / "mnt"
    target.mkdir()
    with system.Transaction("test-mount") as tx:
        tx.apply(system.Mount("tmpfs", str(target), "tmpfs", asked))
        have = system.mount_options(str(target))
        assert {"nosuid", "nodev"} - absent <= have
        assert not absent & have
    assert not system.is_mountpoint(str(target))


def test_a_private_directory_is_named_in_the_journal_before_it_is_made(
        state_dir: Path, tmp_path: Path) -> None:
    """Killed between naming and making it: restore knows the name, and leaves a directory
    of that name alone when someone else made it."""
    seen: list[str] = []
    change = system.PrivateDir(str(tmp_path), "w-")
    made = change.apply_with(seen.append)
    assert seen == [made] and Path(made).is_dir()
    assert oct(Path(made).stat().st_mode & 0o777) == "0o700"
    assert change.undo(None, made) is None and not Path(made).exists()
    other = tmp_path / "w-theirs"
    other.mkdir()
    os.chown(other, 65534, 65534)
    note = change.undo(None, str(other))
    assert other.is_dir() and note is not None and "not a directory backburner made" in note


# --- a device's line in a cgroup v2 file (io.latency, io.cost.qos) --------------------------

DEVLINE = r"""
import sys, time
from backburner import system
path = sys.argv[1]
with system.Transaction("test") as tx:
    tx.apply(system.DeviceLine(path, "254:0 enable=1", off="enable=0"))
    print("ready", flush=True)
    time.sleep(30)
"""


def test_device_line_undo_puts_back_the_old_line_or_switches_off(tmp_path: Path) -> None:
    qos = tmp_path / "io.cost.qos"  # a plain file keeps the last write, as a test double
    qos.write_text("8:0 enable=1 ctrl=auto\n")
    change = system.DeviceLine(str(qos), "254:0 enable=1", off="enable=0")
    old = change.read()
    assert old is None  # no line for 254:0 yet
    change.apply()
    change.undo(old, None)
    assert qos.read_text() == "254:0 enable=0"
    qos.write_text("254:0 enable=1 ctrl=user rpct=95.00\n")
    change = system.DeviceLine(str(qos), "254:0 enable=0", off="enable=0")
    old = change.read()
    change.apply()
    change.undo(old, None)
    change.undo(old, None)  # idempotent
    assert qos.read_text() == "254:0 enable=1 ctrl=user rpct=95.00"
    with pytest.raises(SystemStateError, match="does not exist"):
        system.DeviceLine(str(tmp_path / "io.latency"), "254:0 target=10", "target=max").read()


@pytest.mark.root
def test_device_line_is_replayed_after_sigkill(state_dir: Path, tmp_path: Path) -> None:
    qos = tmp_path / "io.cost.qos"
    qos.write_text("")
    proc = subprocess.Popen([PY, "-c", DEVLINE, str(qos)], stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
    proc.kill()
    proc.wait(TIMEOUT)
    assert qos.read_text() == "254:0 enable=1"
    r = bb("restore")
    assert r.returncode == 0 and "undid " in r.out, r.err
    assert qos.read_text() == "254:0 enable=0"


def test_an_optional_cgroup_setting_is_written_only_where_it_exists(tmp_path: Path) -> None:
    group = tmp_path / "g"
    group.mkdir()
    (group / "io.weight").write_text("default 100\n")
    system.CgroupDir(str(group), {"io.weight": "10", "io.bfq.weight?": "10"}).apply()
    assert (group / "io.weight").read_text() == "10"
    assert not (group / "io.bfq.weight").exists()


def test_a_started_process_that_blocks_its_sigterm_is_killed_by_the_undo(
        state_dir: Path) -> None:
    """`Started`: a process of ours whose SIGTERM stays blocked (a fio seen so, waiting on a
    futex for good) is stopped all the same, by SIGKILL after the grace; one that is already
    gone is left alone."""
    stuck = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.pthread_sigmask("
                              "signal.SIG_BLOCK, [signal.SIGTERM]); print(1, flush=True); "
                              "time.sleep(60)"], stdout=subprocess.PIPE)
    assert stuck.stdout is not None and stuck.stdout.readline() == b"1\n"
    start = procfs.start_time(stuck.pid)
    assert start is not None
    gone = subprocess.Popen(["true"])
    gone.wait()
    with system.Transaction("started-test") as tx:
        tx.apply(system.Started(stuck.pid, start))
        tx.apply(system.Started(gone.pid, 1))
        assert len(_journals(state_dir)) == 1
    assert stuck.wait(TIMEOUT) == -signal.SIGKILL
    assert _journals(state_dir) == []


def test_what_restore_prints_of_a_cgroup_is_words_not_a_python_dict() -> None:
    """`restore` says "undid cgroup /…/run-1 (cpu.shares=102)", not "{'cpu.shares': '102'}"."""
    made = system.CgroupDir("/sys/fs/cgroup/cpu/backburner/run-1", {"cpu.shares": "102",
                                                                    "cpu.weight": "5"})
    text = made.describe()
    assert text == "cgroup /sys/fs/cgroup/cpu/backburner/run-1 (cpu.shares=102, cpu.weight=5)"
    assert system.CgroupDir("/x/y").describe() == "cgroup /x/y"
