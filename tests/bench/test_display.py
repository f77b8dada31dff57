"""bench.display: a private Xvfb and the moment a probe's first top-level window shows --
parsed modes, refusals before anything starts, real windows of Debian's X programs (xclock,
xmessage) and of small python-xlib clients (a title set after the map, an override-redirect
window first), timing through `time_probe`, and nothing left behind."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import bb, one_line_error

from backburner.base.errors import UnavailableError, UsageError
from backburner.bench import display, probes
from backburner.kernel import procfs


def test_modes_parse() -> None:
    assert display.parse_ready("window") is None
    assert display.parse_ready("window:^Hello").pattern == "^Hello"
    assert display.parse_ready("window:a:b").pattern == "a:b"  # the first colon only
    for bad in ("tab", "window:(", "", "window:"):
        with pytest.raises(UsageError):
            display.parse_ready(bad)
    with pytest.raises(UsageError, match="title pattern"):
        probes.Probe.parse("xclock", ready_window="window:(")


def test_missing_xvfb_is_one_line_naming_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(display.shutil, "which", lambda _name: None)
    with pytest.raises(UnavailableError, match="Xvfb") as err:
        display.require_tools()
    assert "apt-get install xvfb" in str(err.value)


def test_the_cookie_is_private_and_never_written_through_a_link(tmp_path: Path) -> None:
    cookie = tmp_path / "c"
    display.write_cookie(str(cookie))
    assert cookie.stat().st_mode & 0o777 == 0o600
    assert b"MIT-MAGIC-COOKIE-1" in cookie.read_bytes()
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(OSError):
        display.write_cookie(str(tmp_path / "link"))
    assert not (tmp_path / "elsewhere").exists()


@pytest.fixture
def screen(tmp_path: Path) -> Iterator[display.Display]:
    with display.Display(str(tmp_path)) as d:
        yield d
    assert not os.path.exists(d.cookie)


def _xvfb_pids() -> list[int]:
    out = subprocess.run(["pgrep", "-x", "Xvfb"], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


CLIENT = """
import sys, time
from Xlib import X, display
d = display.Display()
root = d.screen().root
if sys.argv[1] == "late-title":
    w = root.create_window(0, 0, 100, 100, 0, X.CopyFromParent)
    w.map(); d.sync(); time.sleep(0.5)
    w.set_wm_name("Ready now"); d.sync()
elif sys.argv[1] == "map-then-title":  # no pause: the title races the watcher
    w = root.create_window(0, 0, 100, 100, 0, X.CopyFromParent)
    w.map(); w.set_wm_name("Ready now"); d.sync()
elif sys.argv[1] == "override-first":
    pop = root.create_window(0, 0, 10, 10, 0, X.CopyFromParent, override_redirect=True)
    pop.map(); d.sync(); time.sleep(0.5)
    w = root.create_window(0, 0, 100, 100, 0, X.CopyFromParent)
    w.map(); d.sync()
print(time.monotonic_ns(), flush=True)
time.sleep(30)
"""


def _time(screen: display.Display, probe: probes.Probe, timeout: float = 20
          ) -> probes.ProbeResult:
    return probes.time_probe(probe, timeout, screen=screen)


def test_real_programs_are_timed_to_their_window(screen: display.Display) -> None:
    before = _xvfb_pids()
    assert len(before) >= 1
    clock = _time(screen, probes.Probe(("xclock",), ready_window="window"))
    assert clock.status == "ok" and 0 < clock.wall_s < 20, clock
    msg = _time(screen, probes.Probe(("xmessage", "-title", "Hello there", "hi"),
                                     ready_window="window:^Hello"))
    assert msg.status == "ok", msg
    # the probe was stopped once ready: neither program is still running
    assert subprocess.run(["pgrep", "-x", "xclock|xmessage"]).returncode == 1


def test_a_title_set_after_the_map_and_an_override_redirect_window(
        screen: display.Display, tmp_path: Path) -> None:
    script = tmp_path / "client.py"
    script.write_text(CLIENT)
    late = probes.Probe((sys.executable, str(script), "late-title"),
                        ready_window="window:^Ready")
    t0 = time.monotonic()
    got = _time(screen, late)
    assert got.status == "ok" and got.wall_s >= 0.45, got  # the title, not the map
    assert time.monotonic() - t0 < 10
    racing = probes.Probe((sys.executable, str(script), "map-then-title"),
                          ready_window="window:^Ready")
    assert [_time(screen, racing, timeout=10).status for _ in range(8)] == ["ok"] * 8
    first = probes.Probe((sys.executable, str(script), "override-first"),
                         ready_window="window")
    got = _time(screen, first)
    assert got.status == "ok" and got.wall_s >= 0.45, got  # the popup did not count


def test_no_window_times_out_and_an_early_exit_fails(screen: display.Display) -> None:
    never = _time(screen, probes.Probe(("sleep", "30"), ready_window="window"), timeout=1.5)
    assert never.status == "timeout"
    gone = _time(screen, probes.Probe(("true",), ready_window="window"))
    assert gone.status == "failed" and gone.detail == {"reason": "exited before ready"}
    wrong = _time(screen, probes.Probe(("xmessage", "-title", "Other", "x"),
                                       ready_window="window:^Hello"), timeout=1.5)
    assert wrong.status == "timeout"


def test_the_server_is_private_and_dies_with_its_owner(tmp_path: Path) -> None:
    """No TCP, no socket file, a cookie needed; SIGKILL of the owner takes Xvfb down."""
    code = (f"import time; from backburner.bench import display\n"
            f"d = display.Display({str(tmp_path)!r}).__enter__()\n"
            "print(d.number, flush=True); time.sleep(60)\n")
    owner = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        number = int(owner.stdout.readline())
        assert not os.path.exists(f"/tmp/.X11-unix/X{number}")
        ss = subprocess.run(["ss", "-Hltn"], capture_output=True, text=True).stdout
        assert f":{6000 + number} " not in ss
        # without the cookie the server refuses the client
        env = {k: v for k, v in os.environ.items() if k != "XAUTHORITY"}
        env.update(DISPLAY=f":{number}", XAUTHORITY="/nonexistent")
        refused = subprocess.run(["xmessage", "-timeout", "1", "x"], env=env,
                                 capture_output=True, text=True, timeout=20)
        assert refused.returncode != 0 and re.search(r"open display|[Aa]uthoriz",
                                                     refused.stderr), refused.stderr
        servers = [p for p in _xvfb_pids() if procfs.parent_of(p) == owner.pid]
        assert len(servers) == 1
    finally:
        owner.kill()
        owner.wait()
    deadline = time.monotonic() + 10
    while servers[0] in _xvfb_pids() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert servers[0] not in _xvfb_pids()


@pytest.mark.root
@pytest.mark.timeout(300)
def test_bench_times_a_real_program_to_its_window_on_a_testbed(tmp_path: Path,
                                                                state_dir: Path) -> None:
    """The whole path: the probe's files found under the display (strace), copied to the
    testbed, the probe chrooted there reaching the display with the cookie's copy; every
    trial ok; afterwards no server, no cookie, no X socket file."""
    db = tmp_path / "x.db"
    before = set(_xvfb_pids())
    r = bb("bench", "--probe", "xclock", "--ready", "window", "--load", "none", "--policy",
           "default", "--scheduler", "mq-deadline", "--device", "testbed:256M", "--trials",
           "3", "-o", str(db), timeout=280)
    assert r.returncode == 0, r.err
    with sqlite3.connect(db) as con:
        statuses = [s for (s,) in con.execute("SELECT status FROM trials")]
    assert statuses == ["ok"] * 4, statuses  # with the warm-up
    assert set(_xvfb_pids()) <= before
    leftovers = [p for p in state_dir.rglob("*")
                 if p.name in ("x11-cookie", display.CHROOT_COOKIE)]
    assert leftovers == []


def test_bench_refuses_a_bad_mode_before_anything(tmp_path: Path) -> None:
    r = bb("bench", "--probe", "xclock", "--ready", "tab", "--device", "testbed:256M",
           "-o", str(tmp_path / "x.db"))
    assert r.returncode == UsageError.exit_status
    assert "--ready 'tab': unknown mode" in one_line_error(r)
    assert not (tmp_path / "x.db").exists()


def test_a_planted_socket_file_gets_no_connection(tmp_path: Path) -> None:
    """/tmp/.X11-unix/X<n> is anyone's to create where no X server made it: python-xlib
    would connect there first and send the cookie. The watcher uses the abstract socket
    only."""
    import socket

    folder = Path("/tmp/.X11-unix")
    made = not folder.exists()
    if made:
        folder.mkdir(mode=0o1777)
        folder.chmod(0o1777)
    planted = []
    try:
        for n in range(10):
            path = folder / f"X{n}"
            if path.exists():
                continue
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.bind(str(path))
            sock.listen(4)
            sock.setblocking(False)
            planted.append((sock, path))
        with display.Display(str(tmp_path)) as screen:
            got = _time(screen, probes.Probe(("xclock",), ready_window="window"))
            assert got.status == "ok", got
        for sock, _path in planted:
            with pytest.raises(BlockingIOError):
                sock.accept()  # nobody came
    finally:
        for sock, path in planted:
            sock.close()
            path.unlink()
        if made:
            folder.rmdir()


def test_a_dead_server_is_said_not_waited_for(tmp_path: Path) -> None:
    with display.Display(str(tmp_path)) as screen:
        assert screen.server is not None
        screen.server.signal(9)
        time.sleep(0.5)
        with pytest.raises(UnavailableError, match="went away"):
            _time(screen, probes.Probe(("sleep", "30"), ready_window="window"), timeout=10)
