"""Processes: a started process that blocks its SIGTERM is killed by the undo.
"""

from __future__ import annotations

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
