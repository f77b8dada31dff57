"""A system-wide `perf record` of tracepoints between two moments: what the page order
(`pagecache`) and the IO attribution (`attribution`) both need, kept once.

perf is started disabled (`-D -1`) with its control descriptors (`--control fd:CTL,ACK`)
and enabled by writing "enable": its "ack" is the moment the recording is known to run,
so nothing the caller starts afterwards is missed. It runs in its own process group (a ^C
meant for the probe does not end it) and dies with us (a system-wide recording must never
outlive the command). Its data and log live in a private directory in memory, off the
device measured, removed by `close`; perf reads tracefs from a mount of its own
(`system.perf_namespace`).
"""

from __future__ import annotations

import logging
import os
import select
import signal
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from pathlib import Path

from .. import spawn, system
from ..base.errors import UnavailableError
from . import scratch

log = logging.getLogger(__name__)

#: How long perf may take to acknowledge "enable" (it loads the events' filters first).
READY_TIMEOUT_S = 20.0


class PerfRecord:
    """`start(argv)` then `script(fields)`; `close()` undoes what start set up (idempotent).

    `argv(data, ctl, ack)` builds perf's command line for the data file and the control
    descriptors; `what` names the recording in the error when perf does not acknowledge."""

    def __init__(self, prefix: str, what: str) -> None:
        self.prefix = prefix
        self.what = what
        self._stack: ExitStack | None = None
        self._child: spawn.Child | None = None
        self._fds: list[int] = []
        self._dir = ""

    @property
    def pid(self) -> int | None:
        return self._child.pid if self._child is not None else None

    def start(self, argv: Callable[[str, int, int], list[str]]) -> None:
        self._stack = ExitStack()
        try:
            self._dir = scratch.private_dir(self._stack, self.prefix)
            self._launch(argv)
        except BaseException:
            self.close()
            raise

    def _launch(self, argv: Callable[[str, int, int], list[str]]) -> None:
        ctl_r, ctl_w = os.pipe()
        ack_r, ack_w = os.pipe()
        self._fds = [ctl_w, ack_r]
        log_path = os.path.join(self._dir, "perf.log")
        logfd = os.open(log_path, os.O_WRONLY | os.O_CREAT, 0o600)
        null = os.open(os.devnull, os.O_RDONLY)
        try:
            self._child = spawn.launch(argv(self.data, ctl_r, ack_w), stdin=null,
                                       stdout=logfd, stderr=logfd, pass_fds=(ctl_r, ack_w),
                                       new_group=True, die_with_parent=True,
                                       before_exec=system.perf_namespace)
        finally:
            for fd in (ctl_r, ack_w, logfd, null):
                os.close(fd)
        os.write(ctl_w, b"enable\n")
        ready, _, _ = select.select([ack_r], [], [], READY_TIMEOUT_S)
        answer = os.read(ack_r, 64) if ready else b""
        if not answer.startswith(b"ack"):
            lines = Path(log_path).read_text(errors="replace").strip().splitlines()
            raise UnavailableError(f"perf could not record {self.what}: "
                                   + (lines[-1] if lines else "no answer"))
        log.debug("perf recording %s (pid %d)", self.what, self._child.pid)

    @property
    def data(self) -> str:
        return os.path.join(self._dir, "perf.data")

    def script(self, fields: str, extra: Sequence[str] = ()) -> list[str]:
        """Stop the recording (SIGINT: perf writes its data out) and read it back with
        `perf script -F FIELDS`; the lines, as text."""
        assert self._child is not None
        self._child.signal(signal.SIGINT)
        if self._child.wait(30) is None:
            self._child.stop(grace=5)
        self._child = None
        out = spawn.run_tool(["perf", "script", "-i", self.data, "-F", fields, *extra],
                             timeout=300, errors="replace", before_exec=system.perf_namespace)
        if out.status != 0:
            lines = out.stderr.strip().splitlines()
            raise UnavailableError("perf script failed: " + (lines[-1] if lines else "?"))
        return out.stdout.splitlines()

    def close(self) -> None:
        if self._child is not None:
            self._child.stop(grace=5)
            self._child = None
        for fd in self._fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self._fds = []
        if self._stack is not None:
            self._stack.close()
            self._stack = None
