"""bench's network study with the background policy where systemd owns the cgroup tree
(the Debian guest: systemd 252 as PID 1, cgroup2, netem): bench asks systemd for a
delegated scope, moves itself into its `probe` group and starts the downloads in a
sibling `downloads` group that carries the policy's programs. Four downloads over
`1mbit:40ms`, two trials a cell: the protected cell's ACKs went through the paced class,
and afterwards no scope, group, journal or namespace of the run is left.

Timings here are emulated (TCG): they prove function; docs/measurements/network.md measures on the
host."""

from __future__ import annotations

import json

import pytest

from .rig import Guest

pytestmark = [pytest.mark.root, pytest.mark.timeout(900)]

DB = "/root/netstudy.db"
#: numpy's OpenBLAS would pick a CPU kernel the emulated CPU lacks (SIGILL in the report's
#: plots): name one it can run.
EMULATED_CPU = {"OPENBLAS_CORETYPE": "Prescott"}
SQL = ("SELECT c.policy, t.status, t.extra FROM trials t JOIN cells c ON c.id = t.cell_id "
       "WHERE c.load = 'download:4'")
READ = f"import json, sqlite3; print(json.dumps(sqlite3.connect({DB!r}).execute({SQL!r})" \
       ".fetchall()))"


def test_a_network_study_protects_its_downloads_in_a_delegated_scope(guest: Guest) -> None:
    guest.run(["rm", "-f", DB])
    r = guest.run(["backburner", "bench", "--net-link", "1mbit:40ms", "--load", "download:4",
                   "--policy", "default", "--policy", "background", "-r", "2", "-w", "0",
                   "--settle", "1", "--seed", "4", "--no-html", "-o", DB], timeout=400,
                  env=EMULATED_CPU)
    assert r.status == 0, r
    rows = json.loads(guest.run(["python3", "-c", READ], check=True).out)
    assert len(rows) == 4 and all(status == "ok" for _, status, _ in rows), rows
    for policy, _status, extra in rows:
        bulk = json.loads(extra)["bulk"]
        if policy == "background":  # the policy's proof: ACKs through the paced class
            assert bulk["paced_packets"] > 20, bulk
        else:
            assert "paced_packets" not in bulk, bulk
    left = guest.run("systemctl list-units --all --no-legend 'backburner-bench*'; "
                     "find /sys/fs/cgroup -name 'backburner-bench*'; ip netns list; "
                     "ls /var/lib/backburner/journal 2>/dev/null", check=True)
    assert left.out.strip() == "", left
    guest.run(["rm", "-f", DB])
