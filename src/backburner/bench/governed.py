"""Cells whose load is governed (`bench --policy govern`): the load starts unprotected, as
any program an updater starts, and a `backburner govern` daemon with one rule that names the
load's program puts it on the back burner (policy background) once it runs — so the report
shows whether the daemon gets all of `run`'s protection without anyone wrapping the command.

The daemon runs only while a governed load does (a rule naming fio would otherwise also
catch the same load in the cells that must run it unprotected): started before the load,
once it has subscribed to the kernel's process events and scanned /proc (its ready file),
and stopped with SIGTERM after the load, which puts back everything it changed.
"""

from __future__ import annotations

import os
import re
import subprocess
import time

from .. import spawn
from ..base.errors import SystemStateError
from ..files import logtail, safepath
from ..store.cell import GOVERNED_RULE_POLICY as RULE_POLICY
from .loads import LoadSpec

READY_TIMEOUT_S = 30.0


def rule_for(spec: LoadSpec) -> str:
    """A rule naming the load's program, as a distribution's rule names an updater."""
    if spec.kind == "fio":
        match = 'comm = ["fio"]'
    elif spec.kind == "install-loop":
        match = r'cmdline = "backburner\\.bench\\.installer"'
    elif spec.kind == "copy":
        match = r'cmdline = "backburner\\.bench\\.copier"'
    elif spec.kind == "dpkg-loop":
        match = 'comm = ["dpkg"]'
    elif spec.kind == "flatpak-loop":
        match = 'comm = ["flatpak"]'
    elif spec.kind == "flatpak-api":
        match = r'cmdline = "bench/flatpak_worker\\.py"'
    else:
        escaped = re.escape(spec.command).replace("\\", "\\\\").replace('"', '\\"')
        match = f'cmdline = "{escaped}"'
    return (f'[[rule]]\nname = "bench-load"\nmatch = {{ {match} }}\n'
            f'policy = "{RULE_POLICY}"\n')


class Governor:
    """The daemon around one run of a governed load."""

    def __init__(self, spec: LoadSpec, workdir: str) -> None:
        self.dir = os.path.join(workdir, "govern")
        self.rules = os.path.join(self.dir, "rules")
        self.ready = os.path.join(self.dir, "ready")
        self.spec = spec
        self.child: spawn.Child | None = None

    def start(self) -> None:
        os.makedirs(self.rules, mode=0o755, exist_ok=True)
        rule = os.path.join(self.rules, "bench.toml")
        for stale in (rule, self.ready):
            if os.path.lexists(stale):
                os.unlink(stale)
        fd = safepath.create_new(rule, 0o644)
        with os.fdopen(fd, "w") as f:
            f.write(rule_for(self.spec))
        log = os.open(os.path.join(self.dir, "govern.log"),
                      os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
        try:
            self.child = spawn.launch(
                spawn.python_module("backburner", "govern", "run", "--rules", self.rules,
                                    "--no-defaults", "--ready-file", self.ready, "-q"),
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, new_group=True,
                die_with_parent=True)
        finally:
            os.close(log)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not os.path.exists(self.ready):
            if self.child.poll() is not None or time.monotonic() > deadline:
                out = self.child.poll() or self.child.stop_tree(2.0)
                raise SystemStateError(f"the govern daemon did not start ({out.describe()}): "
                                       f"{self._last_line()}")
            time.sleep(0.01)

    def stop(self) -> None:
        if self.child is not None:
            self.child.stop_tree(grace=10.0)  # SIGTERM: it puts back what it changed
            self.child = None

    def _last_line(self) -> str:
        return next(iter(logtail.last_lines(os.path.join(self.dir, "govern.log"))), "")
