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
from ..base.errors import SystemStateError


class Change(ABC):
    """One kind of system change. Subclasses are dataclasses registered by `kind`.

    Every kind says what its undo takes away (`makes`): an object of its own (a
    namespace, a link, a qdisc, a directory, a mount, a loop device, a program, a
    process), which its undo removes, or a value, which its undo puts back. For a kind
    that makes an object the undo core (`Entry.undo`) holds one rule, whatever the kind:
    an object that was there before the change (`existed`, judged from `read()`'s old
    state) is never removed, nor one whose apply failed before it said (by `apply_with`'s
    `record`) what it had made. A failed `tc qdisc add` therefore never takes away the
    qdisc that made it fail: an administrator's, or another run's."""

    kind: ClassVar[str]
    makes: ClassVar[bool]  # every kind declares it: checked as the kind is defined
    registry: ClassVar[dict[str, type[Change]]] = {}

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        if "kind" in cls.__dict__:
            if not isinstance(getattr(cls, "makes", None), bool):
                raise TypeError(f"change kind {cls.kind!r} must say whether it makes an "
                                "object its undo removes (makes = True or False)")
            Change.registry[cls.kind] = cls

    @abstractmethod
    def describe(self) -> str: ...

    def read(self) -> Any:
        """The state before the change, as JSON-able data (None if there is nothing to keep)."""
        return None

    def existed(self, old: Any) -> bool:
        """Whether the object a making kind makes was there before the change, by `old`
        (what `read()` returned): then it is not ours, and the undo core never removes it.
        A kind whose object cannot be there before (a fresh name, a new device, a program
        just loaded) or whose `read()` refuses one that is keeps this answer."""
        return False

    @abstractmethod
    def apply(self) -> Any:
        """Make the change; return JSON-able facts the undo needs (e.g. the device created)."""

    @abstractmethod
    def undo(self, old: Any, result: Any) -> str | None:
        """Put back `old`. Must be idempotent and must cope with `result` being None (a
        crash during the apply) or partial (an apply that failed after `record`); called
        through `Entry.undo`, never directly, so the rule above holds.

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
