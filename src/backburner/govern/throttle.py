"""Pausing bulk work while interactive work is stalled on IO, with a guaranteed duty cycle.

Pressure comes from PSI triggers (Documentation/accounting/psi.rst): a file descriptor on
/proc/pressure/io or on a cgroup v2 group's io.pressure, written "some STALL WINDOW", which
poll() reports POLLPRI on when tasks of that group were stalled on IO for STALL µs within
WINDOW µs (at most once per window). The daemon sleeps on those fds with the connector's;
nothing here wakes up on a timer unless a pause is running or due.

The decision (`Throttle`) is pure: pressure events and the clock in, "freeze"/"thaw" out.
Its guarantees, tested with synthetic pressure:
- no pause without pressure in the last `hold_s`, and none while no bulk work is governed;
- every pause ends after at most `pause_s`;
- after a pause of length L the bulk work runs at least L * d / (1 - d) before the next
  one, so over any stretch of throttling it runs at least a share d (`min_duty`) of the time.

Which pressure counts: that of the groups where interactive work lives (`watch`, cgroup v2;
by default user.slice where it exists), since the bulk work governed with `throttle = true`
is moved out of them into its own group. Without such groups, the system-wide
/proc/pressure/io, which also counts the bulk work's own stalls: the duty cycle then
still guarantees its progress (docs/guide/govern.md).
"""

from __future__ import annotations

import errno
import logging
import math
import os
import select
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .. import system
from ..kernel import cgroups, procfs
from ..policy import throttle as throttlepolicy
from .rules import ThrottleSettings

log = logging.getLogger(__name__)

SYSTEM_PRESSURE = "/proc/pressure/io"
UNPRIVILEGED_WINDOW_US = 2_000_000  # without CAP_SYS_RESOURCE: windows in multiples of 2 s


@dataclass
class PauseStats:
    pauses: int = 0
    paused_s: float = 0.0
    longest_s: float = 0.0
    last_start: float | None = None
    last_length_s: float = 0.0


@dataclass
class Throttle:
    """The duty-cycle state machine. Times are seconds on a monotonic clock."""

    pause_s: float = throttlepolicy.DEFAULT_PAUSE_MS / 1000
    min_duty: float = throttlepolicy.DEFAULT_MIN_DUTY
    hold_s: float = 1.5
    frozen_since: float | None = None
    run_until: float = float("-inf")
    pressure_until: float = float("-inf")
    stats: PauseStats = field(default_factory=PauseStats)

    @classmethod
    def from_settings(cls, s: ThrottleSettings, window_s: float | None = None) -> Throttle:
        window = window_s if window_s is not None else s.window_ms / 1000
        return cls(pause_s=s.pause_ms / 1000, min_duty=s.min_duty, hold_s=1.5 * window)

    @property
    def frozen(self) -> bool:
        return self.frozen_since is not None

    def pressure(self, now: float, active: bool) -> str | None:
        """A trigger fired: pressure counts for `hold_s`. Returns "freeze" when a pause
        starts now."""
        self.pressure_until = max(self.pressure_until, now + self.hold_s)
        return self._maybe_freeze(now, active)

    def due(self, now: float, active: bool) -> str | None:
        """The clock reached `deadline()` (or anything else happened): "thaw" when a pause
        ends, "freeze" when the next one starts, else None."""
        if self.frozen_since is not None:
            if now >= self.frozen_since + self.pause_s or not active:
                return self._thaw(now)
            return None
        return self._maybe_freeze(now, active)

    def deadline(self, now: float) -> float | None:
        """When `due` must be called next; None: not before the next pressure event."""
        if self.frozen_since is not None:
            return self.frozen_since + self.pause_s
        if now < self.run_until < self.pressure_until:
            return self.run_until
        return None

    def _maybe_freeze(self, now: float, active: bool) -> str | None:
        if (self.frozen_since is None and active and now >= self.run_until
                and now < self.pressure_until):
            self.frozen_since = now
            return "freeze"
        return None

    def _thaw(self, now: float) -> str:
        assert self.frozen_since is not None
        length = max(0.0, now - self.frozen_since)
        self.run_until = now + length * self.min_duty / (1 - self.min_duty)
        st = self.stats
        st.pauses += 1
        st.paused_s += length
        st.longest_s = max(st.longest_s, length)
        st.last_start, st.last_length_s = self.frozen_since, length
        self.frozen_since = None
        return "thaw"

    def force_thaw(self, now: float) -> bool:
        """Thaw at once (the bulk group emptied, or we stop); True if a pause was running."""
        if self.frozen_since is None:
            return False
        self._thaw(now)
        return True


# --- where pressure is read, where bulk work is frozen ------------------------------------


def v2_root() -> str | None:
    return cgroups.unified_root()


def freezer_group(rule_name: str) -> tuple[str, int] | None:
    """Where a throttled rule's processes are frozen (`freezer_at`)."""
    return freezer_at(f"govern-{rule_name}")


def freezer_at(name: str) -> tuple[str, int] | None:
    """A group `backburner/NAME` to freeze and its cgroup version: in the v1 freezer
    hierarchy where it is mounted (hybrid and legacy systems), else in cgroup v2
    (`cgroup.freeze`, in every non-root group). None when neither exists."""
    freezer = cgroups.v1_mount("freezer")
    if freezer is not None:
        return os.path.join(freezer, "backburner", name), 1
    root = v2_root()
    if root is not None:
        return os.path.join(root, "backburner", name), 2
    return None


def watch_paths(settings: ThrottleSettings) -> tuple[list[str], list[str]]:
    """Pressure files to watch, and problems (a listed group that does not exist). An entry
    of `watch` is "system" (the whole machine) or a cgroup v2 group, relative to the v2
    mount or absolute."""
    root = v2_root()
    problems: list[str] = []
    wanted = list(settings.watch)
    if not wanted:
        if root and os.path.isdir(os.path.join(root, "user.slice")):
            wanted = ["user.slice"]
        else:
            wanted = ["system"]
    paths = []
    for item in wanted:
        if item == "system":
            paths.append(SYSTEM_PRESSURE)
            continue
        if root is None:
            problems.append(f"throttle: cannot watch {item}: no cgroup v2 hierarchy")
            continue
        group = item if item.startswith("/") else os.path.join(root, item)
        if not os.path.realpath(group).startswith(root.rstrip("/") + "/"):
            problems.append(f"throttle: {item} is not a group of the cgroup v2 hierarchy")
            continue
        pressure = os.path.join(group, "io.pressure")
        if not os.path.exists(pressure):
            problems.append(f"throttle: cannot watch {item}: {pressure} does not exist")
            continue
        paths.append(pressure)
    return paths, problems


@dataclass
class Trigger:
    path: str
    fd: int
    spec: str  # what was written: "some STALL_US WINDOW_US"

    @property
    def window_s(self) -> float:
        return int(self.spec.split()[2]) / 1e6


def open_trigger(path: str, stall_us: int, window_us: int) -> Trigger:
    """A PSI trigger on `path`. Without CAP_SYS_RESOURCE the kernel takes only windows in
    multiples of 2 s: then the window is rounded up and the stall scaled with it (the same
    share of time). OSError if PSI cannot be used at all."""
    spec = f"some {stall_us} {window_us}"
    try:
        return Trigger(path, system.psi_trigger(path, spec), spec)
    except OSError as err:
        if err.errno not in (errno.EINVAL, errno.EPERM, errno.EACCES) \
                or window_us % UNPRIVILEGED_WINDOW_US == 0:
            raise
    window = -(-window_us // UNPRIVILEGED_WINDOW_US) * UNPRIVILEGED_WINDOW_US
    stall = min(window - 1, stall_us * window // window_us)
    spec = f"some {stall} {window}"
    log.info("PSI trigger window raised to %.0f s on %s (no CAP_SYS_RESOURCE)", window / 1e6,
             path)
    return Trigger(path, system.psi_trigger(path, spec), spec)


def open_triggers(settings: ThrottleSettings) -> tuple[list[Trigger], list[str]]:
    paths, problems = watch_paths(settings)
    out, more = open_on(paths, settings.stall_ms * 1000, settings.window_ms * 1000)
    return out, problems + more


def open_on(paths: list[str], stall_us: int, window_us: int
            ) -> tuple[list[Trigger], list[str]]:
    """A trigger on each pressure file, and a problem for each that could not have one."""
    out, problems = [], []
    for path in paths:
        try:
            out.append(open_trigger(path, stall_us, window_us))
        except OSError as err:
            problems.append(f"throttle: no PSI trigger on {path}: {err.strerror}")
    return out, problems


def close_triggers(triggers: list[Trigger]) -> None:
    for t in triggers:
        try:
            os.close(t.fd)
        except OSError:
            pass


# --- the throttle at work: pressure and the clock in, the decisions acted on ---------------
#
# govern's daemon calls these from its own poll loop (with the process connector's fd);
# bench's throttle policy runs `pace` on a thread of its own around each load. Either way
# the same code turns a trigger's POLLPRI and the pause boundaries into `Throttle`'s
# decisions, and `act` does them ("freeze" / "thaw" every throttled group).

Act = Callable[[str | None], None]


def hold_for(thr: Throttle, triggers: Sequence[Trigger | Meter]) -> None:
    """Pressure counts for 1.5 windows after a trigger: the window the kernel granted (a
    caller without CAP_SYS_RESOURCE gets a longer one than asked)."""
    window = min((t.window_s for t in triggers), default=None)
    if window is not None:
        thr.hold_s = 1.5 * window


def on_pressure(thr: Throttle, act: Act, active: bool, now: float) -> None:
    """A trigger fired."""
    act(thr.pressure(now, active))


def on_clock(thr: Throttle, act: Act, active: bool, now: float) -> None:
    """Any wake-up: a pause that reached its bound ends, a due one starts. Asked on every
    wake-up, not only once `deadline` is reached: at the moment the bulk work's share of
    running ends, `deadline` already says None (nothing left to wait for), and the next
    pause, due then while pressure holds, would wait for the next trigger."""
    act(thr.due(now, active))


def timeout_ms(thr: Throttle, now: float) -> int | None:
    """How long poll() may sleep before `on_clock` is due (None: until an event)."""
    due = thr.deadline(now)
    return None if due is None else max(0, math.ceil((due - now) * 1000))


def stop(thr: Throttle, act: Act, triggers: list[Trigger], now: float) -> None:
    """No more pausing: a running pause ends at once (acted on), the triggers close."""
    if thr.force_thaw(now):
        act("thaw")
    close_triggers(triggers)


@dataclass
class Meter:
    """A trigger's condition ("some STALL WINDOW") checked by reading a pressure file's
    `some ... total=` (µs stalled, brought up to date by every read) on a tick: for a
    caller that may not have the window it needs as a kernel trigger (without
    CAP_SYS_RESOURCE a trigger's window is a multiple of 2 s, checked every 2 s, which a
    start of a few seconds is mostly over by)."""

    path: str
    stall_us: int
    window_us: int
    history: deque[tuple[float, int]] = field(default_factory=deque)

    @property
    def spec(self) -> str:
        return f"polled some {self.stall_us} {self.window_us}"

    @property
    def window_s(self) -> float:
        return self.window_us / 1e6

    def stalled(self, now: float, total_us: int | None = None) -> bool:
        """Whether the stall over the last window reached the threshold (the total read
        now unless given); False until a whole window has been seen or when unreadable."""
        total = total_us if total_us is not None else some_total(self.path)
        if total is None:
            return False
        h = self.history
        h.append((now, total))
        while len(h) > 1 and h[1][0] <= now - self.window_s:
            h.popleft()
        return total - h[0][1] >= self.stall_us


def some_total(path: str) -> int | None:
    """The `some` line's total (µs) of a pressure file; None when it cannot be read."""
    data = procfs.read_small(path, 512)
    for line in (data or b"").splitlines():
        if line.startswith(b"some "):
            for item in line.split():
                if item.startswith(b"total="):
                    return int(item[6:])
    return None


def watch_stall(path: str, stall_us: int, window_us: int) -> Trigger | Meter:
    """A kernel trigger with exactly this window where the caller may have one, else a
    `Meter` polling the same condition (never a longer window: `open_trigger` raises the
    window instead, for govern's daemon, which must not wake up on a timer)."""
    try:
        return Trigger(path, system.psi_trigger(path, f"some {stall_us} {window_us}"),
                       f"some {stall_us} {window_us}")
    except OSError as err:
        if err.errno not in (errno.EINVAL, errno.EPERM, errno.EACCES):
            raise
    if some_total(path) is None:
        raise OSError(errno.ENOENT, f"{path} has no stall total")
    return Meter(path, stall_us, window_us)


def pace(thr: Throttle, act: Act, done: threading.Event, triggers: Sequence[Trigger] = (),
         meters: Sequence[Meter] = (), active: Callable[[], bool] = lambda: True,
         tick_s: float = 0.1, meter_tick_s: float = 0.02) -> None:
    """The loop of a thread that does nothing but throttle (bench's policy): poll() on the
    triggers, and each meter every `meter_tick_s`, until `done` is set (looked at every
    `tick_s` at most); then `stop`."""
    triggers, meters = list(triggers), list(meters)
    hold_for(thr, [*triggers, *meters])
    poller = select.poll()
    for t in triggers:
        poller.register(t.fd, select.POLLPRI)
    fds = {t.fd for t in triggers}
    limit = math.ceil((meter_tick_s if meters else tick_s) * 1000)
    try:
        while not done.is_set():
            wait = timeout_ms(thr, time.monotonic())
            for fd, mask in poller.poll(limit if wait is None else min(wait, limit)):
                if fd not in fds:
                    continue
                if mask & (select.POLLERR | select.POLLHUP | select.POLLNVAL):
                    poller.unregister(fd)  # its group was removed
                    fds.discard(fd)
                elif mask & select.POLLPRI:
                    on_pressure(thr, act, active(), time.monotonic())
            now = time.monotonic()
            if any(m.stalled(now) for m in meters):
                on_pressure(thr, act, active(), now)
            on_clock(thr, act, active(), time.monotonic())
    finally:
        stop(thr, act, triggers, time.monotonic())
