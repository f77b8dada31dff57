"""Readahead at a real boot, from the shipped units: boot 1 records (no pack yet), boot 2
replays early, beside the boot, and once it is done the pack's pages are resident without
anything else having read them; a file replaced between the boots is skipped, and the
replay says so in the journal. The units are the shipped ones with two drop-ins: the
guest's install path of backburner, and ConditionVirtualization= emptied (the shipped
units do not run in a VM, where a host's page cache makes a pack meaningless), and a
recording long enough for the check to read its files during it and then end it as
`systemctl stop` does."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest

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


def test_boot_records_then_the_next_boot_replays(make_guest: Callable[..., Guest]) -> None:
    g = make_guest()
    where = g.run(["sh", "-c", "command -v backburner"], check=True).out.strip()
    for unit in (RECORD, REPLAY):
        g.put(f"{UNITS}/{unit}.service", (REPO / "systemd" / f"{unit}.service").read_text())
        g.put(f"{UNITS}/{unit}.service.d/guest.conf",
              _dropin(where, unit, "600" if unit == RECORD else None))
    for name in ("keep", "data"):
        g.run(["sh", "-c", f"mkdir -p /opt/bbtest && head -c 4M /dev/urandom "
               f"> /opt/bbtest/{name}.bin"], check=True)
    g.run(["systemctl", "daemon-reload"], check=True)
    g.run(["systemctl", "enable", f"{RECORD}.service", f"{REPLAY}.service"], check=True)

    g.reboot()  # boot 1: no pack, so it records
    _until(lambda: "recording what is read" in g.run(
        ["journalctl", "-b", "-u", f"{RECORD}.service", "-o", "cat"]).out, "the recording", g)
    g.run(["sh", "-c", "cat /opt/bbtest/keep.bin /opt/bbtest/data.bin >/dev/null"], check=True)
    g.run(["systemctl", "stop", f"{RECORD}.service"], check=True, timeout=120)
    _until(lambda: g.run(["test", "-s", PACK]).status == 0, "the pack written", g)
    _until(lambda: g.run(["systemctl", "show", "-P", "ActiveState", f"{RECORD}.service"]
                         ).out.strip() == "inactive", "the recording finished", g)
    result = g.run(["systemctl", "show", "-P", "Result", f"{RECORD}.service"]).out.strip()
    assert result == "success", g.journal(f"{RECORD}.service")
    # an update between the boots: one recorded file replaced by another
    g.run(["sh", "-c", "head -c 4M /dev/urandom > /opt/bbtest/data.new && "
           "mv /opt/bbtest/data.new /opt/bbtest/data.bin"], check=True)

    g.reboot()  # boot 2: the pack exists, so it replays; nothing records
    # the replay runs beside the boot (Type=simple: it delays nothing); once it is done,
    # the page cache is looked at without reading the file
    _until(lambda: g.run(["systemctl", "show", "-P", "ActiveState", f"{REPLAY}.service"]
                         ).out.strip() == "inactive", "the replay done", g)
    said = g.run(["sh", "-c", "journalctl -b --no-pager -o cat | grep -e '^replayed' "
                  "-e '^replay '"]).out
    shown = g.run(["backburner", "readahead", "show", PACK]).out
    (row,) = json.loads(g.run(["fincore", "--json", "--bytes", "/opt/bbtest/keep.bin"],
                              check=True).out)["fincore"]
    assert int(row["res"]) == int(row["size"]) == 4 << 20, f"{row}\n{said}\n{shown}"
    assert re.search(r"^replayed \d+ files?, .*skipped \d+ changed", said, re.M), said
    assert re.search(r"^changed .*/opt/bbtest/data.bin$", shown, re.M), shown
    assert g.run(["systemctl", "show", "-P", "ConditionResult", f"{RECORD}.service"]
                 ).out.strip() == "no"
    timing = g.run(["systemd-analyze", "time"]).out.strip()
    print(f"boot 2 (emulated, reported only): {timing}")
