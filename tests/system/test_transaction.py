"""system: changes on a real loop device and cgroupfs, undone at the end of a Transaction,
on an exception, on SIGINT/SIGTERM, and by `backburner restore` after a SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from helpers import TIMEOUT, bb

from backburner import system
from backburner.base.errors import SystemStateError

from .holders import PY, flipped, hold, journals_in, rotational_of, scheduler_of, stale_journal

pytestmark = pytest.mark.timeout(60)  # a hang fails fast instead of at 300 s


# --- Transaction on a real device -----------------------------------------------------------


@pytest.mark.root
def test_transaction_restores_after_block(loop_queue: Path, state_dir: Path) -> None:
    before = scheduler_of(loop_queue)
    assert before != "bfq"
    with system.Transaction("test") as tx:
        tx.apply(system.SysfsValue(str(loop_queue / "scheduler"), "bfq"))
        assert scheduler_of(loop_queue) == "bfq"
        assert len(journals_in(state_dir)) == 1
    assert scheduler_of(loop_queue) == before
    assert journals_in(state_dir) == []


@pytest.mark.root
def test_transaction_restores_after_exception(loop_queue: Path, state_dir: Path) -> None:
    before = scheduler_of(loop_queue)
    with pytest.raises(ZeroDivisionError), system.Transaction("test") as tx:
        tx.apply(system.SysfsValue(str(loop_queue / "scheduler"), "bfq"))
        assert scheduler_of(loop_queue) == "bfq"
        _ = 1 / 0
    assert scheduler_of(loop_queue) == before
    assert journals_in(state_dir) == []


@pytest.mark.root
def test_failed_apply_is_undone_and_reported(loop_queue: Path, state_dir: Path) -> None:
    before = scheduler_of(loop_queue)
    with pytest.raises(SystemStateError, match="no-such-scheduler"), \
            system.Transaction("test") as tx:
        tx.apply(system.SysfsValue(str(loop_queue / "scheduler"), "bfq"))
        tx.apply(system.SysfsValue(str(loop_queue / "scheduler"), "no-such-scheduler"))
    assert scheduler_of(loop_queue) == before
    assert journals_in(state_dir) == []


@pytest.mark.root
@pytest.mark.parametrize("sig, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)],
                         ids=["SIGINT", "SIGTERM"])
def test_signal_to_holder_restores(loop_queue: Path, state_dir: Path, tmp_path: Path,
                                   sig: int, status: int) -> None:
    sched, rot = scheduler_of(loop_queue), rotational_of(loop_queue)
    made = tmp_path / "made"
    with hold(loop_queue, flipped(rot), made=[made]) as proc:
        assert (scheduler_of(loop_queue), rotational_of(loop_queue)) == ("bfq", flipped(rot))
        assert made.is_dir()
        proc.send_signal(sig)
        proc.wait(TIMEOUT)
    assert proc.returncode == status
    assert (scheduler_of(loop_queue), rotational_of(loop_queue)) == (sched, rot)
    assert not made.exists()
    assert journals_in(state_dir) == []


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
    assert journals_in(state_dir) == []


@pytest.mark.root
def test_sigkill_then_restore(loop_queue: Path, state_dir: Path, tmp_path: Path,
                              test_cgroup: Path) -> None:
    """THE KILL-AND-RESTORE TEST: nothing undoes a SIGKILL but the journal."""
    sched, rot = scheduler_of(loop_queue), rotational_of(loop_queue)
    made = [tmp_path / "made", tmp_path / "made" / "inner"]
    with hold(loop_queue, flipped(rot), test_cgroup, made) as proc:
        proc.kill()
        proc.wait(TIMEOUT)
    assert proc.returncode == -signal.SIGKILL
    # still changed: nobody has undone anything
    assert (scheduler_of(loop_queue), rotational_of(loop_queue)) == ("bfq", flipped(rot))
    assert (test_cgroup / "cpu.shares").read_text().strip() == "50"
    assert made[1].is_dir()
    assert len(journals_in(state_dir)) == 1

    r = bb("restore")
    assert r.returncode == 0, r.err
    assert r.out.count("undid ") == 5, r.out
    assert (scheduler_of(loop_queue), rotational_of(loop_queue)) == (sched, rot)
    assert not test_cgroup.exists()
    assert not made[0].exists()
    assert journals_in(state_dir) == []


def test_journal_of_a_live_owner_is_not_touched(state_dir: Path, tmp_path: Path) -> None:
    made = tmp_path / "mine"
    with hold(made=[made]) as proc:
        try:
            (journal,) = journals_in(state_dir)
            content = journal.read_bytes()
            assert system.restore_stale() == []
            assert list(system.stale_journals()) == []
            assert made.is_dir() and journal.read_bytes() == content
        finally:
            proc.terminate()
            proc.wait(TIMEOUT)
    assert proc.returncode == 143  # and the owner undid its own change
    assert not made.exists()
    assert journals_in(state_dir) == []


@pytest.mark.root
def test_restore_of_live_owner_via_cli(state_dir: Path, tmp_path: Path) -> None:
    made = tmp_path / "mine"
    with hold(made=[made]) as proc:
        try:
            r = bb("restore")
            assert r.returncode == 0, r.err
            assert "nothing to restore" in r.out
            assert made.is_dir() and len(journals_in(state_dir)) == 1
        finally:
            proc.terminate()
            proc.wait(TIMEOUT)


@pytest.mark.root
def test_restore_with_nothing_to_do(state_dir: Path) -> None:
    r = bb("restore")
    assert r.returncode == 0
    assert r.out.strip() == "nothing to restore: no journal of an interrupted run was found"
    assert r.stderr == b""


def test_a_bad_journal_does_not_block_the_others(state_dir: Path, tmp_path: Path) -> None:
    """One journal that cannot be replayed (a kind from a newer version) must not stop the
    rest from being restored; it is reported and kept for another try."""
    jdir = state_dir / "journal"
    made = tmp_path / "made-by-a-crashed-run"
    made.mkdir()
    good = stale_journal(jdir, "good.jsonl", [
        {"event": "intent", "seq": 1, "kind": "mkdir", "spec": {"path": str(made)},
         "old": False}])
    bad = stale_journal(jdir, "bad.jsonl", [
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
    p_old = stale_journal(jdir, "z-older.jsonl", [older])
    p_new = stale_journal(jdir, "a-newer.jsonl", [newer])
    text = p_new.read_text().replace('"time": 1.0', '"time": 2.0')
    p_new.write_text(text)
    system.restore_stale()
    assert value.read_text() == "a"
    assert not p_old.exists() and not p_new.exists()


# --- a journal this version cannot read: a warning, never a crash ---------------------------


# --- loop devices are known by their backing file's identity, not a path ----------------


# --- a device's line in a cgroup v2 file (io.latency, io.cost.qos) --------------------------
