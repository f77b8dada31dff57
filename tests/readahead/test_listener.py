"""readahead/listener.py on a real loop-mounted ext4 and the real process connector: files
held only while there is room, closes asked for once the hold is full, a command's events
read in one batch, a stopped recording unsubscribed from process events; the process tree
from fork events (pure) and a lost fork event noticed."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from helpers import proc_event_datagram, unsubscribed_by_close, wait_for

from backburner.kernel import proc_events, procfs
from backburner.readahead.listener import MASK, ForkWatch, Listener, is_backburner, tree_of
from backburner.readahead.watched import watched_filesystems

from .conftest import Bed


def test_tree_from_fork_events_and_ancestry() -> None:
    parents = {11: 10, 12: 11, 13: 12, 21: 20, 14: 10}
    assert tree_of(10, parents, {}) == {10, 11, 12, 13, 14}
    assert tree_of(11, parents, {}) == {11, 12, 13}
    # a child whose fork event was lost, known by the ancestry read at its first event
    assert tree_of(10, parents, {30: (13, 12, 1), 31: (20, 1), 32: (30, 1)}) == {
        10, 11, 12, 13, 14, 30, 32}
    assert tree_of(99, parents, {}) == {99}


def test_a_background_replay_forked_by_any_program_is_known_by_its_name() -> None:
    """The background replay is a fork of whatever started it (here: pytest, whose command
    line says nothing of backburner): its name tells the recorder to leave its reads out."""
    from backburner import spawn
    from backburner.readahead import background

    child = spawn.fork_call(lambda: (time.sleep(30), 0)[1], name=background.CHILD_NAME)
    try:
        wait_for(lambda: procfs.comm_of(child.pid) == background.CHILD_NAME,
                 what="the child's name")
        assert is_backburner(child.pid)
        assert not is_backburner(os.getpid())
    finally:
        child.stop(grace=1)


@pytest.mark.root
def test_more_files_than_descriptors_are_all_recorded(bed: Bed) -> None:
    """Files are held only while there is room, and events are read a few at a time: with
    a soft limit of 600 open files and 1500 events queued at once, every file is seen (at
    EMFILE the kernel drops the events a read cannot turn into descriptors)."""
    import resource

    many = Path(bed.mnt) / "many"
    many.mkdir()
    for i in range(1500):
        (many / f"{i:04d}").write_bytes(b"x" * 100)
    os.sync()
    limits = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (600, limits[1]))
    try:
        listener = Listener(watched_filesystems((str(bed.mnt),)),
                                   track_ancestry=False, hold=True)
        subprocess.run("cat many/* > /dev/null", shell=True, cwd=bed.mnt, check=True)
        listener._drain()  # no reader thread ran: all 3000 events are queued, read now
        seen = listener.stop()
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, limits)
    assert sum(1 for p in seen.paths.values() if b"/many/" in p) == 1500
    assert not listener.held


def _marked_masks(fanotify_fd: int) -> set[int]:
    """The event masks of a fanotify group's marks, as the kernel shows them."""
    with open(f"/proc/self/fdinfo/{fanotify_fd}") as f:
        return {int(word.split(":")[1], 16) for line in f if line.startswith("fanotify ")
                for word in line.split() if word.startswith("mask:")}


@pytest.mark.root
def test_closes_are_asked_for_only_once_no_more_files_can_be_held(bed: Bed) -> None:
    """A held file's pages are looked at at the end, so its close is not an event the
    recorded program pays for; once the hold is full, closes are asked for again."""
    import resource

    from backburner.kernel import fanotify

    many = Path(bed.mnt) / "held"
    many.mkdir()
    for i in range(40):
        (many / f"{i:02d}").write_bytes(b"x" * 100)
    limits = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (512 + 20, limits[1]))  # 20 held, 512 spare
    try:
        listener = Listener(watched_filesystems((str(bed.mnt),)),
                                   track_ancestry=False, hold=True)
        try:
            assert _marked_masks(listener.fd) == {MASK & ~fanotify.FAN_CLOSE_NOWRITE}
            subprocess.run("cat held/0* > /dev/null", shell=True, cwd=bed.mnt, check=True)
            listener._drain()
            assert _marked_masks(listener.fd) == {MASK & ~fanotify.FAN_CLOSE_NOWRITE}
            subprocess.run("cat held/* > /dev/null", shell=True, cwd=bed.mnt, check=True)
            listener._drain()
            assert len(listener.held) == listener.hold_max == 20
            assert _marked_masks(listener.fd) == {MASK}
        finally:
            seen = listener.stop()
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, limits)
    assert sum(1 for p in seen.paths.values() if b"/held/" in p) == 40


@pytest.mark.root
def test_a_commands_events_are_read_in_one_batch_after_the_first(bed: Bed) -> None:
    """Events are not read as each arrives (a wake-up per event cost a short start most of
    its recording overhead) nor every so often, but `batch_s` after the first, at once."""
    listener = Listener(watched_filesystems((str(bed.mnt),)),
                               track_ancestry=False, hold=True, batch_s=3.0)
    with listener:
        time.sleep(1.0)  # idle: a reader polling every batch_s would be mid-period
        # batch_s long enough for the second `cat` to start on a machine busy with other
        # tests (at a load of 8 a start can take over a second)
        first = time.monotonic()
        subprocess.run(["cat", "a/one.txt"], cwd=bed.mnt, check=True, stdout=subprocess.DEVNULL)
        time.sleep(0.3)
        subprocess.run(["cat", "a/two.txt"], cwd=bed.mnt, check=True, stdout=subprocess.DEVNULL)
        second = time.monotonic() - first
        wait_for(lambda: len(listener.seen.paths) > 0, what="the batch")
        waited = time.monotonic() - first
        # the thread names the batch's events one by one: wait for the whole batch
        wait_for(lambda: len(listener.seen.paths) == 2, what="both files")
        assert second < 2.9, f"the second cat ended {second:.1f} s after the first"
        assert listener.reads == 1, listener.reads  # both in one read
    seen = listener.stop()
    assert waited >= 2.9, waited
    assert sorted(seen.paths.values()) == [bed.path("a/one.txt"), bed.path("a/two.txt")]


@pytest.mark.root
def test_an_event_arriving_as_a_poll_times_out_still_waits_for_its_batch(
        bed: Bed, monkeypatch: pytest.MonkeyPatch) -> None:
    """The thread polls so that it notices a stop; an event queued just after a poll found
    nothing (a busy machine makes that window wide) is read with its batch, not at once."""
    import select
    import types

    from backburner.readahead import listener as module

    arrived: list[float] = []

    def poll(rlist: list, wlist: list, xlist: list, timeout: float) -> tuple:
        ready = select.select(rlist, wlist, xlist, timeout)
        if not arrived and not ready[0]:  # the event comes right after an empty poll
            subprocess.run(["cat", "a/one.txt"], cwd=bed.mnt, check=True,
                           stdout=subprocess.DEVNULL)
            arrived.append(time.monotonic())
        return ready

    monkeypatch.setattr(module, "select", types.SimpleNamespace(select=poll))
    listener = Listener(watched_filesystems((str(bed.mnt),)), track_ancestry=False,
                        hold=True, batch_s=1.0)
    with listener:
        wait_for(lambda: listener.reads > 0, what="the batch")
        waited = time.monotonic() - arrived[0]
    seen = listener.stop()
    assert waited >= 0.9, f"read {waited:.2f} s after the event"
    assert list(seen.paths.values()) == [bed.path("a/one.txt")]


@pytest.mark.root
def test_a_stopped_recording_leaves_the_kernel_no_process_events_listener() -> None:
    """The kernel builds an event for every fork and exit on the machine as long as it
    counts a listener, and closing the socket does not take it off the count: a recording
    that stops says IGNORE first, and the kernel then sends its socket nothing more."""
    listener = Listener((), track_ancestry=True)
    assert listener.forks is not None
    assert unsubscribed_by_close(listener.forks.fileno(), listener.stop)


def test_fork_events_make_the_tree_and_a_gap_in_their_numbers_is_a_loss() -> None:
    """A fork event lost in the kernel leaves a gap in its CPU's numbers: the tree is then
    known to be incomplete (the recording says so), though no read failed."""
    import socket
    import struct

    ours, kernel = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    kernel.send(proc_event_datagram(proc_events.NONE, struct.pack("=I", 0), seq=9, cpu=0))
    forks = ForkWatch(proc_events.Connector(sock=ours))
    try:
        fork = proc_events.FORK
        kernel.send(proc_event_datagram(fork, struct.pack("=iiii", 10, 10, 11, 11), seq=10,
                                        cpu=0))
        kernel.send(proc_event_datagram(fork, struct.pack("=iiii", 11, 11, 12, 11), seq=11,
                                        cpu=0))  # a thread of 11: not a process
        forks.drain()
        assert (forks.parents, forks.lost) == ({11: 10}, False)
        kernel.send(proc_event_datagram(fork, struct.pack("=iiii", 11, 11, 13, 13), seq=14,
                                        cpu=0))
        forks.drain()
        assert (forks.parents, forks.lost) == ({11: 10, 13: 11}, True)
    finally:
        forks.close()
        kernel.close()
