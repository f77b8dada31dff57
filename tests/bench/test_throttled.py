"""bench.throttled: the throttle around a real load: paused while the probe's group is
stalled on IO, thawed whatever happens; what it needs of the machine."""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from backburner import system
from backburner.base.errors import UnavailableError
from backburner.bench import throttled
from backburner.govern import throttle


@pytest.mark.root
def test_the_machine_needs_cgroup2_psi_and_a_freezer(monkeypatch: pytest.MonkeyPatch) -> None:
    throttled.require()  # this machine has all three
    with pytest.raises(UnavailableError, match="no cgroup2 hierarchy is mounted"):
        throttled.require(root="")  # as where none is mounted
    monkeypatch.setattr(throttled, "PSI_FILE", "/proc/pressure/nonexistent")
    with pytest.raises(UnavailableError, match="needs PSI") as err:
        throttled.require()
    assert err.value.exit_status == 69


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
            # the pacing thread alone runs raised: it thaws on time on a busy machine
            assert paced._thread is not None and paced._thread.native_id is not None
            assert os.getpriority(os.PRIO_PROCESS, paced._thread.native_id) == \
                throttled.PACER_NICE
            assert os.getpriority(os.PRIO_PROCESS, 0) == 0
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
