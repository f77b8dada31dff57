"""The network policy where systemd runs on cgroup v1 alone (a guest of its own, booted
with `systemd.unified_cgroup_hierarchy=0 systemd.legacy_systemd_cgroup_controller=1`: no
cgroup2 mount, so no BPFProgram= and no cgroup program): `run --net background
--net-uplink` puts the job in its systemd scope and in a net_cls group of the run's, the
classifier reads its class id, so its ACKs move the paced class and its upload the
upload class; its status is mirrored and nothing is left (guest/netv1.py reads it all).
`doctor` says how it would be done."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from .rig import Guest

pytestmark = [pytest.mark.root, pytest.mark.timeout(900)]

SCRIPT = Path(__file__).parent / "guest" / "netv1.py"
LEGACY = ("systemd.unified_cgroup_hierarchy=0", "systemd.legacy_systemd_cgroup_controller=1")


def test_run_net_on_systemd_with_cgroup_v1_alone(make_guest: Callable[..., Guest]) -> None:
    g = make_guest(kernel_args=LEGACY)
    g.put("/root/netv1.py", SCRIPT.read_text())
    g.put("/root/netbg.py", (SCRIPT.parent / "netbg.py").read_text())
    got = json.loads(g.run(["python3", "/root/netv1.py"], timeout=400, check=True).out)
    print(json.dumps(got, indent=1))
    assert "cgroup2" not in got["cgroup_fs"] and got["net_cls_at"], got
    assert ":name=systemd:/init.scope" in got["pid1"], got  # systemd owns the v1 tree
    assert any("ok" in ln and "net_cls" in ln for ln in got["doctor"]), got
    assert got["status"] == 7, got
    assert "(cgroup v1 net_cls " in got["stderr"], got
    cgroups = json.loads(got["job"])["cgroups"]
    assert any(":net_cls" in ln and "/backburner-net-" in ln for ln in cgroups), cgroups
    assert any(":name=systemd:" in ln and ln.endswith(".scope") and "backburner" in ln
               for ln in cgroups), cgroups
    seen = got["seen"]
    assert seen["ack_packets"] > 20 and seen["upload_packets"] > 20, seen
    assert len(seen["groups"]) == 1, seen
    assert got["same_after"] and got["journal"] == [], got
