"""loop devices: a device still open is not claimed detached, its holder is named (another
namespace, a lazily unmounted filesystem), a detach waits while IO goes on, and restore finds
our device by identity even after its path was swapped or before it was journaled.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import TIMEOUT, bb

from backburner import system
from backburner.base.errors import SystemStateError

from .holders import PY

pytestmark = pytest.mark.timeout(60)  # a hang fails fast instead of at 300 s


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


def _bound_to(dev: str, image: os.stat_result) -> bool:
    """`dev` is bound to this image (its device and inode): a number freed here may be
    taken at once by another worker's test, so a number alone says nothing."""
    shown = subprocess.run(["losetup", "-n", "-O", "BACK-INO,BACK-MAJ:MIN", dev],
                           capture_output=True, text=True, timeout=TIMEOUT).stdout.split()
    want = [str(image.st_ino), f"{os.major(image.st_dev)}:{os.minor(image.st_dev)}"]
    return shown == want


def _detach_if_bound_to(dev: str, image: os.stat_result) -> None:
    if _bound_to(dev, image):
        subprocess.run(["losetup", "-d", dev], capture_output=True, timeout=TIMEOUT)


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
    our_file, their_file = ours.stat(), theirs.stat()
    try:
        ours.rename(tmp_path / "moved.img")
        ours.symlink_to(theirs)
        r = bb("restore")
        assert r.returncode == 0, r.err
        assert not _bound_to(our_dev, our_file), "our loop device stayed attached"
        assert _bound_to(their_dev, their_file), "restore detached another user's loop device"
    finally:
        _detach_if_bound_to(our_dev, our_file)
        _detach_if_bound_to(their_dev, their_file)


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
        assert not _bound_to(dev, st)
    finally:
        _detach_if_bound_to(dev, st)
