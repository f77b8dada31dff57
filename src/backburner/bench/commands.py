"""The commands a bench run is given as text: probes (``NAME=COMMAND``), setup variants
(`Prepare`: a command, or an IO scheduler's tunables) and how a command is split and run.

`config` checks the configuration as a whole; this module says what one command text
means, so the plan, the runner and the CLI read a probe or a setup variant the same way.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from ..base.errors import UsageError
from ..kernel import block


@dataclass(frozen=True)
class Prepare:
    """A setup variant (`--setup-variant NAME=COMMAND`): a command run after the cache drop,
    before the probe or with it; the cells with it are compared with those without.

    Or an IO scheduler's tunables (`--setup-variant-tune NAME=SCHEDULER:KEY=VALUE,...`,
    e.g. ``si0=bfq:slice_idle=0``): written to the device's queue/iosched/ files (journaled,
    put back) before the cell's load and probe start; its cells exist only under that
    scheduler, and the cells without it run with the scheduler's own values."""

    name: str
    command: str
    during: bool
    scheduler: str | None = None  # a tunables variant: the scheduler whose files they are
    tunables: tuple[tuple[str, str], ...] = ()

    @property
    def runs_command(self) -> bool:
        return self.scheduler is None

    @classmethod
    def parse(cls, text: str) -> Prepare:
        mode, _, rest = text.partition(":")
        name, sep, command = rest.partition("=")
        if mode not in ("before", "during", "tune") or not sep or not _LABEL.fullmatch(name) \
                or not command.strip():
            raise UsageError(f"setup variant {text!r} does not parse",
                             "use --setup-variant NAME='COMMAND' (or --setup-variant-during, "
                             "--setup-variant-tune NAME=SCHEDULER:KEY=VALUE,...)")
        if name == "none":
            raise UsageError("'none' names the cells without a setup variant",
                             "choose another name")
        if mode == "tune":
            scheduler, tunables = _tunables(text, command.strip())
            return cls(name, command.strip(), False, scheduler, tunables)
        shlex_split(command)
        return cls(name, command.strip(), mode == "during")


_TUNABLE = re.compile(r"([a-z][a-z0-9_]*)=([0-9A-Za-z_.-]+)")


def _tunables(text: str, spec: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    """'bfq:slice_idle=0,low_latency=0' -> ('bfq', (('slice_idle', '0'), ...))."""
    scheduler, colon, items = spec.partition(":")
    pairs = [_TUNABLE.fullmatch(item.strip()) for item in items.split(",")]
    if not colon or not all(pairs):
        raise UsageError(f"setup variant {text!r} does not parse",
                         "use --setup-variant-tune NAME=SCHEDULER:KEY=VALUE[,KEY=VALUE...], "
                         "e.g. si0=bfq:slice_idle=0")
    tunables = tuple((m.group(1), m.group(2)) for m in pairs if m)
    if len({k for k, _ in tunables}) != len(tunables):
        raise UsageError(f"setup variant {text!r} sets a tunable twice")
    return block.check_scheduler(scheduler), tunables


def command_argv(command: str, shell: str) -> list[str]:
    """How a --prepare or --setup-variant command runs: `SHELL -c COMMAND` (sh by default,
    as hyperfine's), or with --shell=none (-N) split into words and run directly."""
    if shell == "none":
        return shlex_split(command)
    return [*shlex_split(shell), "-c", command]


_LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*")


def shlex_split(command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError as err:
        raise UsageError(f"command {command!r} does not parse: {err}") from None


def split_probe(text: str) -> tuple[str, str]:
    """'NAME=COMMAND' -> (NAME, COMMAND); a plain command is labelled by itself as typed."""
    head, sep, rest = text.partition("=")
    if sep and _LABEL.fullmatch(head) and rest.strip():
        return head, rest.strip()
    return text.strip(), text.strip()
