"""Processes: a started process that blocks its SIGTERM is killed by the undo.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import TIMEOUT

from backburner import system
from backburner.kernel import procfs

from .holders import journals_in

pytestmark = pytest.mark.timeout(60)  # a hang fails fast instead of at 300 s


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
        assert len(journals_in(state_dir)) == 1
    assert stuck.wait(TIMEOUT) == -signal.SIGKILL
    assert journals_in(state_dir) == []


def test_the_undo_also_ends_what_the_started_process_forked(state_dir: Path) -> None:
    """fio's job processes leave its session (setsid) and wait for its go: killing the main
    process alone leaves them waiting for good, holding the testbed. The undo ends every
    process below the one it journaled, found before the main process dies."""
    code = ("import os, signal, time; signal.pthread_sigmask(signal.SIG_BLOCK, "
            "[signal.SIGTERM])\n"
            "kid = os.fork()\n"
            "if kid == 0:\n    os.setsid(); time.sleep(60); os._exit(0)\n"
            "print(kid, flush=True); time.sleep(60)")
    main = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert main.stdout is not None
    with main.stdout:
        kid = int(main.stdout.readline())
    start, kid_start = procfs.start_time(main.pid), procfs.start_time(kid)
    try:
        assert start is not None and kid_start is not None
        with system.Transaction("started-tree-test") as tx:
            tx.apply(system.Started(main.pid, start))
        assert main.wait(TIMEOUT) == -signal.SIGKILL
        assert procfs.start_time(kid) != kid_start  # gone (or a zombie awaiting its reaper)
        assert journals_in(state_dir) == []
    finally:
        for pid, began in ((kid, kid_start), (main.pid, start)):
            if began is not None and procfs.start_time(pid) == began:
                os.kill(pid, signal.SIGKILL)
        main.wait(TIMEOUT)
