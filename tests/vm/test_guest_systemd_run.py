"""`run` where systemd owns the cgroup tree: the job's scope in a slice beside user.slice
that carries the policy's weights, read back from the kernel while the job runs; the slice
gone with its last job, even when backburner itself was killed; a slice from a unit file
used as it is."""

from __future__ import annotations

import json
import time

import pytest

from .rig import Guest

pytestmark = [pytest.mark.root, pytest.mark.timeout(900)]

# The job reads its own group and the weights of its scope and of the scope's slice.
WHERE = r"""
import json, os
group = open("/proc/self/cgroup").read().strip().split("::", 1)[1]
def read(path, name):
    try:
        return open(f"/sys/fs/cgroup{path}/{name}").read().strip()
    except OSError:
        return None
names = ("io.weight", "io.bfq.weight", "cpu.weight")
parent = os.path.dirname(group)
print(json.dumps({"group": group, "scope": {n: read(group, n) for n in names},
                  "slice": {n: read(parent, n) for n in names}}))
"""


def _active(guest: Guest, unit: str) -> str:
    return guest.run(["systemctl", "show", "-P", "ActiveState", unit]).out.strip()


def _gone(guest: Guest, unit: str, within_s: float = 20.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if _active(guest, unit) in ("inactive", ""):
            return True
        time.sleep(0.5)
    return False


def test_the_job_runs_in_a_scope_of_a_weighted_slice_beside_user_slice(guest: Guest) -> None:
    r = guest.run(["backburner", "run", "--policy", "background", "--", "python3", "-c",
                   WHERE], timeout=120, check=True)
    got = json.loads(r.out)
    assert got["group"].startswith("/backburner.slice/backburner-run-"), got
    assert got["group"].endswith(".scope")
    assert got["slice"]["io.weight"] == "default 10", got
    assert got["slice"]["cpu.weight"] == "10", got
    if got["slice"]["io.bfq.weight"] is not None:  # BFQ's own file, where BFQ is loaded
        assert got["slice"]["io.bfq.weight"] == "default 10", got
    assert got["scope"]["io.weight"] in (None, "default 100")  # the weights are the slice's
    assert _gone(guest, "backburner.slice"), "the slice outlived its only job"


def test_the_slice_stays_while_another_job_runs_and_goes_after_it(guest: Guest) -> None:
    # the short job starts once the long one runs in its scope (a fixed head start of 2 s
    # was once too little: the long job's own start took longer beside the host's load)
    long = ("rm -f /tmp/bb-long; backburner run --policy background -- sh -c "
            "'touch /tmp/bb-long; exec sleep 15' & ")
    short = ("while [ ! -e /tmp/bb-long ]; do sleep 0.1; done; "
             "backburner run --policy background -- sleep 1; ")
    check = ('echo "after short: $(systemctl show -P ActiveState backburner.slice)"; wait; '
             'rm /tmp/bb-long')
    r = guest.run(["sh", "-c", long + short + check], timeout=120, check=True)
    assert "after short: active" in r.out, r
    assert _gone(guest, "backburner.slice")


def test_a_killed_run_leaves_the_slice_to_systemd(guest: Guest) -> None:
    """backburner SIGKILLed while its job runs: the job goes on in its scope, and the slice
    goes once the job is done; nothing was ours to restore."""
    script = ("rm -f /tmp/bb-started; backburner run --policy background -- sh -c "
              "'touch /tmp/bb-started; sleep 6' & bb=$!; "
              "while [ ! -e /tmp/bb-started ]; do sleep 0.1; done; kill -KILL $bb; "
              "echo during=$(systemctl show -P ActiveState backburner.slice); sleep 7; "
              "backburner restore")
    r = guest.run(["sh", "-c", script], timeout=120)
    assert "during=active" in r.out, r
    assert _gone(guest, "backburner.slice"), r


def test_another_slice_by_name(guest: Guest) -> None:
    r = guest.run(["backburner", "run", "--policy", "background", "--slice",
                   "bulk-updates.slice", "--", "python3", "-c", WHERE], timeout=120,
                  check=True)
    got = json.loads(r.out)
    assert got["group"].startswith("/bulk.slice/bulk-updates.slice/backburner-run-"), got
    assert got["slice"]["cpu.weight"] == "10"
    assert _gone(guest, "bulk-updates.slice")


SLICE_UNIT = "[Slice]\nIOWeight=50\nCPUWeight=40\n"


def test_a_slice_of_a_unit_file_is_used_as_it_is(guest: Guest) -> None:
    guest.put("/etc/systemd/system/shipped.slice", SLICE_UNIT)
    try:
        guest.run(["systemctl", "daemon-reload"], check=True)
        r = guest.run(["backburner", "run", "--policy", "background", "--slice",
                       "shipped.slice", "--", "python3", "-c", WHERE], timeout=120,
                      check=True)
        got = json.loads(r.out)
        assert got["group"].startswith("/shipped.slice/"), got
        assert (got["slice"]["io.weight"], got["slice"]["cpu.weight"]) == ("default 50", "40")
    finally:
        guest.run(["systemctl", "stop", "shipped.slice"])
        guest.run(["rm", "-f", "/etc/systemd/system/shipped.slice"])
        guest.run(["systemctl", "daemon-reload"])


def test_no_access_to_systemd_is_one_line(guest: Guest) -> None:
    r = guest.run(["runuser", "-u", "nobody", "--", "backburner", "run", "--policy",
                   "background", "--", "true"], timeout=60)
    assert r.status == 125 and len(r.err.strip().splitlines()) == 1, r  # run's own failure
    assert "needs root" in r.err, r


@pytest.mark.parametrize("name", ["a/b.slice", "bulk", "-.slice"])
def test_a_bad_slice_name_is_one_line_and_nothing_starts(guest: Guest, name: str) -> None:
    r = guest.run(["sh", "-c", f"backburner run --policy background --slice '{name}' -- "
                   "touch /tmp/bb-ran; echo status=$?"], timeout=60)
    assert r.out.strip() == "status=125" and len(r.err.strip().splitlines()) == 1, r
    assert guest.run(["test", "-e", "/tmp/bb-ran"]).status != 0, "the job ran"
    units = guest.run(["systemctl", "list-units", "--all", "--no-legend", "backburner*"]).out
    assert "backburner-run-" not in units, units
