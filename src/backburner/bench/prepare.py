"""Preparation steps of a cell (`bench --prepare NAME='COMMAND'`): what runs after the cache
drop and before the probe (a readahead replay, a warm-up of something else), or together
with the probe (`--prepare-during`, as a replay at boot runs while the desktop starts).

The command runs on the host, through `sh -c`, never inside the probe's chroot; it is told
where the probe's files are: ``BACKBURNER_ROOT`` (the chroot of a testbed, else ``/``) and
``BACKBURNER_DEVICE`` (the device under test, ``/dev/NAME``). A step that fails or outlives
the trial's timeout is recorded with the trial and stopped; it never holds the bench.
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass

from .. import spawn
from .config import Prepare
from .devices import Device


@dataclass(frozen=True)
class StepResult:
    name: str
    status: str  # ok | failed | timeout
    seconds: float
    exit_code: int | None

    def as_dict(self) -> dict[str, object]:
        return {"name": self.name, "status": self.status, "seconds": self.seconds,
                "exit_code": self.exit_code}


def _env(device: Device) -> dict[str, str]:
    return {**os.environ, "BACKBURNER_ROOT": device.chroot or "/",
            "BACKBURNER_DEVICE": f"/dev/{device.name}"}


def _launch(step: Prepare, device: Device) -> spawn.Child:
    return spawn.launch(["sh", "-c", step.command], env=_env(device), cwd=device.workdir,
                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL, new_group=True, die_with_parent=True)


def _result(step: Prepare, child: spawn.Child, timeout: float, t0: float) -> StepResult:
    try:
        out = child.wait(max(0.0, timeout - (time.monotonic() - t0)))
        if out is None:
            child.stop_tree(2.0)
            return StepResult(step.name, "timeout", time.monotonic() - t0, None)
    except BaseException:
        child.stop_tree(1.0)
        raise
    return StepResult(step.name, "ok" if out.ok else "failed", time.monotonic() - t0,
                      out.exit_code)


def prepare_step(step: Prepare, device: Device, timeout: float) -> StepResult:
    """Run a before-step to its end (bounded by the trial timeout)."""
    t0 = time.monotonic()
    return _result(step, _launch(step, device), timeout, t0)


class During:
    """A step started just before the probe; `finish` after the probe waits for it (bounded)
    and stops it with its tree if it is still running."""

    def __init__(self, step: Prepare, device: Device) -> None:
        self.step = step
        self.t0 = time.monotonic()
        self.child = _launch(step, device)

    def finish(self, timeout: float) -> StepResult:
        return _result(self.step, self.child, timeout, self.t0)


def start_during(step: Prepare, device: Device) -> During:
    return During(step, device)
