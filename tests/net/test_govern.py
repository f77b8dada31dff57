"""`govern` with `net = "background"` on the testbed's client interface (named by the rule
files' [net] table, so never a host NIC): a matched program's downloads go through the
paced class while the daemon runs, and after SIGTERM the interface and the cgroup tree
are as before. A bad [net] table is one line before anything changes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from helpers import BB, TIMEOUT, bb, one_line_error, rules_dir

import backburner
from backburner import system
from backburner.net import testbed

from .conftest import bed_state

pytestmark = [pytest.mark.root, pytest.mark.timeout(90)]

#: The job waits a moment before it connects: the daemon moves it at its exec, and a
#: socket belongs to the group its process was in when it was made.
JOB = ("import runpy, sys, time; time.sleep(0.5); "
       "sys.argv = ['client', 'download', sys.argv[1], sys.argv[2], '3']; "
       "runpy.run_module('backburner.net.client', run_name='__main__')")


SRC = str(Path(backburner.__file__).parents[1])


def _paced_packets(bed: testbed.Testbed) -> int:
    return sum(c["packets"] for c in system.tc_classes(bed.client_ns, bed.client_dev)
               if c["handle"] == "1:10")


def test_a_matched_download_is_held_back_and_nothing_is_left(
        bed: testbed.Testbed, tmp_path: Path, state_dir: Path) -> None:
    before = bed_state(bed)
    name = f"bbgn{uuid.uuid4().hex[:10]}"
    (tmp_path / name).symlink_to(sys.executable)
    rules = rules_dir(tmp_path, f'[[rule]]\nname = "downloads"\nmatch = {{ comm = "{name}" }}\n'
                   f'net = "background"\n[net]\ndev = "{bed.client_dev}"\n'
                   f'netns = "{bed.client_ns}"\n')
    ready_dir = tmp_path / "ready"
    ready_dir.mkdir(mode=0o700)
    daemon = subprocess.Popen([*BB, "govern", "run", "--rules", str(rules), "--no-defaults",
                               "--ready-file", str(ready_dir / "ready")],
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 20
        while not (ready_dir / "ready").exists():
            assert daemon.poll() is None and time.monotonic() < deadline, daemon.stderr
            time.sleep(0.05)
        job = subprocess.run(["nsenter", f"--net={system.netns_path(bed.client_ns)}",
                              str(tmp_path / name), "-c", JOB, testbed.SERVER_ADDR,
                              str(testbed.PORT)], capture_output=True, timeout=TIMEOUT,
                             env={**os.environ, "PYTHONPATH": SRC})  # a venv's link

        assert job.returncode == 0 and b'"bytes"' in job.stdout, job.stderr
        assert _paced_packets(bed) > 20  # the job's ACKs, in the paced class
        assert bed_state(bed) != before
    finally:
        daemon.terminate()
        _, err = daemon.communicate(timeout=TIMEOUT)
    assert daemon.returncode == 0, err
    assert b"network background" in err  # the log's line for the governed job
    assert bed_state(bed) == before


def test_a_bad_net_table_is_one_line_before_any_change(
        bed: testbed.Testbed, tmp_path: Path, state_dir: Path) -> None:
    before = bed_state(bed)
    rules = rules_dir(tmp_path, '[[rule]]\nname = "d"\nmatch = { comm = "x" }\n'
                   'net = "background"\n[net]\ndev = "nosuch0"\n')
    r = bb("govern", "run", "--rules", str(rules), "--no-defaults")
    assert r.returncode == 66, r.err
    assert "no such interface: nosuch0" in one_line_error(r)
    assert bed_state(bed) == before
