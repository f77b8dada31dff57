"""bench.loadio: a load's bytes counted as it runs, from its process tree; the window of a
start and the longest stretch without progress in it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from backburner.bench import loadio


def _series(points: list[tuple[float, int | None]]) -> loadio.Samples:
    s = loadio.Samples()
    for t, v in points:
        s.add(t, v)
    return s


def test_a_dip_is_absorbed_and_a_gone_tree_keeps_its_count() -> None:
    s = _series([(0.0, 0), (1.0, 100), (2.0, 40), (3.0, None), (4.0, 150)])
    assert s.values == [0, 100, 100, 100, 150]
    assert s.at(-1.0) == 0 and s.at(2.5) == 100 and s.at(9.0) == 150


def test_a_window_counts_its_bytes_and_its_longest_stall() -> None:
    s = _series([(0.0, 0), (0.5, 10), (1.0, 10), (1.5, 10), (2.0, 10), (2.5, 30),
                 (3.0, 40), (3.5, 40)])
    w = s.window(0.2, 3.2)
    assert w.bytes == 40  # 40 at 3.2 (the sample of 3.0), 0 at 0.2 (that of 0.0)
    assert w.seconds == pytest.approx(3.0)
    assert w.longest_stall_s == pytest.approx(2.0)  # progress at 0.5, then not until 2.5
    assert w.rate == pytest.approx(40 / 3)


def test_a_window_without_progress_stalls_throughout() -> None:
    s = _series([(0.0, 5), (1.0, 5), (2.0, 5)])
    w = s.window(0.5, 1.7)
    assert w.bytes == 0 and w.longest_stall_s == pytest.approx(1.2)


WRITER = textwrap.dedent("""
    import os, subprocess, sys, time
    path = sys.argv[1]
    # a child that writes and exits (reaped: its bytes pass to us), then our own writes
    subprocess.run([sys.executable, "-c",
                    "import os, sys; f = open(sys.argv[1] + '.kid', 'wb');"
                    "f.write(os.urandom(1 << 20)); f.flush(); os.fsync(f.fileno())", path])
    with open(path, "wb") as f:
        for _ in range(4):
            f.write(os.urandom(1 << 20)); f.flush(); os.fsync(f.fileno())
    print("done", flush=True)
    time.sleep(30)
""")


@pytest.mark.root
def test_a_tree_counts_its_reaped_children(tmp_path: Path) -> None:
    """The bytes of a process and of the child it reaped, as the load's tree did them
    (written to a real filesystem: write_bytes counts the pages dirtied)."""
    target = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-I", "-c", WRITER, str(target)],
                            stdout=subprocess.PIPE, text=True)
    try:
        watch = loadio.TreeIO(proc.pid, interval=0.02)
        assert proc.stdout is not None and proc.stdout.readline() == "done\n"
        time.sleep(0.1)
        whole = watch.stop()
        assert whole.bytes >= 5 << 20, whole
        assert os.path.getsize(target) == 4 << 20
    finally:
        proc.kill()
        proc.wait()
    assert loadio.tree_bytes(proc.pid) is None  # gone
