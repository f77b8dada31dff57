"""The network background policy for a systemd unit, where systemd owns the cgroup tree
(the Debian guest: systemd 252 as PID 1, cgroup2, netem): the shipped
backburner-net.service on the testbed's client interface, a unit in the client namespace
downloading through the `1mbit:40ms` link with the drop-in `backburner apply --unit UNIT
--net background` writes. The service's pinned programs are the ones attached to the
unit's group; its ACKs move the paced class's counters; the window map is set and the
unit's socket is clamped and on TCP-LP; `apply --status` says live; a transient unit
with BPFProgram= gets the programs too; with the service failing, the unit still runs
(unpaced) and systemd logs the missing pins. After the unit and
the service stop and `apply --remove`: no pins, the client's qdiscs and classes as
before, no journal left, namespaces, groups, BPF programs and maps and tcp_lp as before
(guest/netsd.py reads it all from the kernel)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from .rig import Guest

pytestmark = [pytest.mark.root, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).parent / "guest" / "netsd.py"


_RESULT: dict[int, dict[str, Any]] = {}


def _netsd(guest: Guest) -> dict[str, Any]:
    """guest/netsd.py's findings, run once for both checks (one testbed, one minute)."""
    if id(guest) not in _RESULT:
        where = guest.run(["sh", "-c", "command -v backburner"], check=True).out.strip()
        unit = (REPO / "systemd" / "backburner-net.service").read_text()
        guest.put("/root/backburner-net.service", unit.replace("/usr/bin/backburner", where))
        guest.put("/root/netsd.py", SCRIPT.read_text())
        guest.put("/root/netbg.py", (SCRIPT.parent / "netbg.py").read_text())
        r = guest.run(["python3", "/root/netsd.py", "/root/backburner-net.service"],
                      timeout=400, check=True)
        _RESULT[id(guest)] = json.loads(r.out)
    return _RESULT[id(guest)]


def test_a_units_downloads_paced_by_the_net_service(guest: Guest) -> None:
    got = _netsd(guest)
    print(json.dumps({k: v for k, v in got.items() if k != "run"}, indent=1))
    assert got["apply"][0] == 0 and got["start"][0] == 0, got
    assert got["service"] == "active", got
    ids = got["ids"]
    assert None not in ids and set(ids) <= set(got["attached"]), got  # systemd attached ours
    first, then = got["ack_packets"]
    assert then - first > 20, got  # the unit's ACKs in the paced class
    clamp, initial = got["window"]
    assert clamp >= 1448 and initial >= 1, got  # the pacer set the window
    # the unit's socket clamped (a moment earlier than the map was read: the pacer moves
    # it), far below an unclamped receiver's, and on TCP-LP
    assert 1448 <= got["job"]["window_clamp"] < 65535 and got["job"]["cc"] == "lp", got
    assert got["job"]["bytes"] > 50_000, got
    assert got["status"][0] == 0, got  # apply --status: live
    # StartTransientUnit takes BPFProgram= too (what `run --net` would need here)
    assert set(ids) <= set(got["transient"]), got
    # the service down (a bad interface): the unit runs all the same, unpaced, and
    # systemd says why
    down = got["service_down"]
    assert down["start"] == 0 and down["unit"] == "active", got
    assert "foreign program /sys/fs/bpf/backburner/" in down["log"], got
    assert got["remove"][0] == 0 and got["service_after"] in ("inactive", "failed"), got
    assert not got["pins_after_stop"], got
    assert got["shaping_after"] == got["shaping_before"], got
    assert got["shaping_after_run"] == got["shaping_before"], got
    assert got["after"] == got["before"], got


def test_run_net_where_systemd_owns_the_tree(guest: Guest) -> None:
    """`backburner run --net background --net-uplink 1mbit` there: the job's transient
    scope gets the run's own pinned programs (BPFProgram=), its ACKs the paced class, its
    upload the upload class, its socket the clamp and TCP-LP; its status 7 mirrored; no
    pin, class or journal of the run left."""
    got = _netsd(guest)["run"]
    print(json.dumps(got, indent=1))
    assert got["status"] == 7, got
    job = json.loads(got["job"])
    assert 1448 <= job["window_clamp"] < 65535 and job["cc"] == "lp", got
    pinned = got["pinned"]
    assert {pinned["ack_egress"], pinned["window_sock_ops"]} <= set(got["attached"]), got
    first, then = got["ack_packets"]
    assert then - first > 20, got
    # --net-uplink: the uplink shaped, the job's upload in the class behind everything else
    assert got["upload_packets"] > 20, got
    assert got["left"] == [], got
