"""systemd units whose properties we set, that we start or pause, through systemd's D-Bus
API: where systemd owns the cgroup tree, weights and pauses are asked of it, never written
behind its back (govern: a service's weights at runtime, a scope of its own for work that
shares a login session's, a governed unit frozen while the desktop waits for the disk)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from ..base.errors import BackburnerError, UsageError
from ..kernel import cgroups, procfs
from .change import Change, write

SLICE = "org.freedesktop.systemd1.Slice"


#: Where SetUnitProperties(runtime=true) writes what it sets (systemd.unit(5)): beside a
#: unit file's unit, or a transient unit's.
CONTROL_DIR = "/run/systemd/system.control"
TRANSIENT_DIR = "/run/systemd/transient"
INTERFACES = {".service": "org.freedesktop.systemd1.Service",
              ".scope": "org.freedesktop.systemd1.Scope",
              ".slice": SLICE}


def _interface(unit: str) -> str:
    for suffix, iface in INTERFACES.items():
        if unit.endswith(suffix):
            return iface
    raise UsageError(f"{unit}: only services, scopes and slices have cgroup weights")


def _dropin(unit: str, prop: str, top: str = CONTROL_DIR) -> str:
    return os.path.join(top, f"{unit}.d", f"50-{prop}.conf")


def _read_small(path: str) -> str | None:
    try:
        return Path(path).read_text()
    except FileNotFoundError:
        return None


@dataclass
class UnitWeights(Change):
    """A unit's IOWeight=/CPUWeight= set at runtime (SetUnitProperties), for the processes
    it holds (a service govern matched), which stay in their unit: `systemctl stop` of it
    still stops them. Undo sets back the old values (an unset one as unset) and takes out
    the runtime drop-ins the change created (systemd writes one per property in
    /run/systemd/system.control); one it could not take out says the old value, so the
    unit is as before either way, and it is gone at the next boot."""

    kind: ClassVar[str] = "unitweights"
    makes: ClassVar[bool] = False
    unit: str
    properties: dict[str, int] = field(default_factory=dict)

    def describe(self) -> str:
        props = ", ".join(f"{k}={v}" for k, v in self.properties.items())
        return f"{props} of {self.unit}"

    def read(self) -> dict[str, Any]:
        from ..systemd.bus import Bus

        iface = _interface(self.unit)
        with Bus.connect() as bus:
            path = bus.unit_path(self.unit)
            values = {k: int(bus.get(path, iface, k)) for k in self.properties}
            transient = bool(bus.get(path, "org.freedesktop.systemd1.Unit", "Transient"))
        top = TRANSIENT_DIR if transient else CONTROL_DIR
        return {"values": values, "top": top,
                "dropins": {k: _read_small(_dropin(self.unit, k, top))
                            for k in self.properties}}

    def apply(self) -> None:
        from ..systemd.bus import Bus

        with Bus.connect() as bus:
            bus.set_properties(self.unit, [(k, ("t", int(v)))
                                           for k, v in self.properties.items()])

    def undo(self, old: Any, result: Any) -> str | None:
        from ..systemd.bus import Bus

        if not old:
            return None
        with Bus.connect() as bus:
            if bus.loaded(self.unit):  # else gone (a stopped transient unit): files only
                bus.set_properties(self.unit, [(k, ("t", int(v)))
                                               for k, v in old["values"].items()])
        top = old.get("top", CONTROL_DIR)
        left = [path for prop, before in (old.get("dropins") or {}).items()
                if not _put_back(path := _dropin(self.unit, prop, top), before)]
        with contextlib.suppress(OSError):  # empty now: it was ours
            os.rmdir(os.path.dirname(_dropin(self.unit, "x", top)))
        if left:
            return (f"{', '.join(left)} left in place (it says the old value; a read-only "
                    "/run?)")
        return None


def _put_back(path: str, before: str | None) -> bool:
    """A runtime drop-in as it was (absent, or its old text); False if it could not be."""
    try:
        if before is None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        elif _read_small(path) != before:
            Path(path).write_text(before)
    except OSError:
        return False
    return True


@dataclass
class TransientScope(Change):
    """Processes moved into a transient scope of their own in a weighted slice: for work
    that shares its unit with interactive work (a login session's scope, a user's service
    manager), whose weights must not change. The slice is made with the scope when it does
    not exist (with the weights, stopped by systemd once unneeded), as for `run`. Undo
    moves every process still in the scope (those born there too) back into the group its
    governed ancestor came from; the empty scope then goes by itself."""

    kind: ClassVar[str] = "scope"
    makes: ClassVar[bool] = True
    name: str
    slice_name: str
    pids: list[int]
    properties: dict[str, int] = field(default_factory=dict)

    def describe(self) -> str:
        return f"scope {self.name} in {self.slice_name} for PIDs {self.pids}"

    def read(self) -> dict[str, Any]:
        return {"from": {str(p): cgroups.unified_dir(p) for p in self.pids},
                "start": {str(p): procfs.start_time(p) for p in self.pids},
                "loaded": _loaded(self.name)}

    def existed(self, old: Any) -> bool:
        return bool((old or {}).get("loaded"))

    def apply(self) -> None:
        self.apply_with(lambda _partial: None)

    def apply_with(self, record: Callable[[Any], None]) -> None:
        from ..systemd.bus import Bus

        record(None)  # asked for: systemd may move the processes and then fail
        with Bus.connect() as bus:
            bus.start_scope(self.name, self.pids, self.slice_name,
                            [(k, ("t", int(v))) for k, v in self.properties.items()],
                            "backburner govern: bulk work on the back burner")

    def undo(self, old: Any, result: Any) -> str | None:
        if not old:
            return None
        here = _scope_dir(self.name, self.slice_name)
        left: list[str] = []
        for pid in cgroups.pids(here) if here else []:
            origin = _origin(pid, old)
            if origin is None or not os.path.isdir(origin):
                left.append(str(pid))
                continue
            try:
                write(cgroups.procs_file(origin), str(pid))
            except BackburnerError:
                if procfs.start_time(pid) is not None:
                    left.append(str(pid))
        if left:
            return f"PIDs {', '.join(left)} stay in {self.name}: the group they came from is gone"
        return None


@dataclass
class DelegatedScope(Change):
    """A transient scope with `Delegate=yes` that takes in the calling process: for a
    command that needs groups of its own (bench's probe and load groups) where systemd owns
    the tree. systemd hands the scope's subtree over, so the groups made and the files
    written below it are ours to manage, not written behind systemd's back. apply() returns
    the scope's directory. Undo moves the process back to the group it came from (written
    directly, as for TransientScope: systemd attaches processes only to delegated units)
    and stops the scope: whatever is still in it is ended and systemd removes its groups.
    After a SIGKILL the process is gone, its helpers died with it, and systemd has stopped
    the empty scope already; a replay stops it if not."""

    kind: ClassVar[str] = "delegated"
    makes: ClassVar[bool] = True
    name: str
    pid: int
    slice_name: str = "system.slice"

    def describe(self) -> str:
        return f"delegated scope {self.name} in {self.slice_name} for PID {self.pid}"

    def read(self) -> dict[str, Any]:
        return {"from": cgroups.unified_dir(self.pid), "start": procfs.start_time(self.pid),
                "loaded": _loaded(self.name)}

    def existed(self, old: Any) -> bool:
        return bool((old or {}).get("loaded"))

    def apply(self) -> str:
        return self.apply_with(lambda _partial: None)

    def apply_with(self, record: Callable[[Any], None]) -> str:
        from ..systemd.bus import Bus

        record(None)  # asked for: systemd may start it and still fail the call
        with Bus.connect() as bus:
            bus.start_scope(self.name, [self.pid], self.slice_name, [],
                            "backburner: groups of its own (delegated)",
                            extra=[("Delegate", ("b", True))])
        here = _scope_dir(self.name, self.slice_name)
        if here is None or not os.path.isdir(here):
            raise BackburnerError(f"{self.name} started, but its group {here} is not there")
        return here

    def undo(self, old: Any, result: Any) -> str | None:
        from ..systemd.bus import Bus

        here = _scope_dir(self.name, self.slice_name)
        origin = (old or {}).get("from")
        if (here and origin and os.path.isdir(origin) and not _inside(origin, here)
                and procfs.start_time(self.pid) == (old or {}).get("start")
                and _inside(cgroups.unified_dir(self.pid), here)):
            write(cgroups.procs_file(origin), str(self.pid))
        if here and _inside(cgroups.unified_dir(os.getpid()), here):  # stopping it would end us
            return f"{self.name} left to systemd: it goes when this process ends"
        with Bus.connect() as bus:
            if bus.loaded(self.name):
                bus.stop(self.name)
        return None


def _loaded(unit: str) -> bool:
    """Whether systemd has a unit of this name now (a scope's name carries its owner's
    PID and start time: one there before a change is someone else's)."""
    from ..systemd.bus import Bus

    with Bus.connect() as bus:
        return bus.loaded(unit)


def _inside(group: str | None, top: str) -> bool:
    return group is not None and (group == top or group.startswith(top + "/"))


def _scope_dir(name: str, slice_name: str) -> str | None:
    """Where systemd puts a scope of a slice: the slice's dashes nest (a-b.slice is in
    a.slice), the scope is a directory of the innermost."""
    root = cgroups.unified_root()
    if root is None:
        return None
    parts = slice_name.removesuffix(".slice").split("-")
    slices = ["-".join(parts[:i + 1]) + ".slice" for i in range(len(parts))]
    return os.path.join(root, *slices, name)


def _origin(pid: int, old: dict[str, Any]) -> str | None:
    """The group a process goes back to: its own before the move, or (born in the scope)
    its governed ancestor's."""
    dirs, starts = old.get("from", {}), old.get("start", {})
    cur: int | None = pid
    while cur:
        if str(cur) in dirs and procfs.start_time(cur) in (starts.get(str(cur)), None):
            return dirs[str(cur)]
        cur = procfs.parent_of(cur)
    return next(iter(dirs.values()), None)


@dataclass
class UnitFrozen(Change):
    """A unit paused (FreezeUnit): govern's throttle where systemd owns the groups. Apply
    records only that it may be frozen; `freeze`/`thaw` follow the pressure; undo thaws."""

    kind: ClassVar[str] = "unitfrozen"
    makes: ClassVar[bool] = False
    unit: str

    @property
    def path(self) -> str:
        return self.unit

    def describe(self) -> str:
        return f"pauses of {self.unit}"

    def read(self) -> str:
        from ..systemd.bus import Bus

        with Bus.connect() as bus:
            return str(bus.unit_property(self.unit, "org.freedesktop.systemd1.Unit",
                                         "FreezerState"))

    def apply(self) -> None:
        return None

    def freeze(self) -> None:
        self._set(True)

    def thaw(self) -> None:
        self._set(False)

    def _set(self, frozen: bool) -> None:
        from ..systemd.bus import Bus

        with Bus.connect() as bus:
            bus.freeze(self.unit, frozen)

    def undo(self, old: Any, result: Any) -> str | None:
        from ..systemd.bus import Bus

        with Bus.connect() as bus:
            try:
                state = str(bus.unit_property(self.unit, "org.freedesktop.systemd1.Unit",
                                              "FreezerState"))
            except BackburnerError:
                return None  # gone
            if state in ("frozen", "freezing") and old in ("running", "thawing", None):
                bus.freeze(self.unit, False)
        return None
