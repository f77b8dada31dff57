"""The throttle as a policy of a bench load: `govern`'s throttle (`govern.throttle`: the
same duty-cycle decisions and the same loop) pauses the load's group with the cgroup
freezer while the probe's own group is stalled on IO, so its price and its protection are
measured beside the IO class's and the weights'.

A policy text takes the throttle beside any other policy: ``throttle`` (govern's
defaults: pauses of at most 500 ms, the load keeps at least a tenth of the time), or
``background,pause-ms=250,min-duty=0.25`` (any of `pause-ms`, `min-duty`, `stall-ms`,
`window-ms` switches it on; `throttle=off` switches it off again).

Which pressure counts: that of the probe's own cgroup v2 group (its `io.pressure`), never
the system's, which counts the load's own stalls too. Bench lives in that group (the
probe starts there as its child); a throttled load starts in a group of its own, frozen
through the v1 freezer where it is mounted, else cgroup v2's `cgroup.freeze` (as govern
freezes). A kernel trigger is used where this process may have the window asked for;
without CAP_SYS_RESOURCE the kernel allows only windows in multiples of 2 s, checked
every 2 s, and the same condition is read from the group's stall total every 20 ms
instead (`govern.throttle.Meter`).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from .. import system
from ..base.errors import BackburnerError, UnavailableError
from ..govern import throttle
from ..kernel import cgroups
from ..policy.throttle import Spec, split

__all__ = ["PSI_FILE", "Paced", "Spec", "require", "split"]
log = logging.getLogger(__name__)

PSI_FILE = "/proc/pressure/io"


def require(root: str | None = None) -> None:
    """What a throttled load needs of this machine, in one line before anything is built:
    a cgroup2 hierarchy (for the probe's pressure), PSI, and a freezer."""
    root = root if root is not None else cgroups.unified_root()
    if not root:
        raise UnavailableError("the throttle policy watches the probe's cgroup v2 group's "
                               "io.pressure, and no cgroup2 hierarchy is mounted",
                               "mount cgroup2 (e.g. on /sys/fs/cgroup/unified)")
    if not os.path.exists(PSI_FILE):
        raise UnavailableError(f"the throttle policy needs PSI: {PSI_FILE} is missing",
                               "boot with psi=1 (CONFIG_PSI)")
    if throttle.freezer_at("probe") is None:
        raise UnavailableError("the throttle policy needs a cgroup freezer")


#: The pacing thread's nice value: its pauses end on time on a busy machine (a thaw 190 ms
#: late was seen beside the test suite's load, with a busy loop in the paused group).
PACER_NICE = -10


def _pace_raised(*args: Any) -> None:
    """`throttle.pace` at PACER_NICE, for this thread alone (setpriority on a thread id is
    per thread on Linux). Best effort: unprivileged, the thread keeps its nice value."""
    try:
        tid = threading.get_native_id()
        if os.getpriority(os.PRIO_PROCESS, tid) > PACER_NICE:
            os.setpriority(os.PRIO_PROCESS, tid, PACER_NICE)
    except OSError:
        pass
    throttle.pace(*args)


@dataclass
class Paced:
    """The throttle around one run of a load: a thread that freezes and thaws its group
    while the probe's group is stalled on IO."""

    spec: Spec
    pressure: str  # the probe's group's io.pressure
    freezer: system.CgroupFreezer
    thr: throttle.Throttle = field(init=False)
    problems: list[str] = field(default_factory=list)
    source: str = ""
    _done: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __post_init__(self) -> None:
        self.thr = throttle.Throttle(pause_s=self.spec.pause_ms / 1000,
                                     min_duty=self.spec.min_duty,
                                     hold_s=1.5 * self.spec.window_ms / 1000)

    def start(self) -> None:
        watch = throttle.watch_stall(self.pressure, self.spec.stall_ms * 1000,
                                     self.spec.window_ms * 1000)
        self.source = watch.spec
        triggers = [watch] if isinstance(watch, throttle.Trigger) else []
        meters = [watch] if isinstance(watch, throttle.Meter) else []
        self._thread = threading.Thread(
            target=_pace_raised, args=(self.thr, self._act, self._done, triggers, meters),
            name="bench-throttle", daemon=True)
        self._thread.start()

    def _act(self, action: str | None) -> None:
        try:
            if action == "freeze":
                self.freezer.freeze()
            elif action == "thaw":
                self.freezer.thaw()
        except BackburnerError as err:  # recorded; the load is thawed when it stops
            if len(self.problems) < 5:
                self.problems.append(str(err))

    def snapshot(self) -> tuple[int, float, float]:
        """(pauses, seconds paused, longest pause) so far, a pause running counted to now."""
        st = self.thr.stats
        running = (time.monotonic() - self.thr.frozen_since
                   if self.thr.frozen_since is not None else 0.0)
        return (st.pauses + (running > 0), st.paused_s + running,
                max(st.longest_s, running))

    def stop(self) -> dict[str, Any]:
        """The thread ended (its last pause ends at once), the group thawed whatever
        happened, and what it did."""
        self._done.set()
        if self._thread is not None:
            self._thread.join()
        try:
            if self.freezer.frozen():
                self.freezer.thaw()
        except (OSError, BackburnerError) as err:
            self.problems.append(str(err))
        st = self.thr.stats
        out: dict[str, Any] = {"pauses": st.pauses, "paused_s": st.paused_s,
                               "longest_pause_s": st.longest_s, "pressure": self.source,
                               **self.spec.as_dict()}
        if self.problems:
            out["throttle_problems"] = self.problems
        return out
