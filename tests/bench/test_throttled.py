"""bench.throttled: the throttle as a policy text (pure), and around a real load: paused
while the probe's group is stalled on IO, thawed whatever happens."""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from backburner import system
from backburner.bench import throttled
from backburner.errors import UsageError
from backburner.govern import throttle


@pytest.mark.parametrize("text, rest, spec", [
    ("background", "background", None),
    ("io=idle,cpu=idle", "io=idle,cpu=idle", None),
    ("throttle", "default", throttled.Spec()),
    ("background,throttle", "background", throttled.Spec()),
    ("background,pause-ms=250,min-duty=0.25", "background",
     throttled.Spec(pause_ms=250, min_duty=0.25)),
    ("min-duty=0.1", "default", throttled.Spec(min_duty=0.1)),
    ("io=idle,pause-ms=100,stall-ms=50,window-ms=500", "io=idle",
     throttled.Spec(pause_ms=100, stall_ms=50, window_ms=500)),
    ("background,pause-ms=100,throttle=off", "background", None),
])
def test_a_policy_text_and_its_throttle(text: str, rest: str,
                                        spec: throttled.Spec | None) -> None:
    assert throttled.split(text) == (rest, spec)


def test_the_defaults_are_governs() -> None:
    from backburner.govern.rules import ThrottleSettings

    s, d = throttled.Spec(), ThrottleSettings()
    assert (s.pause_ms, s.min_duty, s.stall_ms, s.window_ms) == (
        d.pause_ms, d.min_duty, d.stall_ms, d.window_ms)


@pytest.mark.parametrize("text", ["throttle,pause-ms=0", "pause-ms=1e3", "min-duty=0",
                                  "throttle,window-ms=100", "throttle=yes"])
def test_bad_numbers_are_refused_in_one_line(text: str) -> None:
    with pytest.raises(UsageError) as err:
        throttled.split(text)
    assert err.value.exit_status == 64 and "\n" not in str(err.value)


@pytest.mark.root
def test_paced_freezes_while_the_probe_group_stalls_and_thaws_at_stop(
        cgroup2_group: Path, tmp_path: Path) -> None:
    """A reader in the "probe" group (direct reads, each a stall) and a busy loop in a
    freezer group: the loop is paused within the bounds asked, and thawed at the end."""
    data = tmp_path / "data"
    data.write_bytes(os.urandom(32 << 20))
    where = throttle.freezer_at(f"test-paced-{uuid.uuid4().hex[:8]}")
    assert where is not None
    busy = subprocess.Popen(["sh", "-c", "while :; do :; done"])
    reader = subprocess.Popen(["sh", "-c", f"echo $$ > {cgroup2_group}/cgroup.procs; while :; "
                               f"do dd if={data} of=/dev/null bs=4k iflag=direct "
                               "status=none; done"], start_new_session=True)
    try:
        with system.Transaction("test-paced") as tx:
            tx.apply(system.CgroupDir(os.path.dirname(where[0]), shared=True))
            tx.apply(system.CgroupDir(where[0]))
            freezer = system.CgroupFreezer(*where)
            tx.apply(freezer)
            tx.apply(system.CgroupMove(busy.pid, where[0]))
            paced = throttled.Paced(throttled.Spec(pause_ms=150, min_duty=0.25, stall_ms=20,
                                                   window_ms=500),
                                    str(cgroup2_group / "io.pressure"), freezer)
            paced.start()
            time.sleep(2.5)
            pauses, paused, longest = paced.snapshot()
            out = paced.stop()
            assert not freezer.frozen()
        assert pauses >= 2 and 0 < longest <= 0.15 + 0.1, (pauses, paused, longest)
        assert paused >= 0.5 * 2.5 * 0.75 - 0.5  # most of the time: it kept stalling
        assert out["pauses"] >= pauses - 1 and out["longest_pause_s"] <= 0.25
        assert out["pause_ms"] == 150 and out["pressure"].endswith("20000 500000")
    finally:
        busy.kill()
        busy.wait()
        os.killpg(reader.pid, 9)
        reader.wait()
        deadline = time.monotonic() + 5
        while (cgroup2_group / "cgroup.procs").read_text().strip():
            assert time.monotonic() < deadline
            time.sleep(0.01)
