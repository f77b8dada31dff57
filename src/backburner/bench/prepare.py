"""Preparation steps of a cell (`bench --prepare NAME='COMMAND'`): what runs after the cache
drop and before the probe (a readahead replay, a warm-up of something else), or together
with the probe (`--prepare-during`, as a replay at boot runs while the desktop starts).

The command runs on the host, through `sh -c`, never inside the probe's chroot; it is told
where the probe's files are: ``BACKBURNER_ROOT`` (the chroot of a testbed, else ``/``) and
``BACKBURNER_DEVICE`` (the device under test, ``/dev/NAME``). A step that fails or outlives
the trial's timeout is recorded with the trial and stopped; it never holds the bench. The
last line it printed is kept with the trial (a replay's "replayed N files, X MB in S s").
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass

from .. import logtail, spawn
from .config import Prepare
from .devices import Device


@dataclass(frozen=True)
class StepResult:
    name: str
    status: str  # ok | failed | timeout
    seconds: float
    exit_code: int | None
    said: str = ""  # the last line of its output

    def as_dict(self) -> dict[str, object]:
        return {"name": self.name, "status": self.status, "seconds": self.seconds,
                "exit_code": self.exit_code, "said": self.said}


def _env(device: Device) -> dict[str, str]:
    return {**os.environ, "BACKBURNER_ROOT": device.chroot or "/",
            "BACKBURNER_DEVICE": f"/dev/{device.name}"}


_SAID_CHARS = 300


def _output_file(device: Device) -> str:
    return os.path.join(device.workdir, "prepare.out")  # our private work directory


def _launch(step: Prepare, device: Device) -> spawn.Child:
    fd = os.open(_output_file(device), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
                 | os.O_CLOEXEC, 0o600)
    try:
        return spawn.launch(["sh", "-c", step.command], env=_env(device), cwd=device.workdir,
                            stdin=subprocess.DEVNULL, stdout=fd, stderr=fd, new_group=True,
                            die_with_parent=True)
    finally:
        os.close(fd)  # the step holds its own copy


def _last_line(device: Device) -> str:
    return next(iter(logtail.last_lines(_output_file(device), 1, _SAID_CHARS)), "")


def _result(step: Prepare, child: spawn.Child, device: Device, timeout: float, t0: float
            ) -> StepResult:
    try:
        out = child.wait(max(0.0, timeout - (time.monotonic() - t0)))
        if out is None:
            child.stop_tree(2.0)
            return StepResult(step.name, "timeout", time.monotonic() - t0, None,
                              _last_line(device))
    except BaseException:
        child.stop_tree(1.0)
        raise
    return StepResult(step.name, "ok" if out.ok else "failed", time.monotonic() - t0,
                      out.exit_code, _last_line(device))


def prepare_step(step: Prepare, device: Device, timeout: float) -> StepResult:
    """Run a before-step to its end (bounded by the trial timeout)."""
    t0 = time.monotonic()
    return _result(step, _launch(step, device), device, timeout, t0)


class During:
    """A step started just before the probe; `finish` after the probe waits for it (bounded)
    and stops it with its tree if it is still running."""

    def __init__(self, step: Prepare, device: Device) -> None:
        self.step = step
        self.device = device
        self.t0 = time.monotonic()
        self.child = _launch(step, device)

    def finish(self, timeout: float) -> StepResult:
        return _result(self.step, self.child, self.device, timeout, self.t0)


def start_during(step: Prepare, device: Device) -> During:
    return During(step, device)
