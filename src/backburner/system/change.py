"""The one shape of a system change: `read()` the old state, `apply()`, `undo()`.

Each kind of change is a small dataclass registered by its `kind`, so that a journal
written by a crashed run can be replayed by a later one. The helpers here are what every
family of changes shares: writing one value to a kernel file, reading a selected value,
running a short system tool.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar

from .. import spawn
from ..errors import SystemStateError


class Change(ABC):
    """One kind of system change. Subclasses are dataclasses registered by `kind`."""

    kind: ClassVar[str]
    registry: ClassVar[dict[str, type[Change]]] = {}

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        if "kind" in cls.__dict__:
            Change.registry[cls.kind] = cls

    @abstractmethod
    def describe(self) -> str: ...

    def read(self) -> Any:
        """The state before the change, as JSON-able data (None if there is nothing to keep)."""
        return None

    @abstractmethod
    def apply(self) -> Any:
        """Make the change; return JSON-able facts the undo needs (e.g. the device created)."""

    @abstractmethod
    def undo(self, old: Any, result: Any) -> str | None:
        """Put back `old`. Must be idempotent and must cope with `result` being None.

        Returns None when the change is undone (or there was nothing left to undo), or a
        note saying what was deliberately left in place and why (a shared group still in use).
        """

    def apply_with(self, record: Callable[[Any], None]) -> Any:
        """`apply`, for changes that learn facts the undo needs before they finish (a
        daemon's PID before its readiness wait): they call `record(partial)` on the way."""
        return self.apply()

    def returned(self, result: Any) -> Any:
        """What `Transaction.apply` hands the caller: the result, unless the journal needs
        more facts than the caller does (a loop device's backing identity)."""
        return result

    def spec(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_spec(cls, spec: dict[str, Any]) -> Change:
        return cls(**spec)


def write(path: str, value: str) -> None:
    try:
        with open(path, "w") as f:
            f.write(value)
    except OSError as err:
        raise SystemStateError(f"could not write {value!r} to {path}: {err.strerror}") from None


def selected(text: str) -> str:
    """'none [mq-deadline] bfq' -> 'mq-deadline'; a plain value is returned stripped."""
    text = text.strip()
    if "[" in text:
        return text.split("[", 1)[1].split("]", 1)[0]
    return text


def run_tool(cmd: list[str], timeout: float = 120.0) -> Any:
    return spawn.run_tool(cmd, timeout)


def tool(cmd: list[str], what: str) -> str:
    try:
        proc = run_tool(cmd)
    except FileNotFoundError:
        raise SystemStateError(f"{what}: {cmd[0]} is not installed") from None
    if proc.status != 0:
        msg = (proc.stderr or proc.stdout).strip().splitlines()
        raise SystemStateError(f"{what} failed: {msg[-1] if msg else 'timed out'}")
    return proc.stdout
