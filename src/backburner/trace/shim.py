"""The launcher a tracer runs: `python -m backburner.trace.shim [--alive FD] RESULT -- CMD
ARGS...`.

It sits between the tracer and the job so that what we report is the job's own: its raw
wait status and its rusage from wait4 (a tracer's exit status and CPU time are the
tracer's), and the system counters of exactly the job's lifetime (not of the tracer
starting up, which on its own sends a burst of IPIs). Signals sent to it are passed on to
the job by `spawn.run_foreground`, which also makes it the subreaper of the job's tree. It
writes RESULT (JSON) and exits 0, or the status of a command that could not be started
(126/127).

``--alive FD``: the read end of a pipe whose write end only the recorder holds. If the
recorder has died (or given up on this run) before we start, the pipe is closed and the
job is never started: a recorder killed while `unshare` was forking its child leaves that
child without a parent-death signal, and nothing else would stop the run.
"""

from __future__ import annotations

import json
import os
import select
import sys
from typing import Any

from .. import spawn
from ..base.errors import BackburnerError
from . import counters

USAGE = "usage: python -m backburner.trace.shim [--alive FD] RESULT -- CMD [ARGS...]"


def _write(path: str, data: dict[str, Any]) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(data, f)
    os.replace(tmp, path)


def recorder_gone(fd: int) -> bool:
    """True when the write end of the pipe `fd` reads from is closed (EOF at once)."""
    readable, _, _ = select.select([fd], [], [], 0)
    return bool(readable) and os.read(fd, 1) == b""


def main(argv: list[str]) -> int:
    alive = None
    if argv[:1] == ["--alive"] and len(argv) > 1 and argv[1].isdigit():
        alive, argv = int(argv[1]), argv[2:]
    if len(argv) < 3 or argv[1] != "--":
        print(USAGE, file=sys.stderr)
        return 64
    if alive is not None:
        gone = recorder_gone(alive)
        os.close(alive)  # the job must not hold it
        if gone:
            return 75  # EX_TEMPFAIL: nobody is waiting for this run any more
    path, command = argv[0], argv[2:]
    before = counters.snapshot()
    try:
        outcome = spawn.run_foreground(command, adopt_orphans=True)
    except BackburnerError as err:
        _write(path, {"shim_pid": os.getpid(),
                      "error": {"type": type(err).__name__, "message": err.message,
                                "hint": err.hint, "exit_status": err.exit_status}})
        return err.exit_status
    after = counters.snapshot()
    # strace, the namespace's first process, would wait for what the job left running
    spawn.kill_adopted()
    _write(path, {"shim_pid": os.getpid(), "outcome": outcome.to_dict(),
                  "counters": counters.delta(before, after)})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
