"""Readahead at a real boot, from the shipped units: boot 1 records (no pack yet), boot 3
replays early, beside the boot, and once it is done the pack's pages are resident without
anything else having read them; a file replaced between the boots is skipped, and the
replay says so in the journal. The units are the shipped ones with two drop-ins: the
guest's install path of backburner, and ConditionVirtualization= emptied (the shipped
units do not run in a VM, where a host's page cache makes a pack meaningless), and a
recording long enough for the check to read its files during it and then end it as
`systemctl stop` does. The units and the files come in the guest's seed, so the
first boot is boot 1 (a boot is most of this check's emulated CPU); where the guest
installs the wheel itself at its first boot, they are put in and the guest rebooted."""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from . import installed
from .rig import Guest

pytestmark = [pytest.mark.root, pytest.mark.timeout(1200)]

REPO = Path(__file__).resolve().parents[2]
UNITS = "/etc/systemd/system"
PACK = "/var/lib/backburner/readahead/boot.pack"
RECORD, REPLAY = "backburner-readahead-record", "backburner-readahead-replay"
def _dropin(guest_bin: str, unit: str, seconds: str | None = None) -> str:
    text = (REPO / "systemd" / f"{unit}.service").read_text()
    start = next(ln for ln in text.splitlines() if ln.startswith("ExecStart="))
    start = start.replace("/usr/bin/backburner", guest_bin)
    if seconds:
        start = start.replace("--seconds 60", f"--seconds {seconds}")
    # an empty Condition... resets them all: the shipped others are said again
    kept = [ln for ln in text.splitlines()
            if ln.startswith("Condition") and not ln.startswith("ConditionVirtualization")]
    return "\n".join(["[Unit]", "ConditionVirtualization=", *kept, "[Service]", "ExecStart=",
                      start, ""])


def _until(ok: Callable[[], bool], what: str, guest: Guest, within_s: float = 240) -> None:
    deadline = time.monotonic() + within_s
    while not ok():
        if time.monotonic() > deadline:
            logs = guest.run(["journalctl", "-b", "--no-pager", "-o", "cat", "-u",
                              f"{RECORD}.service", "-u", f"{REPLAY}.service"]).out
            raise AssertionError(f"{what} within {within_s:g} s\n{logs}")
        time.sleep(2)


def _state(g: Guest, unit: str, prop: str = "ActiveState") -> str:
    return g.run(["systemctl", "show", "-P", prop, f"{unit}.service"]).out.strip()


def _recording(g: Guest) -> bool:
    return "recording what is read" in g.run(
        ["journalctl", "-b", "-u", f"{RECORD}.service", "-o", "cat"]).out


def _boot_one(make_guest: Callable[..., Guest]) -> Guest:
    """A guest at boot 1 with the units enabled: its first boot where the seed brings the
    installed command (the drop-ins name where it is), else the boot after they were put in."""
    units = {f"{unit}.service": (REPO / "systemd" / f"{unit}.service").read_text()
             for unit in (RECORD, REPLAY)}
    data = {f"/opt/bbtest/{name}.bin": os.urandom(4 << 20) for name in ("keep", "data")}
    seeded = installed.host_can_install()
    if seeded:
        dropins = {f"{UNITS}/{unit}.service.d/guest.conf":
                   _dropin(installed.COMMAND, unit, "600" if unit == RECORD else None)
                   for unit in (RECORD, REPLAY)}
        g = make_guest(units=units, files={**data, **dropins})
    else:
        g = make_guest(files=data)
    where = g.run(["sh", "-c", "command -v backburner"], check=True).out.strip()
    if seeded:
        assert where == installed.COMMAND, where
        return g
    for name, text in units.items():
        g.put(f"{UNITS}/{name}", text)
    for unit in (RECORD, REPLAY):
        g.put(f"{UNITS}/{unit}.service.d/guest.conf",
              _dropin(where, unit, "600" if unit == RECORD else None))
    g.run(["systemctl", "daemon-reload"], check=True)
    g.run(["systemctl", "enable", *units], check=True)
    g.run(["sync"], check=True)
    g.reboot()
    return g


def test_boot_records_then_the_next_boot_replays(make_guest: Callable[..., Guest]) -> None:
    g = _boot_one(make_guest)  # boot 1: no pack, so it records; the power fails while it does
    _until(lambda: _recording(g), "the recording", g)
    g.crash()
    # boot 2: nothing half-written was left to replay: it records again
    _until(lambda: _recording(g), "the recording after a power cut", g)
    assert _state(g, REPLAY, "ConditionResult") == "no"
    leftovers = g.run(["sh", "-c", f"ls -A {PACK.rsplit('/', 1)[0]}"]).out.split()
    assert leftovers == [], leftovers
    g.run(["sh", "-c", "cat /opt/bbtest/keep.bin /opt/bbtest/data.bin >/dev/null"], check=True)
    g.run(["systemctl", "stop", f"{RECORD}.service"], check=True, timeout=120)
    _until(lambda: g.run(["test", "-s", PACK]).status == 0, "the pack written", g)
    _until(lambda: _state(g, RECORD) == "inactive", "the recording finished", g)
    assert _state(g, RECORD, "Result") == "success", g.journal(f"{RECORD}.service")
    g.crash()  # the power fails right after the pack was written: it must be there, whole

    # boot 3: the pack exists, so it replays; nothing records
    # the replay runs beside the boot (Type=simple: it delays nothing); once it is done,
    # the page cache is looked at without reading the file
    _until(lambda: _state(g, REPLAY) == "inactive", "the replay done", g)
    assert _state(g, REPLAY, "Result") == "success", g.journal(f"{REPLAY}.service")
    assert _state(g, RECORD, "ConditionResult") == "no"
    (row,) = json.loads(g.run(["fincore", "--json", "--bytes", "/opt/bbtest/keep.bin"],
                              check=True).out)["fincore"]
    said = g.run(["journalctl", "-b", "-u", f"{REPLAY}.service", "-o", "cat"]).out
    assert int(row["res"]) == int(row["size"]) == 4 << 20, f"{row}\n{said}"
    assert re.search(r"^replayed \d+ files?", said, re.M), said
    timing = g.run(["systemd-analyze", "time"]).out.strip()
    print(f"boot 3 (emulated, reported only): {timing}")
    # the boot never waits for the replay (Type=simple: started, not waited for), and the
    # replay itself is bounded by its --deadline 60 whatever it has left
    assert _state(g, REPLAY, "Type") == "simple"
    ran = int(_state(g, REPLAY, "ExecMainExitTimestampMonotonic")) - \
        int(_state(g, REPLAY, "ExecMainStartTimestampMonotonic"))
    assert 0 < ran < 70_000_000, ran
    print(f"the replay ran {ran / 1e6:.1f} s beside the boot (emulated)")

    # an update: one recorded file replaced by another; the replay skips it and says so
    g.run(["sh", "-c", "head -c 4M /dev/urandom > /opt/bbtest/data.new && "
           "mv /opt/bbtest/data.new /opt/bbtest/data.bin"], check=True)
    g.run(["systemctl", "restart", f"{REPLAY}.service"], check=True, timeout=120)
    _until(lambda: _state(g, REPLAY) == "inactive", "the replay after the update", g)
    said = g.run(["journalctl", "-b", "-u", f"{REPLAY}.service", "-o", "cat"]).out
    shown = g.run(["backburner", "readahead", "show", PACK]).out
    assert re.search(r"^replayed \d+ files?, .*skipped 1 changed", said, re.M), said
    assert re.search(r"^changed .*/opt/bbtest/data.bin$", shown, re.M), shown

    # a torn pack (as a file system without the rename's sync could leave one): refused in
    # one line that says what to do, and the unit fails rather than replaying garbage
    g.run(["sh", "-c", f"cp {PACK} /root/pack && truncate -s 100 {PACK}"], check=True)
    g.run(["systemctl", "restart", f"{REPLAY}.service"], timeout=120)
    _until(lambda: _state(g, REPLAY) in ("inactive", "failed"), "the torn pack's replay", g)
    assert _state(g, REPLAY) == "failed"
    lines = g.run(["journalctl", "-b", "-u", f"{REPLAY}.service", "-o", "cat",
                   "_PID=" + _state(g, REPLAY, "ExecMainPID")]).out.strip().splitlines()
    assert len(lines) == 1 and PACK in lines[0], lines
    print(f"torn pack: {lines[0]}")
