"""systemd's D-Bus API (org.freedesktop.systemd1), through jeepney: the natural interface
for what `systemctl set-property`, `systemd-run` and `systemctl show` do by hand.

jeepney is a pure-Python D-Bus implementation (no C extension, packaged by Debian, Fedora
and others as python3-jeepney), so a machine needs no compiler and no libsystemd binding.
The system bus is used where a bus daemon runs; as root without one, systemd's own
private socket (what systemctl uses then), which speaks D-Bus directly, without a bus.

Every failure is one of our errors: no systemd to talk to (69), a unit that does not exist
(66), a request systemd refuses as invalid (64), access denied (77).
"""

from __future__ import annotations

import itertools
import logging
import os
import struct
import time
from collections.abc import Sequence
from typing import Any

from ..base.errors import (
    AccessError,
    BackburnerError,
    NotFoundError,
    SystemStateError,
    UnavailableError,
    UsageError,
)

log = logging.getLogger(__name__)

SYSTEMD = "org.freedesktop.systemd1"
MANAGER_PATH = "/org/freedesktop/systemd1"
MANAGER = "org.freedesktop.systemd1.Manager"
UNIT = "org.freedesktop.systemd1.Unit"
PROPERTIES = "org.freedesktop.DBus.Properties"
SYSTEM_BUS = "/run/dbus/system_bus_socket"
PRIVATE = "/run/systemd/private"
#: What jeepney raises for a peer that speaks something other than D-Bus (its parser
#: fails with KeyError on most garbage; authentication with ValueError or EOFError).
_NOT_DBUS = (ValueError, LookupError, EOFError, struct.error)
#: cgroup weights: "unset" is this value (systemd's CGROUP_WEIGHT_INVALID)
WEIGHT_UNSET = 2**64 - 1

Property = tuple[str, tuple[str, Any]]  # ("IOWeight", ("t", 10))


def _error(name: str, text: str, what: str) -> BackburnerError:
    """A D-Bus error reply as one of ours."""
    short = name.rsplit(".", 1)[-1]
    if short in ("NoSuchUnit", "LoadFailed", "UnknownObject", "NoSuchProcess"):
        return NotFoundError(f"{what}: {text or short}")
    if short in ("AccessDenied", "InteractiveAuthorizationRequired"):
        return AccessError(f"{what}: systemd refused access ({text or short})",
                           "run it as root")
    if short in ("InvalidArgs", "PropertyReadOnly", "UnitExists", "NotSupported"):
        return UsageError(f"{what}: {text or short}")
    if short in ("ServiceUnknown", "NoReply", "Disconnected", "NameHasNoOwner"):
        return UnavailableError(f"{what}: systemd does not answer on D-Bus ({text or short})")
    return SystemStateError(f"{what}: {name}: {text}")


class Bus:
    """One connection to systemd's manager. ``with Bus.connect() as bus: ...``"""

    def __init__(self, conn: Any, direct: bool) -> None:
        self._conn = conn
        self.direct = direct  # systemd's private socket, not through a bus daemon

    # --- connecting ----------------------------------------------------------------------

    @classmethod
    def connect(cls, timeout_s: float = 5.0) -> Bus:
        try:
            from jeepney.io import blocking
        except ImportError:
            raise UnavailableError("talking to systemd needs jeepney, which is not installed",
                                   "apt-get install python3-jeepney, or pip install jeepney"
                                   ) from None
        address = os.environ.get("DBUS_SYSTEM_BUS_ADDRESS", f"unix:path={SYSTEM_BUS}")
        try:
            if address.startswith("unix:path=") and not os.path.exists(
                    address.removeprefix("unix:path=").split(",")[0]) and \
                    os.path.exists(PRIVATE):
                return cls(_Direct(blocking.prep_socket(PRIVATE, timeout=timeout_s)), True)
            try:
                return cls(blocking.open_dbus_connection(address, auth_timeout=timeout_s),
                           False)
            except (OSError, *_NOT_DBUS):
                if os.geteuid() == 0 and os.path.exists(PRIVATE):
                    return cls(_Direct(blocking.prep_socket(PRIVATE, timeout=timeout_s)),
                               True)
                raise
        except (OSError, *_NOT_DBUS) as err:
            raise UnavailableError(f"systemd's D-Bus API is not reachable ({_why(err)})",
                                   "is systemd PID 1, and the system bus running?") from None

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Bus:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- calls ---------------------------------------------------------------------------

    def call(self, path: str, interface: str, method: str, signature: str = "",
             body: Sequence[Any] = (), what: str = "", timeout_s: float = 25.0) -> tuple:
        from jeepney import DBusAddress, new_method_call
        from jeepney.wrappers import DBusErrorResponse, unwrap_msg

        msg = new_method_call(DBusAddress(path, SYSTEMD, interface), method, signature,
                              tuple(body))
        try:
            reply = self._conn.send_and_get_reply(msg, timeout=timeout_s)
            return tuple(unwrap_msg(reply))
        except DBusErrorResponse as err:
            text = str(err.data[0]) if err.data else ""
            raise _error(err.name, text, what or f"{interface}.{method}") from None
        except TimeoutError:
            raise UnavailableError(f"{what or method}: systemd did not answer within "
                                   f"{timeout_s:g} s") from None
        except OSError as err:
            raise UnavailableError(f"{what or method}: the D-Bus connection failed "
                                   f"({err.strerror or err})") from None
        except _NOT_DBUS as err:
            raise UnavailableError(f"{what or method}: the answer is not D-Bus "
                                   f"({_why(err)})") from None

    def manager(self, method: str, signature: str = "", body: Sequence[Any] = (),
                what: str = "") -> tuple:
        return self.call(MANAGER_PATH, MANAGER, method, signature, body, what)

    def get(self, path: str, interface: str, name: str) -> Any:
        """One property's value (the variant unwrapped)."""
        (variant,) = self.call(path, PROPERTIES, "Get", "ss", (interface, name),
                               what=f"reading {name}")
        return variant[1]

    # --- units ---------------------------------------------------------------------------

    def unit_path(self, name: str) -> str:
        """The object of a unit, loaded if it is not (a slice with no unit file loads as an
        empty one: that is how systemd makes slices on demand)."""
        (path,) = self.manager("LoadUnit", "s", (name,), what=f"unit {name}")
        return str(path)

    def loaded(self, name: str) -> bool:
        """Whether systemd has the unit in memory now (GetUnit: without loading it)."""
        try:
            (path,) = self.manager("GetUnit", "s", (name,), what=f"unit {name}")
        except NotFoundError:
            return False
        return str(self.get(path, UNIT, "LoadState")) == "loaded"

    def unit_of_pid(self, pid: int) -> str:
        """The name of the unit a process belongs to (its service or scope)."""
        (path,) = self.manager("GetUnitByPID", "u", (pid,), what=f"the unit of PID {pid}")
        return str(self.get(path, UNIT, "Id"))

    def unit_property(self, name: str, interface: str, prop: str) -> Any:
        return self.get(self.unit_path(name), interface, prop)

    def active_state(self, name: str) -> str:
        return str(self.unit_property(name, UNIT, "ActiveState"))

    def set_properties(self, name: str, props: Sequence[Property], runtime: bool = True
                       ) -> None:
        """SetUnitProperties: in force at once; with `runtime`, only until the next boot."""
        self.manager("SetUnitProperties", "sba(sv)", (name, runtime, list(props)),
                     what=f"setting {', '.join(p for p, _ in props)} of {name}")

    def slice_weights(self, name: str, props: Sequence[str]) -> dict[str, int | None] | None:
        """The named weights of a slice that exists (a unit file's, or one running), None
        for a slice that does not yet (a job's scope makes it); None values: unset."""
        path = self.unit_path(name)
        if not self.get(path, UNIT, "FragmentPath") and str(
                self.get(path, UNIT, "ActiveState")) == "inactive":
            return None
        values = {p: int(self.get(path, "org.freedesktop.systemd1.Slice", p)) for p in props}
        return {p: (None if v == WEIGHT_UNSET else v) for p, v in values.items()}

    def start_scope(self, name: str, pid: int | Sequence[int], slice_name: str,
                    slice_props: Sequence[Property], description: str,
                    timeout_s: float = 10.0, extra: Sequence[Property] = ()) -> bool:
        """A transient scope for `pid` (or several) in `slice_name`, which is made with it (one
        StartTransientUnit call, the slice an auxiliary unit) with `slice_props` and
        StopWhenUnneeded=yes when it does not exist yet: systemd then stops the slice once
        its last scope is gone, whatever becomes of us. A slice that exists (a unit file,
        another job's) is used as it is. `extra`: more scope properties (Delegate=).
        Returns whether the slice was made here."""
        pids = [pid] if isinstance(pid, int) else list(pid)
        scope: list[Property] = [("PIDs", ("au", pids)), ("Slice", ("s", slice_name)),
                                 ("Description", ("s", description)),
                                 ("CollectMode", ("s", "inactive-or-failed")), *extra]
        path = self.unit_path(slice_name)
        exists = bool(self.get(path, UNIT, "FragmentPath")) or str(
            self.get(path, UNIT, "ActiveState")) != "inactive"
        aux: list[Any] = []
        if not exists:  # with no weights too: an implicit slice would stay for good
            aux = [(slice_name, [*slice_props, ("StopWhenUnneeded", ("b", True)),
                                 ("Description", ("s", "backburner: bulk work"))])]
        try:
            self.manager("StartTransientUnit", "ssa(sv)a(sa(sv))", (name, "fail", scope, aux),
                         what=f"starting {name} in {slice_name}")
        except UsageError as err:  # the slice was made by another job meanwhile
            if not aux or "exist" not in str(err):
                raise
            aux = []
            self.manager("StartTransientUnit", "ssa(sv)a(sa(sv))", (name, "fail", scope, aux),
                         what=f"starting {name} in {slice_name}")
        deadline = time.monotonic() + timeout_s
        while (state := self.active_state(name)) in ("inactive", "activating"):
            if time.monotonic() > deadline:
                raise SystemStateError(f"{name} did not start within {timeout_s:g} s")
            time.sleep(0.005)
        if state != "active":
            raise SystemStateError(f"{name} did not start: it is {state}")
        return bool(aux)

    def stop(self, name: str, timeout_s: float = 20.0) -> None:
        """StopUnit, and wait until systemd says the unit is no longer active (a scope's
        processes are signalled, its groups removed)."""
        self.manager("StopUnit", "ss", (name, "replace"), what=f"stopping {name}")
        deadline = time.monotonic() + timeout_s
        while self.loaded(name) and self.active_state(name) in ("active", "deactivating"):
            if time.monotonic() > deadline:
                raise SystemStateError(f"{name} did not stop within {timeout_s:g} s")
            time.sleep(0.01)

    def freeze(self, name: str, frozen: bool) -> None:
        """FreezeUnit/ThawUnit: every process of a unit paused or let go (cgroup v2's
        freezer, through the unit that owns the group)."""
        self.manager("FreezeUnit" if frozen else "ThawUnit", "s", (name,),
                     what=f"{'pausing' if frozen else 'resuming'} {name}")


def _why(err: BaseException) -> str:
    """A short reason, one line."""
    if isinstance(err, _NOT_DBUS):
        return f"the peer does not speak D-Bus: {type(err).__name__}"
    return str(getattr(err, "strerror", None) or err).strip().split("\n")[0][:120]


class _Direct:
    """A peer-to-peer D-Bus connection (systemd's private socket): messages straight to
    systemd, no bus daemon, so no Hello and no unique name. Built on jeepney's message
    (de)serialisation only."""

    def __init__(self, sock: Any) -> None:
        from jeepney.low_level import Parser

        self._sock = sock
        self._parser = Parser()
        self._serials = itertools.count(1)

    def send_and_get_reply(self, msg: Any, timeout: float | None = None) -> Any:
        from jeepney.low_level import HeaderFields

        serial = next(self._serials)
        self._sock.settimeout(timeout)
        self._sock.sendall(msg.serialise(serial=serial))
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            reply = self._parser.get_next_message()
            if reply is None:
                if deadline is not None:
                    self._sock.settimeout(max(0.001, deadline - time.monotonic()))
                data = self._sock.recv(65536)
                if not data:
                    raise ConnectionResetError(0, "systemd closed the connection")
                self._parser.add_data(data)
            elif reply.header.fields.get(HeaderFields.reply_serial) == serial:
                return reply

    def close(self) -> None:
        self._sock.close()
