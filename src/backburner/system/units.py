"""systemd units whose properties we set or that we start, through systemd's D-Bus API:
where systemd owns the cgroup tree, weights are asked of it, never written behind its back
(govern: a service's weights at runtime, a scope of its own for work that shares a login
session's)."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from .. import procfs
from ..errors import BackburnerError, UsageError
from .change import Change

UNIT = "org.freedesktop.systemd1.Unit"
SLICE = "org.freedesktop.systemd1.Slice"


#: Where SetUnitProperties(runtime=true) writes what it sets (systemd.unit(5)).
CONTROL_DIR = "/run/systemd/system.control"
INTERFACES = {".service": "org.freedesktop.systemd1.Service",
              ".scope": "org.freedesktop.systemd1.Scope",
              ".slice": SLICE}


def _interface(unit: str) -> str:
    for suffix, iface in INTERFACES.items():
        if unit.endswith(suffix):
            return iface
    raise UsageError(f"{unit}: only services, scopes and slices have cgroup weights")


def _dropin(unit: str, prop: str) -> str:
    return os.path.join(CONTROL_DIR, f"{unit}.d", f"50-{prop}.conf")


def _read_small(path: str) -> str | None:
    try:
        return Path(path).read_text()
    except FileNotFoundError:
        return None


@dataclass
class UnitWeights(Change):
    """A unit's IOWeight=/CPUWeight= set at runtime (SetUnitProperties), for the processes
    it holds (a service govern matched), which stay in their unit: `systemctl stop` of it
    still stops them. Undo sets back the old values and takes out the runtime drop-ins the
    change created (systemd keeps one per property in /run/systemd/system.control)."""

    kind: ClassVar[str] = "unitweights"
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
        return {"values": values,
                "dropins": {k: _read_small(_dropin(self.unit, k)) for k in self.properties}}

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
            try:
                bus.unit_path(self.unit)
            except BackburnerError:
                return None  # the unit is gone: nothing of ours is left in memory
            bus.set_properties(self.unit, [(k, ("t", int(v)))
                                           for k, v in old["values"].items()])
        for prop, before in (old.get("dropins") or {}).items():
            path = _dropin(self.unit, prop)
            if before is None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
            elif _read_small(path) != before:
                Path(path).write_text(before)
        with contextlib.suppress(OSError):  # empty now: it was ours
            os.rmdir(os.path.dirname(_dropin(self.unit, "x")))
        return None


@dataclass
class TransientScope(Change):
    """Processes moved into a transient scope of their own in a weighted slice: for a
    process that shares its unit with interactive work (a login session's scope), whose
    weights must not change. Undo moves those still in it back to the unit each came from
    (AttachProcessesToUnit); the empty scope then goes by itself."""

    kind: ClassVar[str] = "scope"
    name: str
    slice_name: str
    pids: list[int]
    properties: dict[str, int] = field(default_factory=dict)

    def describe(self) -> str:
        return f"scope {self.name} in {self.slice_name} for PIDs {self.pids}"

    def read(self) -> dict[str, Any]:
        from ..systemd.bus import Bus

        with Bus.connect() as bus:
            return {"from": {str(p): bus.unit_of_pid(p) for p in self.pids},
                    "start": {str(p): procfs.start_time(p) for p in self.pids}}

    def apply(self) -> None:
        from ..systemd.bus import Bus

        props: list[Any] = [("PIDs", ("au", list(self.pids))),
                            ("Slice", ("s", self.slice_name)),
                            ("CollectMode", ("s", "inactive-or-failed")),
                            ("Description", ("s", "backburner govern: bulk work"))]
        props += [(k, ("t", int(v))) for k, v in self.properties.items()]
        with Bus.connect() as bus:
            bus.start_transient(self.name, props)

    def undo(self, old: Any, result: Any) -> str | None:
        from ..systemd.bus import Bus

        if not old:
            return None
        left: list[str] = []
        with Bus.connect() as bus:
            try:
                group = str(bus.unit_property(self.name, "org.freedesktop.systemd1.Scope",
                                              "ControlGroup"))
            except BackburnerError:
                return None
            for pid in _procs_of(group):
                origin = _origin(pid, old)
                if origin is None:
                    left.append(str(pid))
                    continue
                try:
                    bus.attach(origin, [pid])
                except BackburnerError:
                    left.append(str(pid))
        if left:
            return f"PIDs {', '.join(left)} stay in {self.name}: their own unit is gone"
        return None


def _procs_of(control_group: str) -> list[int]:
    root = next((m.mountpoint for m in procfs.mounts() if m.fstype == "cgroup2"), None)
    if root is None or not control_group:
        return []
    path = Path(root, control_group.lstrip("/"))
    out: list[int] = []
    for procs in path.rglob("cgroup.procs"):
        with contextlib.suppress(OSError, ValueError):
            out += [int(x) for x in procs.read_text().split()]
    return out


def _origin(pid: int, old: dict[str, Any]) -> str | None:
    """The unit a process came from: its own, or (born in the scope) its ancestor's."""
    units, starts = old.get("from", {}), old.get("start", {})
    cur: int | None = pid
    while cur:
        if str(cur) in units and procfs.start_time(cur) in (starts.get(str(cur)), None):
            return units[str(cur)]
        cur = procfs.parent_of(cur)
    first = next(iter(units.values()), None)
    return first
