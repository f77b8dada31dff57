"""govern/throttle.py: the duty-cycle decisions with synthetic pressure (exact), and the
kernel parts on the real machine: a PSI trigger, a cgroup freezer with a live process."""

from __future__ import annotations

import os
import random
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest
from helpers import wait_for

from backburner import system
from backburner.govern import throttle
from backburner.govern.rules import ThrottleSettings
from backburner.govern.throttle import Throttle


def test_no_pause_without_pressure_or_without_bulk_work() -> None:
    t = Throttle(pause_s=0.5, min_duty=0.5, hold_s=1.5)
    assert t.due(0.0, True) is None and t.deadline(0.0) is None  # nothing to wait for
    assert t.pressure(1.0, active=False) is None  # pressure, but nothing governed to pause
    assert t.deadline(1.0) is None
    assert t.pressure(1.2, active=True) == "freeze"


def test_a_pause_ends_at_its_bound_then_the_bulk_runs_its_share() -> None:
    t = Throttle(pause_s=0.5, min_duty=0.25, hold_s=10)
    assert t.pressure(0.0, True) == "freeze"
    assert t.deadline(0.0) == 0.5
    assert t.due(0.4, True) is None
    assert t.due(0.5, True) == "thaw"
    # after 0.5 s paused, at least 0.5 * 0.25 / 0.75 s of running before the next pause
    assert t.run_until == pytest.approx(0.5 + 0.5 / 3)
    assert t.pressure(0.55, True) is None  # too early: the bulk work has its share first
    assert t.deadline(0.55) == pytest.approx(0.5 + 0.5 / 3)
    assert t.due(t.run_until, True) == "freeze"  # pressure still counts: next pause
    assert t.stats.pauses == 1 and t.stats.longest_s == pytest.approx(0.5)


def test_pressure_expires_after_hold() -> None:
    t = Throttle(pause_s=0.25, min_duty=0.5, hold_s=1.25)
    t.pressure(0.0, True)
    assert t.due(0.25, True) == "thaw"
    assert t.due(0.5, True) == "freeze"
    assert t.due(0.75, True) == "thaw"
    assert t.deadline(0.75) == 1.0
    assert t.due(1.0, True) == "freeze"
    assert t.due(1.25, True) == "thaw"  # the pressure counted until 1.25: no more pauses
    assert t.deadline(1.25) is None and t.due(1.5, True) is None


def test_emptied_group_is_thawed_at_once() -> None:
    t = Throttle(pause_s=0.5, min_duty=0.5, hold_s=5)
    t.pressure(0.0, True)
    assert t.due(0.1, active=False) == "thaw"
    assert t.stats.last_length_s == pytest.approx(0.1)
    assert not t.force_thaw(0.2)


def test_duty_cycle_guaranteed_under_random_pressure_seeded() -> None:
    """Random pressure events and late wake-ups (a busy daemon): every pause is bounded
    by pause_s plus the lateness, none starts without pressure within hold_s, and after
    each pause the bulk work runs at least its share before the next one."""
    for seed in range(40):
        rng = random.Random(seed)
        d = rng.choice([0.1, 0.25, 0.5, 0.75])
        t = Throttle(pause_s=rng.choice([0.1, 0.3, 1.0]), min_duty=d,
                     hold_s=rng.choice([0.5, 1.5, 3.0]))
        now, frozen_at, thawed_at, last_pressure = 0.0, None, None, -1e9
        pauses: list[tuple[float, float]] = []
        pressures = sorted(rng.uniform(0, 60) for _ in range(rng.randint(0, 80)))
        late = 0.0
        while now < 70:
            nxt = t.deadline(now)
            candidates = [p for p in pressures if p > now]
            step = min([x for x in (nxt, candidates[0] if candidates else None) if x],
                       default=None)
            if step is None:
                break
            late = rng.choice([0.0, 0.0, 0.002, 0.02])
            now = max(now, step) + (late if step == nxt else 0.0)
            if candidates and step == candidates[0]:
                last_pressure = step
                action = t.pressure(now, True)
            else:
                action = t.due(now, True)
            if action == "freeze":
                assert frozen_at is None and now - last_pressure < t.hold_s + 1e-9
                if thawed_at is not None:
                    length = pauses[-1][1] - pauses[-1][0]
                    assert now - thawed_at >= length * d / (1 - d) - 1e-9
                frozen_at = now
            elif action == "thaw":
                assert frozen_at is not None
                pauses.append((frozen_at, now))
                assert now - frozen_at <= t.pause_s + late + 1e-9
                frozen_at, thawed_at = None, now
        if pauses:
            span = pauses[-1][1] - pauses[0][0]
            paused = sum(b - a for a, b in pauses)
            last = pauses[-1][1] - pauses[-1][0]
            # over the whole throttled stretch the bulk work ran at least its share
            # (the last pause is not yet followed by its run time)
            assert span - paused >= (paused - last) * d / (1 - d) - 1e-6
        assert t.stats.pauses == len(pauses)


def test_from_settings() -> None:
    t = Throttle.from_settings(ThrottleSettings(pause_ms=250, min_duty=0.4, window_ms=2000))
    assert (t.pause_s, t.min_duty, t.hold_s) == (0.25, 0.4, 3.0)


def test_watch_paths_default_and_problems() -> None:
    paths, problems = throttle.watch_paths(ThrottleSettings(watch=("system", "no-such.slice")))
    assert paths[0] == throttle.SYSTEM_PRESSURE
    if throttle.v2_root() is not None:
        assert "no-such.slice" in problems[0]
    default, _ = throttle.watch_paths(ThrottleSettings())
    assert len(default) == 1 and default[0].endswith(("user.slice/io.pressure", "/io"))


# --- the kernel -------------------------------------------------------------------------------


@pytest.mark.root
def test_psi_trigger_on_the_system_pressure_file() -> None:
    trig = throttle.open_trigger(throttle.SYSTEM_PRESSURE, 100_000, 1_000_000)
    try:
        stall, window = map(int, trig.spec.split()[1:])
        assert stall * 10 == window  # the same share when the window had to be raised
        assert window in (1_000_000, 2_000_000)
    finally:
        throttle.close_triggers([trig])
    with pytest.raises(OSError):
        system.psi_trigger(throttle.SYSTEM_PRESSURE, "some 5 nonsense")


@pytest.mark.root
def test_freezer_change_freezes_a_live_process_and_undo_thaws(state_dir: Path) -> None:
    target = throttle.freezer_group(f"test-{uuid.uuid4().hex[:8]}")
    assert target is not None, "no cgroup freezer on this machine"
    path, version = target
    proc = subprocess.Popen(["sh", "-c", "while :; do :; done"])
    try:
        with system.Transaction("test-freezer") as tx:
            tx.apply(system.CgroupDir(os.path.dirname(path), shared=True))
            tx.apply(system.CgroupDir(path))
            fz = system.CgroupFreezer(path, version)
            tx.apply(fz)
            tx.apply(system.CgroupMove(proc.pid, path))
            fz.freeze()
            deadline = time.monotonic() + 5
            while not fz.frozen() or _state(proc.pid) not in "DT":
                assert time.monotonic() < deadline, (fz.frozen(), _state(proc.pid))
                time.sleep(0.01)
            cpu = _cpu_ticks(proc.pid)
            time.sleep(0.2)
            assert _cpu_ticks(proc.pid) == cpu, "a frozen process must not run"
        assert not os.path.exists(path), "the group is removed on undo"
        time.sleep(0.1)
        cpu = _cpu_ticks(proc.pid)
        time.sleep(0.3)
        assert _cpu_ticks(proc.pid) > cpu, "thawed: it runs again"
    finally:
        proc.kill()
        proc.wait()


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def _cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


@pytest.mark.root
def test_cgroup_v2_freeze_of_a_live_process() -> None:
    """cgroup v2's cgroup.freeze (what a machine without the v1 freezer uses)."""
    root = throttle.v2_root()
    assert root is not None, "no cgroup v2 hierarchy on this machine"
    path = os.path.join(root, f"bbgt-freeze-{uuid.uuid4().hex[:8]}")
    os.mkdir(path)
    proc = subprocess.Popen(["sh", "-c", "while :; do :; done"])
    try:
        Path(path, "cgroup.procs").write_text(str(proc.pid))
        fz = system.CgroupFreezer(path, 2)
        assert fz.read() is False
        fz.freeze()
        wait_for(lambda: "frozen 1" in Path(path, "cgroup.events").read_text(),
                 what="the v2 group to freeze")
        cpu = _cpu_ticks(proc.pid)
        time.sleep(0.2)
        assert _cpu_ticks(proc.pid) == cpu
        fz.undo(True, None)  # undo thaws, whatever the state it found
        wait_for(lambda: "frozen 0" in Path(path, "cgroup.events").read_text(),
                 what="the v2 group to thaw")
    finally:
        proc.kill()
        proc.wait()
        wait_for(lambda: not Path(path, "cgroup.procs").read_text().split(),
                 what="the group to empty")
        os.rmdir(path)


# --- the throttle at work (what govern's daemon and bench's policy share) ------------------


def test_pressure_and_the_clock_are_acted_on_in_order() -> None:
    acts: list[str] = []

    def record(action: str | None) -> None:
        if action is not None:
            acts.append(action)

    t = Throttle(pause_s=0.5, min_duty=0.5, hold_s=10)
    throttle.on_clock(t, record, True, 0.0)
    assert acts == []  # nothing due
    throttle.on_pressure(t, record, True, 0.0)
    assert acts == ["freeze"]
    assert throttle.timeout_ms(t, 0.1) == 400
    throttle.on_clock(t, record, True, 0.2)
    assert acts == ["freeze"]  # not yet
    throttle.on_clock(t, record, True, 0.5)
    assert acts == ["freeze", "thaw"]
    throttle.on_clock(t, record, True, 1.0)  # ran its share: pressure still holds
    assert acts == ["freeze", "thaw", "freeze"]
    throttle.stop(t, record, [], 1.1)  # a pause running when it stops: thawed
    assert acts[-1] == "thaw" and not t.frozen
    throttle.stop(t, record, [], 1.2)
    assert acts.count("thaw") == 2  # nothing frozen: nothing to do


def test_a_meter_is_a_trigger_read_by_polling() -> None:
    m = throttle.Meter("/nonexistent", stall_us=100_000, window_us=1_000_000)
    assert not m.stalled(0.0, 0)
    assert not m.stalled(0.5, 90_000)
    assert m.stalled(0.6, 100_000)  # 100 ms stalled within the last second
    assert m.stalled(1.0, 100_000)
    assert not m.stalled(1.7, 120_000)  # the window has moved past the stall
    assert not m.stalled(1.8)  # unreadable: no pressure
    assert m.window_s == 1.0 and m.spec == "polled some 100000 1000000"


def test_the_stall_total_of_a_pressure_file(tmp_path: Path) -> None:
    f = tmp_path / "io.pressure"
    f.write_text("some avg10=1.00 avg60=0.50 avg300=0.10 total=123456\n"
                 "full avg10=0.00 avg60=0.00 avg300=0.00 total=42\n")
    assert throttle.some_total(str(f)) == 123456
    assert throttle.some_total(str(tmp_path / "missing")) is None


@pytest.mark.root
def test_pace_pauses_a_group_while_another_is_stalled(cgroup2_group: Path,
                                                      tmp_path: Path) -> None:
    """A reader stalled on IO in one group (direct reads: each waits for the disk) and a
    busy loop in a freezer group: `pace` pauses the loop within bounds and leaves it
    thawed when it stops."""
    data = tmp_path / "data"
    data.write_bytes(os.urandom(32 << 20))
    target = throttle.freezer_at(f"test-pace-{uuid.uuid4().hex[:8]}")
    assert target is not None
    path, version = target
    busy = subprocess.Popen(["sh", "-c", "while :; do :; done"])
    reader = subprocess.Popen(["sh", "-c", f"echo $$ > {cgroup2_group}/cgroup.procs; while :; "
                               f"do dd if={data} of=/dev/null bs=4k iflag=direct "
                               "status=none; done"], start_new_session=True)
    try:
        with system.Transaction("test-pace") as tx:
            tx.apply(system.CgroupDir(os.path.dirname(path), shared=True))
            tx.apply(system.CgroupDir(path))
            fz = system.CgroupFreezer(path, version)
            tx.apply(fz)
            tx.apply(system.CgroupMove(busy.pid, path))
            watch = throttle.watch_stall(str(cgroup2_group / "io.pressure"), 10_000, 500_000)
            thr = Throttle(pause_s=0.2, min_duty=0.5)
            acts: list[str] = []

            def act(action: str | None) -> None:
                if action:
                    acts.append(action)
                    fz.freeze() if action == "freeze" else fz.thaw()

            done = threading.Event()
            meters = [watch] if isinstance(watch, throttle.Meter) else []
            triggers = [watch] if isinstance(watch, throttle.Trigger) else []
            pacer = threading.Thread(target=throttle.pace,
                                     args=(thr, act, done, triggers, meters))
            pacer.start()
            time.sleep(3.0)
            done.set()
            pacer.join()
            assert thr.stats.pauses >= 2, (watch, acts)
            assert thr.stats.longest_s <= 0.2 + 0.15  # bounded (a tick's lateness at most)
            assert acts[-1] == "thaw" and not fz.frozen()
    finally:
        busy.kill()
        busy.wait()
        os.killpg(reader.pid, 9)
        reader.wait()
        wait_for(lambda: not (cgroup2_group / "cgroup.procs").read_text().strip(),
                 what="the reader's group to empty")
