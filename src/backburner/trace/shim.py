"""The launcher a tracer runs: `python -m backburner.trace.shim RESULT -- CMD ARGS...`.

It sits between the tracer and the job so that what we report is the job's own: its raw
wait status and its rusage from wait4 (a tracer's exit status and CPU time are the
tracer's), and the system counters of exactly the job's lifetime (not of the tracer
starting up, which on its own sends a burst of IPIs). Signals sent to it are passed on to
the job by `spawn.run_foreground`. It writes RESULT (JSON) and exits 0, or the status of a
command that could not be started (126/127).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from .. import spawn
from ..errors import BackburnerError
from . import counters


def _write(path: str, data: dict[str, Any]) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(data, f)
    os.replace(tmp, path)


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python -m backburner.trace.shim RESULT -- CMD [ARGS...]", file=sys.stderr)
        return 64
    path, command = argv[0], argv[2:]
    before = counters.snapshot()
    try:
        outcome = spawn.run_foreground(command)
    except BackburnerError as err:
        _write(path, {"shim_pid": os.getpid(),
                      "error": {"type": type(err).__name__, "message": err.message,
                                "hint": err.hint, "exit_status": err.exit_status}})
        return err.exit_status
    after = counters.snapshot()
    _write(path, {"shim_pid": os.getpid(), "outcome": outcome.to_dict(),
                  "counters": counters.delta(before, after)})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
