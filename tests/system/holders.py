"""Helpers the tests of `system` share: a process holding a transaction open (to be
signalled or killed), the journals in a state directory, a stale journal of a long-gone
owner, and a loop queue's scheduler and rotational flag read back.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from helpers import TIMEOUT

from backburner import system

PY = sys.executable


def scheduler_of(queue: Path) -> str:
    return system.selected((queue / "scheduler").read_text())


def rotational_of(queue: Path) -> str:
    return (queue / "rotational").read_text().strip()


def journals_in(state_dir: Path) -> list[Path]:
    jdir = state_dir / "journal"
    return sorted(jdir.iterdir()) if jdir.is_dir() else []


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


def hold(queue: Path | None = None, rotational: str = "", cgroup: Path | None = None,
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


def flipped(value: str) -> str:
    return "0" if value == "1" else "1"


def stale_journal(jdir: Path, name: str, events: list[dict]) -> Path:
    """A journal whose owner is long gone (PID 1's start time never matches 0)."""
    jdir.mkdir(parents=True, exist_ok=True)
    path = jdir / name
    header = {"event": "begin", "label": "test", "pid": 1, "start": 0, "time": 1.0}
    path.write_text("".join(json.dumps(e) + "\n" for e in [header, *events]))
    return path
