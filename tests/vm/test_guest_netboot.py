"""backburner-net.service enabled, as a distribution would ship it, runs from boot: in a
guest of its own (systemd 252 as PID 1), the shipped unit installed and enabled with
`--dev lo` in /etc/default/backburner-net (in the guest's seed, so its first boot is the
boot: where the guest installs the wheel itself then, they are put in and the guest
rebooted). After the boot the service is active, its programs and map are pinned in
/sys/fs/bpf/backburner, and the paced classes are on the interface; disabled and
stopped, the pins and the classes are gone and the interface's qdisc is the kernel's
default for it (a new network namespace's loopback's)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from . import installed
from .rig import Guest

pytestmark = [pytest.mark.root, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[2]
SERVICE = "backburner-net.service"
PINS = "/sys/fs/bpf/backburner"


DEFAULTS = {"/etc/default/backburner-net": "BACKBURNER_NET_ARGS=--dev lo\n"}
FRESH_LO = ("ip netns add bbfresh && ip -n bbfresh link set lo up && "
            "ip netns exec bbfresh tc qdisc show dev lo; ip netns del bbfresh")


def _unit(where: str) -> str:
    return (REPO / "systemd" / SERVICE).read_text().replace("/usr/bin/backburner", where)


def test_the_net_service_enabled_runs_from_boot(make_guest: Callable[..., Guest]) -> None:
    if installed.host_can_install():
        g = make_guest(units={SERVICE: _unit(installed.COMMAND)}, files=DEFAULTS)
    else:
        g = make_guest(files=DEFAULTS)
        where = g.run(["sh", "-c", "command -v backburner"], check=True).out.strip()
        g.put(f"/etc/systemd/system/{SERVICE}", _unit(where))
        g.run(["systemctl", "daemon-reload"], check=True)
        g.run(["systemctl", "enable", SERVICE], check=True)
        g.reboot()
    active = g.run(["systemctl", "is-active", SERVICE])
    assert active.out.strip() == "active", (active, g.run(["journalctl", "-b", "-u", SERVICE]))
    pins = g.run(["ls", PINS], check=True).out.split()
    assert len(pins) >= 3, pins  # the egress and sock_ops programs, the window map
    classes = g.run(["tc", "class", "show", "dev", "lo"], check=True).out
    assert "class htb 1:10" in classes and "class htb 1:20" in classes, classes
    g.run(["systemctl", "disable", "--now", SERVICE], check=True)
    assert g.run(["ls", PINS]).out.split() == []
    default = g.run(FRESH_LO, check=True).out
    assert "root" in default
    assert g.run(["tc", "qdisc", "show", "dev", "lo"], check=True).out == default
    assert g.run("ls /var/lib/backburner/journal 2>/dev/null").out.strip() == ""
