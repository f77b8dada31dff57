"""govern's systemd units, decided without systemd: which units hold interactive work,
and the count of governed processes per unit (the unit is put back with its last one).
The real path (systemd 252, cgroup v2) is tests/vm/test_guest_govern.py."""

from __future__ import annotations

from typing import Any

import pytest

from backburner import system
from backburner.govern import units
from backburner.govern.rules import Match, Rule
from backburner.policy import grammar
from backburner.systemd import bus as bus_module


@pytest.mark.parametrize("unit, shared", [
    ("packagekit.service", False), ("apt-daily-upgrade.service", False),
    ("session-3.scope", True), ("run-r1234.scope", True), ("user@1000.service", True),
    ("getty@tty1.service", True), ("serial-getty@ttyS0.service", True),
    ("gdm.service", True), ("display-manager.service", True), ("ssh.service", True),
    ("sshd@5-10.0.0.1:22-10.0.0.2:5555.service", True), ("init.scope", True)])
def test_which_units_share_with_interactive_work(unit: str, shared: bool) -> None:
    assert units.interactive(unit) is shared


class FakeTx:
    def __init__(self) -> None:
        self.entries: list[system.Entry] = []
        self.undone: list[system.Change] = []

    def record(self, change: system.Change) -> system.Entry:
        entry = system.Entry(len(self.entries) + 1, change, {})
        self.entries.append(entry)
        return entry

    def undo_one(self, entry: system.Entry) -> None:
        self.entries.remove(entry)
        self.undone.append(entry.change)


class FakeBus:
    of = {100: "updater.service", 101: "updater.service", 200: "session-2.scope",
          300: "backburner-run-1-ab.scope"}

    def __enter__(self) -> FakeBus:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def unit_of_pid(self, pid: int) -> str:
        return self.of[pid]


@pytest.fixture
def placer(monkeypatch: pytest.MonkeyPatch) -> tuple[units.Placer, FakeTx, list[str]]:
    monkeypatch.setattr(bus_module.Bus, "connect", classmethod(lambda cls: FakeBus()))
    monkeypatch.setattr(units.procfs, "descendants_of", lambda pid: [pid + 1])
    tx, problems = FakeTx(), []
    p = units.Placer(tx, lambda key, msg: problems.append(msg))  # type: ignore[arg-type]
    return p, tx, problems


def _rule(throttle: bool = False) -> Rule:
    return Rule("bulk", Match(comm=("bulk",)), grammar.BUILTIN["background"], throttle)


def test_a_service_is_weighted_once_and_put_back_with_its_last_process(placer: Any) -> None:
    p, tx, problems = placer
    assert p.place(100, 1, _rule()) == "updater.service"
    assert p.place(101, 2, _rule()) == "updater.service"
    p.hold("updater.service")  # a child
    [entry] = tx.entries
    assert isinstance(entry.change, system.UnitWeights)
    assert entry.change.properties == {"IOWeight": 10, "CPUWeight": 10}
    for _ in range(2):
        p.release("updater.service")
    assert not tx.undone  # one process still counts on it
    p.release("updater.service")
    assert tx.undone == [entry.change] and not tx.entries and not problems


def test_a_session_process_gets_a_scope_with_its_children(placer: Any) -> None:
    p, tx, _ = placer
    name = p.place(200, 77, _rule(throttle=True))
    assert name == "backburner-govern-200-77.scope"
    scope, frozen = (e.change for e in tx.entries)
    assert isinstance(scope, system.TransientScope) and scope.pids == [200, 201]
    assert scope.slice_name == "backburner.slice"
    assert isinstance(frozen, system.UnitFrozen) and frozen.unit == name
    assert p.freezers() == [frozen]
    p.release(name)
    assert tx.undone == [frozen, scope]  # in reverse


def test_work_already_on_the_back_burner_is_left_alone(placer: Any) -> None:
    p, tx, _ = placer
    assert p.place(300, 1, _rule()) is None and not tx.entries
