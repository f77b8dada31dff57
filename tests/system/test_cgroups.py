"""cgroup changes: pruning keeps a live owner's group, a device line is put back (and
replayed after SIGKILL), an optional setting is written only where it exists, and restore
says a group in words.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path

import pytest
from helpers import TIMEOUT, bb

from backburner import system
from backburner.base.errors import SystemStateError
from backburner.kernel import procfs

from .holders import PY

pytestmark = pytest.mark.timeout(60)  # a hang fails fast instead of at 300 s


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


def test_what_restore_prints_of_a_cgroup_is_words_not_a_python_dict() -> None:
    """`restore` says "undid cgroup /…/run-1 (cpu.shares=102)", not "{'cpu.shares': '102'}"."""
    made = system.CgroupDir("/sys/fs/cgroup/cpu/backburner/run-1", {"cpu.shares": "102",
                                                                    "cpu.weight": "5"})
    text = made.describe()
    assert text == "cgroup /sys/fs/cgroup/cpu/backburner/run-1 (cpu.shares=102, cpu.weight=5)"
    assert system.CgroupDir("/x/y").describe() == "cgroup /x/y"


@pytest.mark.root
def test_a_shared_parent_another_run_removed_is_made_again(state_dir: Path) -> None:
    """Two commands at once: one journals the shared parent, the other, ending, removes it
    while it is empty, before the first makes its own group in it (a `run` failed so, 125,
    "cgroup parent ... does not exist"). The group's change makes the parent again; the
    undo removes both. A parent that is not a shared one of ours is never made."""
    from backburner.kernel import cgroups

    hier = cgroups.v1_mount("freezer") or cgroups.unified_root()
    assert hier is not None, "no cgroup hierarchy to make groups in"
    parent = Path(hier) / f"bbtest-shared-{procfs.owner_tag(os.getpid())}"
    child = parent / "run"
    with system.Transaction("shared-parent-test") as tx:
        tx.apply(system.CgroupDir(str(parent), shared=True))
        parent.rmdir()  # the other run's undo: it was empty
        with pytest.raises(SystemStateError, match="does not exist"):
            tx.apply(system.CgroupDir(str(child)))
        tx.apply(system.CgroupDir(str(child), shared_parent={}))
        assert child.is_dir()
    assert not parent.exists()
