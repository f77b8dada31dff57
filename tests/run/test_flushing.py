"""run.flushing on a real ext4 (root): the job's closed files are written back at once,
from a thread at the job's IO class; another process's files are left to the kernel; and
`run --policy io=idle,flush-behind` does it for the job it runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from helpers import BB, TIMEOUT, Daemon, bb, loop_ext4, rules_dir, wait_for

from backburner.base.errors import SystemStateError
from backburner.kernel import pagecache, priorities, proc_events
from backburner.policy import grammar
from backburner.run import flushing

pytestmark = [pytest.mark.root, pytest.mark.alone]  # a sync elsewhere would clean both files

SIZE = 4 << 20
#: on a line from stdin, writes and closes a file and says so; stays until its stdin
#: closes (govern's rule must have matched it before it writes)
WRITER = ("import os, sys\n"
          "sys.stdin.readline()\n"
          "with open(sys.argv[1], 'wb') as f: f.write(os.urandom(int(sys.argv[2])))\n"
          "print('closed', flush=True); sys.stdin.read()\n")
IDLE = grammar.Policy(io=priorities.IOPrio("idle"))
#: well within the 30 s after which the kernel's flusher writes a dirty page itself
#: (dirty_expire_centisecs): a file clean sooner was written back by flush-behind
FLUSHED_WITHIN_S = 10.0


def _dirty_pages(path: Path) -> int:
    fd = os.open(path, os.O_RDONLY)
    try:
        stat = pagecache.cachestat(fd)
        assert stat is not None, "this kernel has no cachestat (6.5+)"
        return stat.dirty
    finally:
        os.close(fd)


def _writer(argv: list[str], path: Path) -> subprocess.Popen[str]:
    """The writer started by argv (ending with the interpreter to run it)."""
    return subprocess.Popen([*argv, "-I", "-c", WRITER, str(path), str(SIZE)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def _write(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("go\n")
    proc.stdin.flush()
    assert proc.stdout.readline() == "closed\n"


def test_the_jobs_files_are_written_back_at_its_class_and_others_are_not(
        tmp_path: Path) -> None:
    with loop_ext4(tmp_path) as (_loop, mnt):
        watch = flushing.FlushBehind([str(mnt)], IDLE,
                                      flushing.tree_of(os.getpid(), include_root=False))
        watch.start()
        try:
            (mnt / "theirs.bin").write_bytes(os.urandom(SIZE))  # closed by us: not the job
            writer = _writer([sys.executable], mnt / "job.bin")
            _write(writer)
            wait_for(lambda: _dirty_pages(mnt / "job.bin") == 0, FLUSHED_WITHIN_S,
                     "the job's file to be written back")
            assert priorities.ioprio_get(watch.tid) == priorities.IOPrio("idle")
            # the control: left to the kernel, a closed file stays dirty until the flusher
            # takes it (dirty_expire_centisecs, 30 s by default)
            assert _dirty_pages(mnt / "theirs.bin") > 0
        finally:
            done = watch.stop()
        writer.communicate("")
    assert done["flushed_files"] == 1 and done["flushed_bytes"] == SIZE, done
    assert done["flush_left_files"] >= 1 and "flush_problems" not in done, done


def test_run_writes_its_jobs_files_back_and_mirrors_its_status(tmp_path: Path) -> None:
    with loop_ext4(tmp_path) as (_loop, mnt):
        job = _writer([*BB, "run", "--no-cgroup", "--policy", "io=idle,flush-behind", "--",
                       sys.executable], mnt / "job.bin")
        _write(job)
        wait_for(lambda: _dirty_pages(mnt / "job.bin") == 0, FLUSHED_WITHIN_S,
                 "run's job's file to be written back")
        out, _ = job.communicate("", timeout=TIMEOUT)
        assert job.returncode == 0 and out == ""


def test_a_writer_that_ends_right_after_its_close_is_still_the_jobs(tmp_path: Path) -> None:
    """`head` under the shell's `>` closes the file as it exits: its event is read with
    the PID gone, told apart by the job's fork events (flushing.JobTree)."""
    with loop_ext4(tmp_path) as (_loop, mnt):
        r = bb("run", "-v", "--no-cgroup", "--policy", "io=idle,flush-behind", "--", "sh",
               "-c", f"head -c {SIZE} /dev/urandom > {mnt / 'job.bin'}")
        assert r.returncode == 0, r.err
        assert "flush-behind: 1 file (4 MiB) written back" in r.err, r.err
        wait_for(lambda: _dirty_pages(mnt / "job.bin") == 0, FLUSHED_WITHIN_S,
                 "the ended writer's file to be written back")


def test_the_job_tree_keeps_the_ended_and_drops_a_reused_pid() -> None:
    """Fork events as the connector gives them: a member stays one after its exit (no
    process of that PID lives); a member's PID that another process's fork reuses is
    no longer one; another process's fork is not."""
    tree = flushing.JobTree(os.getpid(), include_root=False)
    try:
        assert tree.events is not None  # root: the connector is there

        class Fake:
            def __init__(self, *events: proc_events.Event) -> None:
                self.batches = [proc_events.Batch(list(events))]

            def drain(self, limit: int) -> proc_events.Batch:
                return self.batches.pop(0) if self.batches else proc_events.Batch([])

        def fork(child: int, parent: int) -> proc_events.Event:
            return proc_events.Event(proc_events.FORK, 0, 0, child, child, parent, parent)

        me, nobody = os.getpid(), 1
        tree.events.close()
        tree.events = Fake(fork(900001, me), fork(900002, 900001),  # type: ignore[assignment]
                           fork(900003, nobody))
        assert tree(900002) and tree(900001)  # neither alive: by the events
        assert not tree(900003) and not tree(me)
        tree.events = Fake(fork(900001, nobody))  # type: ignore[assignment]
        assert not tree(900001) and tree(900002)
    finally:
        tree.events = None


def test_govern_writes_back_the_files_of_a_rule_with_flush_behind(
        tmp_path: Path, state_dir: Path) -> None:
    link = tmp_path / f"bbfb{uuid.uuid4().hex[:10]}"  # a name of its own for the rule
    link.symlink_to(sys.executable)
    rule = (f'[[rule]]\nname = "t"\nmatch = {{ comm = "{link.name}" }}\n'
            'policy = "background"\nflush_behind = true\n')
    with loop_ext4(tmp_path) as (_loop, mnt):
        daemon = Daemon(tmp_path, rules_dir(tmp_path, rule))
        try:
            writer = _writer([str(link)], mnt / "job.bin")
            wait_for(lambda: priorities.ioprio_get(writer.pid) == IDLE.io, TIMEOUT,
                     "the writer to be governed")
            _write(writer)
            (mnt / "theirs.bin").write_bytes(os.urandom(SIZE))  # not governed: left
            wait_for(lambda: _dirty_pages(mnt / "job.bin") == 0, FLUSHED_WITHIN_S,
                     "the governed writer's file to be written back")
            assert _dirty_pages(mnt / "theirs.bin") > 0
            writer.communicate("", timeout=TIMEOUT)
            # the status file, rewritten after the writer's exit, counts what was written back
            wait_for(lambda: (json.loads(bb("govern", "status", "--json").out)
                              .get("flush_behind") or {}).get("flushed_files") == 1,
                     TIMEOUT, "the status to count the file")
            assert "flush-behind: 1 file (4 MiB) written back" in bb("govern", "status").out
        finally:
            code, err = daemon.finish()
    assert code == 0, err


def test_a_filesystem_it_cannot_watch_is_one_line(tmp_path: Path) -> None:
    watch = flushing.FlushBehind([str(tmp_path / "gone")], IDLE, flushing.tree_of(1))
    with pytest.raises(SystemStateError, match="flush-behind cannot watch .*gone"):
        watch.start()


def test_the_filesystems_watched_are_those_on_block_devices() -> None:
    found = flushing.block_filesystems()
    assert "/" in found or any(os.stat(p).st_dev == os.stat("/").st_dev for p in found)
    assert not any(p in ("/proc", "/sys", "/dev/shm") for p in found), found
