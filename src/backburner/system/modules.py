"""Kernel modules we load (a congestion control the job's sockets are to use), unloaded
again when nothing uses them.

A loaded module is known by its directory under /sys/module; the undo removes only a
module that was not loaded before the change and that nothing holds now (its reference
count is 0): a socket still using it keeps it, and the undo says so.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, ClassVar

from .change import Change, run_tool, tool

SYS_MODULE = "/sys/module"


def module_loaded(name: str) -> bool:
    return os.path.isdir(os.path.join(SYS_MODULE, name))


def module_available(name: str) -> bool:
    """Whether `modprobe` can load `name` here (a dry run; False without modprobe)."""
    try:
        return bool(run_tool(["modprobe", "--dry-run", "--quiet", name]).status == 0)
    except FileNotFoundError:
        return False


def _refcount(name: str) -> int:
    try:
        with open(os.path.join(SYS_MODULE, name, "refcnt")) as f:
            return int(f.read().strip() or 0)
    except (OSError, ValueError):
        return 0


@dataclass
class KernelModule(Change):
    """A kernel module loaded with `modprobe`."""

    kind: ClassVar[str] = "kernel-module"
    makes: ClassVar[bool] = True
    name: str

    def describe(self) -> str:
        return f"kernel module {self.name}"

    def read(self) -> bool:
        return module_loaded(self.name)

    def existed(self, old: Any) -> bool:
        return bool(old)

    def apply(self) -> None:
        if not module_loaded(self.name):
            tool(["modprobe", self.name], f"loading {self.describe()}")

    def undo(self, old: Any, result: Any) -> str | None:
        if old or not module_loaded(self.name):
            return None  # loaded before us, or already gone
        if _refcount(self.name):
            return f"kept {self.describe()}: still in use"
        try:
            res = run_tool(["modprobe", "--remove", self.name])
        except FileNotFoundError:
            return f"kept {self.describe()}: modprobe is not installed"
        if res.status != 0 and module_loaded(self.name):
            return f"kept {self.describe()}: {(res.stderr or '').strip()}"
        return None
