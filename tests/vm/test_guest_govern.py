"""`govern` where systemd owns the cgroup tree, started by systemd from the shipped unit
(Type=notify, its sandboxing as shipped): a test updater service's processes get the idle
class and their service the low weights, and stay in their service (`systemctl stop`
still stops them all); a process in a scope it shares with interactive work (a
terminal's session) gets a transient scope of its own in backburner.slice; `systemctl
reload` takes new rules; stopping govern, or SIGKILL and the unit's ExecStopPost restore,
puts back every weight, runtime drop-in, scope and priority. Everything read back from
the kernel (guest/governed.py), not from `systemctl show`."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from .rig import Guest

pytestmark = [pytest.mark.root, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[2]
UNIT = "/etc/systemd/system/backburner-govern.service"
RULE = '[[rule]]\nname = "{0}"\nmatch = {{ comm = "{0}" }}\npolicy = "background"\n'
UPDATER = "/system.slice/bbtest-updater.service"
SESSION = "/user.slice/bbtest-session.scope"
SCHED_IDLE = 5
#: test programs, copies of sleep (the built-in flatpak rule takes "flatpak" only for an update)
NAMES = ("bbupdater", "bbdesk", "bbother", "flatpak")


def _state(guest: Guest) -> dict[str, Any]:
    r = guest.run(["python3", "/root/governed.py", *NAMES], timeout=60, check=True)
    return json.loads(r.out)


def _wait(guest: Guest, ok: Callable[[dict[str, Any]], bool], what: str,
          within_s: float = 60.0) -> dict[str, Any]:
    deadline = time.monotonic() + within_s
    while True:
        got = _state(guest)
        if ok(got):
            return got
        if time.monotonic() > deadline:
            journal = guest.run(["journalctl", "-b", "-u", "backburner-govern", "-n", "30",
                                 "--no-pager"]).out
            raise AssertionError(f"{what}: {json.dumps(got, indent=1)}\n{journal}")
        time.sleep(1)


def _procs(got: dict[str, Any], comm: str) -> list[dict[str, Any]]:
    return [p for p in got["procs"] if p["comm"] == comm]


#: The test updater: a unit file's service, as a distribution's updater is.
UPDATER_UNIT = ("[Service]\nType=exec\n"
                "ExecStart=/bin/sh -c 'bbupdater 600 & bbupdater 600 & wait'\n")


def _start_updater(guest: Guest) -> None:
    guest.run(["systemctl", "start", "bbtest-updater"], check=True)


def _governed(got: dict[str, Any]) -> bool:
    ups = [p for p in _procs(got, "bbupdater") if p["group"] == UPDATER]
    return len(ups) == 2 and all(p["io"] == "idle" for p in ups) \
        and got["weights"][UPDATER]["io.weight"] == "default 10"


def _put_back(got: dict[str, Any]) -> bool:
    return all(p["io"] == "none" and p["cpu"] == 0 for p in got["procs"]) and not any(
        p["group"].startswith("/backburner.slice/") for p in got["procs"]) \
        and not got["dropins"]


@pytest.fixture
def govern(guest: Guest) -> Iterator[Guest]:
    """The shipped unit (its binary path made the guest's), a rules file, the test
    programs (copies of sleep: a process is named after the file it runs), and a session
    scope holding a desktop program and a bulk one. Everything taken away afterwards."""
    where = guest.run(["sh", "-c", "command -v backburner"], check=True).out.strip()
    unit = (REPO / "systemd" / "backburner-govern.service").read_text()
    guest.put(UNIT, unit.replace("/usr/bin/backburner", where))
    guest.put("/etc/backburner/rules.d/test.toml", RULE.format("bbupdater"))
    guest.put("/etc/systemd/system/bbtest-updater.service", UPDATER_UNIT)
    guest.put("/root/governed.py", (Path(__file__).parent / "guest" / "governed.py").read_text())
    for name in NAMES:
        guest.run(["cp", "/bin/sleep", f"/usr/local/bin/{name}"], check=True)
    guest.run(["systemctl", "daemon-reload"], check=True)
    # a terminal's session, in the background (its output not the agent's: it would wait)
    guest.run("setsid -f systemd-run --quiet --scope --unit=bbtest-session --slice=user.slice"
              " -- sh -c 'bbupdater 600 & exec bbdesk 600' </dev/null >/dev/null 2>&1",
              check=True)
    try:
        yield guest
    finally:
        for unit in ("backburner-govern", "bbtest-updater", "bbtest-other", "bbtest-session.scope"):
            guest.run(["systemctl", "stop", unit])
        guest.run(["systemctl", "reset-failed"])
        guest.run(["rm", "-rf", UNIT, f"{UNIT}.d", "/etc/backburner",
                   "/etc/systemd/system/bbtest-updater.service",
                   *(f"/usr/local/bin/{n}" for n in NAMES)])
        guest.run(["systemctl", "daemon-reload"])


def test_a_service_keeps_its_processes_a_session_process_gets_a_scope(govern: Guest) -> None:
    guest = govern
    _start_updater(guest)
    r = guest.run(["systemctl", "start", "backburner-govern"], timeout=120,
                  units=["backburner-govern"])  # Type=notify: returns once it is ready
    assert r.status == 0, r
    main = guest.run(["systemctl", "show", "-P", "MainPID", "backburner-govern"]).out.strip()

    got = _wait(guest, lambda g: _governed(g) and any(
        p["group"].startswith("/backburner.slice/") for p in _procs(g, "bbupdater")),
        "the updater's processes and the session's bulk process governed")
    ups = [p for p in _procs(got, "bbupdater") if p["group"] == UPDATER]
    assert all(p["cpu"] == SCHED_IDLE for p in ups), got
    assert got["weights"][UPDATER]["cpu.weight"] == "10", got
    assert any("bbtest-updater.service.d" in d for d in got["dropins"]), got
    (moved,) = [p for p in _procs(got, "bbupdater") if p["group"] != UPDATER]
    assert moved["group"].startswith("/backburner.slice/backburner-govern-"), got
    assert moved["io"] == "idle", got
    (desk,) = _procs(got, "bbdesk")  # the interactive work stays where it was, as it was
    assert desk["group"] == SESSION and desk["io"] == "none", got
    assert got["weights"]["/backburner.slice"]["io.weight"] == "default 10", got
    assert got["weights"][SESSION]["io.weight"] in (None, "default 100"), got

    # `systemctl stop` of the updater still reaches every one of its processes
    guest.run(["systemctl", "stop", "bbtest-updater"], check=True)
    got = _wait(guest, lambda g: not [p for p in _procs(g, "bbupdater") if p["group"] == UPDATER]
                and not any("bbtest-updater" in d for d in g["dropins"]),
                "the updater's processes stopped with it, its drop-ins gone")

    # a reload takes a new rule, in the same daemon
    guest.put("/etc/backburner/rules.d/other.toml", RULE.format("bbother"))
    guest.run(["systemctl", "reload", "backburner-govern"], check=True)
    guest.run(["systemd-run", "--unit=bbtest-other", "-p", "Type=exec", "bbother", "600"],
              check=True)
    _wait(guest, lambda g: all(p["io"] == "idle" for p in _procs(g, "bbother"))
          and bool(_procs(g, "bbother")), "the reloaded rule in force")
    assert guest.run(["systemctl", "show", "-P", "MainPID", "backburner-govern"]
                     ).out.strip() == main

    _start_updater(guest)
    _wait(guest, _governed, "the restarted updater governed")
    guest.run(["systemctl", "stop", "backburner-govern"], check=True, timeout=60)
    got = _wait(guest, _put_back, "everything put back after govern stopped", within_s=20)
    # as before: no weight of its own (no file where no unit of the slice asks for one)
    assert got["weights"][UPDATER]["io.weight"] in (None, "default 100"), got
    assert got["weights"][UPDATER]["cpu.weight"] in (None, "100"), got
    assert [p["group"] for p in _procs(got, "bbupdater")].count(SESSION) == 1, got
    status = guest.run(["systemctl", "show", "-P", "ActiveState", "backburner-govern"])
    assert status.out.strip() == "inactive", status
    guest.run(["systemctl", "stop", "bbtest-other"])


def test_sigkill_then_the_units_restore_puts_everything_back(govern: Guest) -> None:
    guest = govern
    # no restart, so that what ExecStopPost put back is seen before a new daemon governs
    guest.put(f"{UNIT}.d/norestart.conf", "[Service]\nRestart=no\n")
    guest.run(["systemctl", "daemon-reload"], check=True)
    if guest.run(["systemctl", "is-active", "bbtest-updater"]).status != 0:
        _start_updater(guest)
    guest.run(["systemctl", "start", "backburner-govern"], timeout=120, check=True,
              units=["backburner-govern"])
    _wait(guest, _governed, "the updater governed")
    guest.run(["systemctl", "kill", "-s", "KILL", "backburner-govern"], check=True)
    got = _wait(guest, _put_back, "everything put back by ExecStopPost", within_s=40)
    assert got["weights"][UPDATER]["io.weight"] in (None, "default 100"), got
    log = guest.run(["journalctl", "-b", "-u", "backburner-govern", "--no-pager"]).out
    assert "restore" in log.lower(), log


#: `flatpak update` as its built-in rule sees it: a program named flatpak (a copy of sleep)
#: whose command line reads "flatpak update", in a service of its own, as a timer starts it
FLATPAK_UNIT = ("[Service]\nType=exec\nExecStart=/bin/bash -c "
                "'exec -a \"flatpak update\" /usr/local/bin/flatpak 600'\n")
#: the least stall a trigger takes: under emulation the guest's reads stall only briefly
#: against its slow CPU (as the office levers' check found)
THROTTLE = "[throttle]\nstall_ms = 1\nwindow_ms = 500\n"
COLD = "/root/govern-cold.bin"
#: interactive work stalled on the disk: a terminal's scope reading a cold file, direct
READER = ["systemd-run", "--quiet", "--scope", "--slice=user.slice", "--", "dd", f"if={COLD}",
          "of=/dev/null", "bs=64k", "iflag=direct"]


def _govern_status(guest: Guest) -> dict[str, Any]:
    r = guest.run(["backburner", "govern", "status", "--json"], timeout=60, check=True)
    return json.loads(r.out)


def test_the_built_in_flatpak_rule_pauses_its_unit_while_a_session_waits(
        govern: Guest) -> None:
    """The shipped rules as shipped: `flatpak update` in a service gets the idle class,
    and govern freezes the service (FreezeUnit) in pauses of at most 500 ms while
    user.slice is stalled on IO, and thaws it; stopping govern leaves it running, thawed,
    with its old class."""
    guest = govern  # its clean-up removes /etc/backburner and the programs
    guest.put("/etc/backburner/rules.d/throttle.toml", THROTTLE)
    guest.put("/etc/systemd/system/bbtest-flatpak.service", FLATPAK_UNIT)
    guest.run(f"head -c 32M /dev/urandom >{COLD} && sync", check=True)
    try:
        guest.run(["systemctl", "daemon-reload"], check=True)
        guest.run(["systemctl", "start", "bbtest-flatpak"], check=True)
        guest.run(["systemctl", "start", "backburner-govern"], timeout=120, check=True,
                  units=["backburner-govern"])
        got = _wait(guest, lambda g: any(p["io"] == "idle" for p in _procs(g, "flatpak")),
                    "flatpak update governed by its built-in rule")
        (proc,) = _procs(got, "flatpak")
        assert proc["group"] == "/system.slice/bbtest-flatpak.service", got
        st = _govern_status(guest)
        assert "bbtest-flatpak.service" in st["throttle"]["groups"], st["throttle"]
        assert any(g["rule"] == "flatpak-update" for g in st["governed"]), st["governed"]
        deadline = time.monotonic() + 120
        while st["throttle"]["pauses"] < 1 and time.monotonic() < deadline:
            guest.run("echo 1 >/proc/sys/vm/drop_caches", check=True)
            guest.run(READER, timeout=120, check=True)
            st = _govern_status(guest)
        assert st["throttle"]["pauses"] >= 1, st["throttle"]
        # the pauses are govern's own count: each one reached systemd without a problem
        assert not [p for p in st["problems"] if "freez" in str(p).lower()], st["problems"]
        assert 0 < st["throttle"]["longest_s"] <= 0.5 + 0.3, st["throttle"]
        guest.run(["systemctl", "stop", "backburner-govern"], check=True, timeout=60)
        state = [guest.run(["systemctl", "show", "-P", prop, "bbtest-flatpak"],
                           check=True).out.strip() for prop in ("FreezerState", "ActiveState")]
        assert state == ["running", "active"], state
        _wait(guest, lambda g: bool(_procs(g, "flatpak"))
              and all(p["io"] == "none" for p in _procs(g, "flatpak")),
              "flatpak's old class back after govern stopped", within_s=20)
    finally:
        guest.run(["systemctl", "stop", "bbtest-flatpak"])
        guest.run(["rm", "-f", "/etc/systemd/system/bbtest-flatpak.service", COLD])



#: A service whose program (python3 under a name of its own) waits until govern gave it the
#: idle class, then writes and closes a file, and stays.
WRITER_PY = r"""
import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
while libc.syscall(252, 1, 0) >> 13 != 3:  # ioprio_get(PROCESS, self): idle yet?
    time.sleep(0.1)
with open("/var/tmp/bb-govflush.bin", "wb") as f:
    f.write(os.urandom(16 << 20))
time.sleep(600)
"""
WRITER_UNIT = "[Service]\nType=exec\nExecStart=/usr/local/bin/bbwriter -I /root/bbwriter.py\n"
FLUSH_RULE = ('[[rule]]\nname = "bbwriter"\nmatch = { comm = "bbwriter" }\n'
              'policy = "background"\nflush_behind = true\n')
NO_FANOTIFY = "[Service]\nSystemCallFilter=~fanotify_init fanotify_mark\n"


def _flushed(guest: Guest) -> dict[str, Any]:
    """govern's status once it counts a file written back (rewritten as events arrive)."""
    deadline = time.monotonic() + 60
    while True:
        st = _govern_status(guest)
        if (st["flush_behind"] or {}).get("flushed_files") or time.monotonic() > deadline:
            return st
        time.sleep(1)


def test_flush_behind_under_the_shipped_unit_and_without_fanotify(govern: Guest) -> None:
    """A rule with flush_behind under the shipped unit's sandbox: the governed service's
    closed file is written back and `status` counts it. A unit whose syscall filter leaves
    fanotify out keeps governing, flush-behind off and said under its problems."""
    guest = govern  # its clean-up removes /etc/backburner, the unit's drop-ins, the programs
    guest.put("/etc/backburner/rules.d/flush.toml", FLUSH_RULE)
    guest.put("/root/bbwriter.py", WRITER_PY)
    guest.put("/etc/systemd/system/bbtest-writer.service", WRITER_UNIT)
    guest.run(["ln", "-sf", "/usr/bin/python3", "/usr/local/bin/bbwriter"], check=True)
    try:
        guest.run(["systemctl", "daemon-reload"], check=True)
        guest.run(["systemctl", "start", "backburner-govern"], timeout=120, check=True,
                  units=["backburner-govern"])
        guest.run(["systemctl", "start", "bbtest-writer"], check=True)
        st = _flushed(guest)
        assert st["flush_behind"]["flushed_files"] == 1, st
        assert st["flush_behind"]["flushed_bytes"] == 16 << 20, st
        assert "flush_problems" not in st["flush_behind"], st
        assert not [p for p in st["problems"] if "flush" in p], st["problems"]

        guest.put(f"{UNIT}.d/no-fanotify.conf", NO_FANOTIFY)
        guest.run(["systemctl", "daemon-reload"], check=True)
        guest.run(["systemctl", "restart", "backburner-govern"], timeout=120, check=True,
                  units=["backburner-govern"])
        st = _govern_status(guest)
        assert st["running"] and st["flush_behind"] is None, st
        assert [p for p in st["problems"] if p.startswith("flush-behind is off")], st
        writer = json.loads(guest.run(["python3", "/root/governed.py", "bbwriter"],
                                      check=True).out)["procs"]
        assert [p["io"] for p in writer] == ["idle"], writer  # the rule's other settings
    finally:
        guest.run(["systemctl", "stop", "bbtest-writer"])
        guest.run(["rm", "-f", "/etc/systemd/system/bbtest-writer.service", "/root/bbwriter.py",
                   "/usr/local/bin/bbwriter", "/var/tmp/bb-govflush.bin"])
