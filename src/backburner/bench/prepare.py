"""Commands run around a trial: hyperfine's `--prepare COMMAND`, before every trial, and the
setup variants of a cell (`--setup-variant NAME='COMMAND'`): what runs after the cache drop
and before the probe (a readahead replay, a warm-up of something else), or together with the
probe (`--setup-variant-during`, as a replay at boot runs while the desktop starts).

Each runs on the host, never inside the probe's chroot, through the shell (`sh -c` unless
--shell says otherwise) or, with --shell=none (-N), split into words and run directly. It is
told where the probe's files are: ``BACKBURNER_ROOT`` (the chroot of a testbed, else ``/``)
and ``BACKBURNER_DEVICE`` (the device under test, ``/dev/NAME``). A command that fails or
outlives the trial's timeout is recorded with the trial and stopped; it never holds the
bench. A variant's last line of output is kept with the trial (a replay's "replayed N files,
X MB in S s"); a failed --prepare fails its trial, with its last lines of stderr.
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass

from .. import spawn
from ..files import logtail
from .commands import Prepare, command_argv
from .devices import Device


@dataclass(frozen=True)
class StepResult:
    name: str
    status: str  # ok | failed | timeout
    seconds: float
    exit_code: int | None
    said: str = ""  # the last line of its output
    tail: tuple[str, ...] = ()  # a --prepare's last lines of stderr, when it did not succeed

    def as_dict(self) -> dict[str, object]:
        return {"name": self.name, "status": self.status, "seconds": self.seconds,
                "exit_code": self.exit_code, "said": self.said}


def _env(device: Device) -> dict[str, str]:
    return {**os.environ, "BACKBURNER_ROOT": device.chroot or "/",
            "BACKBURNER_DEVICE": f"/dev/{device.name}"}


_SAID_CHARS = 300


def _output_file(device: Device) -> str:
    return os.path.join(device.workdir, "prepare.out")  # our private work directory


def _open_private(path: str) -> int:
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                   0o600)


def _launch(command: str, shell: str, device: Device, path: str, *,
            stdout_too: bool = True) -> spawn.Child:
    """The command, its stderr (and stdout, unless not wanted) into `path` (private)."""
    fd = _open_private(path)
    try:
        return spawn.launch(command_argv(command, shell), env=_env(device), cwd=device.workdir,
                            stdin=subprocess.DEVNULL,
                            stdout=fd if stdout_too else subprocess.DEVNULL, stderr=fd,
                            new_group=True, die_with_parent=True)
    finally:
        os.close(fd)  # the command holds its own copy


def _last_line(path: str) -> str:
    return next(iter(logtail.last_lines(path, 1, _SAID_CHARS)), "")


def _result(step: Prepare, child: spawn.Child, path: str, timeout: float, t0: float
            ) -> StepResult:
    """Wait for the command (bounded); its output's last line from `path`."""
    try:
        out = child.wait(max(0.0, timeout - (time.monotonic() - t0)))
        if out is None:
            child.stop_tree(2.0)
            return StepResult(step.name, "timeout", time.monotonic() - t0, None,
                              _last_line(path))
    except BaseException:
        child.stop_tree(1.0)
        raise
    return StepResult(step.name, "ok" if out.ok else "failed", time.monotonic() - t0,
                      out.exit_code, _last_line(path))


def prepare_step(step: Prepare, device: Device, timeout: float, shell: str = "sh"
                 ) -> StepResult:
    """Run a before-step to its end (bounded by the trial timeout)."""
    t0 = time.monotonic()
    child = _launch(step.command, shell, device, _output_file(device))
    return _result(step, child, _output_file(device), timeout, t0)


class During:
    """A step started just before the probe; `finish` after the probe waits for it (bounded)
    and stops it with its tree if it is still running."""

    def __init__(self, step: Prepare, device: Device, shell: str = "sh") -> None:
        self.step = step
        self.device = device
        self.t0 = time.monotonic()
        self.child = _launch(step.command, shell, device, _output_file(device))

    def finish(self, timeout: float) -> StepResult:
        return _result(self.step, self.child, _output_file(self.device), timeout, self.t0)


def start_during(step: Prepare, device: Device, shell: str = "sh") -> During:
    return During(step, device, shell)


TAIL_LINES, TAIL_CHARS = 5, 600  # as much of a failed --prepare's stderr as of a probe's


def before_trial(command: str, device: Device, timeout: float, shell: str = "sh"
                 ) -> StepResult:
    """hyperfine's --prepare: `command` to its end before a trial, un-timed (bounded by the
    trial timeout); its stdout is dropped, the last lines of its stderr kept if it fails."""
    path = os.path.join(device.workdir, "prepare.err")
    t0 = time.monotonic()
    step = Prepare("prepare", command, during=False)
    child = _launch(command, shell, device, path, stdout_too=False)
    result = _result(step, child, path, timeout, t0)
    if result.status == "ok":
        return result
    tail = tuple(logtail.last_lines(path, TAIL_LINES, TAIL_CHARS))
    return StepResult(result.name, result.status, result.seconds, result.exit_code,
                      tail[-1] if tail else "", tail)
