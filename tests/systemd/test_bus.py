"""The D-Bus client against a real bus daemon of the test's own (this machine has no systemd
as PID 1: what systemd itself answers is checked in the guest, tests/vm)."""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from backburner.base.errors import UnavailableError
from backburner.systemd import bus

CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig><type>custom</type><listen>unix:path={sock}</listen><auth>EXTERNAL</auth>
<policy context="default"><allow send_destination="*" eavesdrop="true"/>
<allow eavesdrop="true"/><allow own="*"/></policy></busconfig>
"""


@pytest.fixture
def private_bus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A dbus-daemon of our own as 'the system bus', with no systemd on it."""
    if shutil.which("dbus-daemon") is None:
        pytest.fail("dbus-daemon is not installed (apt-get install dbus)")
    sock = tmp_path / "bus"
    (tmp_path / "bus.conf").write_text(CONFIG.format(sock=sock))
    daemon = subprocess.Popen(["dbus-daemon", f"--config-file={tmp_path / 'bus.conf'}",
                               "--nofork", "--print-address"], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL)
    try:
        assert daemon.stdout is not None and daemon.stdout.readline()
        monkeypatch.setenv("DBUS_SYSTEM_BUS_ADDRESS", f"unix:path={sock}")
        monkeypatch.setattr(bus, "PRIVATE", str(tmp_path / "no-private-socket"))
        yield str(sock)
    finally:
        daemon.kill()
        daemon.wait()


def test_a_bus_without_systemd_on_it_is_unavailable_in_one_error(private_bus: str) -> None:
    with bus.Bus.connect() as b:
        assert not b.direct
        with pytest.raises(UnavailableError, match="the unit of PID 1: systemd does not "
                                                    "answer on D-Bus") as err:
            b.unit_of_pid(1)
    assert err.value.exit_status == 69 and "\n" not in str(err.value)


def test_no_bus_at_all_is_unavailable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DBUS_SYSTEM_BUS_ADDRESS", f"unix:path={tmp_path / 'nothing'}")
    monkeypatch.setattr(bus, "PRIVATE", str(tmp_path / "no-private-socket"))
    with pytest.raises(UnavailableError, match="not reachable"):
        bus.Bus.connect(timeout_s=1.0)


@pytest.mark.parametrize("name, kind, status", [
    ("org.freedesktop.systemd1.NoSuchUnit", "NotFoundError", 66),
    ("org.freedesktop.DBus.Error.AccessDenied", "AccessError", 77),
    ("org.freedesktop.DBus.Error.InvalidArgs", "UsageError", 64),
    ("org.freedesktop.DBus.Error.ServiceUnknown", "UnavailableError", 69),
    ("org.freedesktop.systemd1.SomethingElse", "SystemStateError", 71)])
def test_error_replies_become_our_errors(name: str, kind: str, status: int) -> None:
    err = bus._error(name, "Unit x.service not loaded.", "setting IOWeight of x.service")
    assert type(err).__name__ == kind and err.exit_status == status
    assert str(err).startswith("setting IOWeight of x.service")


def test_the_property_of_unset_weights_is_systemds() -> None:
    assert bus.WEIGHT_UNSET == 18446744073709551615  # (uint64_t) -1, CGROUP_WEIGHT_INVALID
    assert os.path.basename(bus.PRIVATE) == "private"


@pytest.fixture
def fake_peer(tmp_path: Path) -> Iterator[Callable[[str], str]]:
    """A socket where something that is not systemd answers: `silent` (accepts, says
    nothing), `garbage` (random bytes at once), `ok-then-garbage` (accepts the
    authentication, then answers a call with garbage)."""
    threads: list[threading.Thread] = []
    stop = threading.Event()

    def serve(listener: socket.socket, mode: str) -> None:
        rng = random.Random(7)
        listener.settimeout(10)
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        with conn:
            conn.settimeout(10)
            try:
                if mode == "garbage":
                    conn.sendall(bytes(rng.getrandbits(8) for _ in range(600)))
                elif mode == "ok-then-garbage":
                    while b"BEGIN" not in conn.recv(4096):
                        conn.sendall(b"OK 0123456789abcdef0123456789abcdef\r\n")
                    conn.recv(4096)
                    conn.sendall(b"l" + bytes(rng.getrandbits(8) for _ in range(600)))
                stop.wait(10)
            except OSError:
                pass

    def start(mode: str) -> str:
        path = str(tmp_path / f"peer-{mode}")
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(path)
        listener.listen(1)
        t = threading.Thread(target=serve, args=(listener, mode), daemon=True)
        t.start()
        threads.append(t)
        return path

    yield start
    stop.set()
    for t in threads:
        t.join(15)


@pytest.mark.parametrize("mode", ["silent", "garbage", "ok-then-garbage"])
@pytest.mark.parametrize("where", ["bus", "private"])
def test_a_peer_that_is_not_dbus_is_unavailable_in_one_line(
        mode: str, where: str, fake_peer: Callable[[str], str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Something else at the bus's address or at systemd's private socket, silent or
    speaking garbage before or after authentication: 69 in one line, never a traceback."""
    peer = fake_peer(mode)
    if where == "bus":
        monkeypatch.setenv("DBUS_SYSTEM_BUS_ADDRESS", f"unix:path={peer}")
        monkeypatch.setattr(bus, "PRIVATE", str(tmp_path / "no-private-socket"))
    else:
        monkeypatch.setenv("DBUS_SYSTEM_BUS_ADDRESS", f"unix:path={tmp_path / 'no-bus'}")
        monkeypatch.setattr(bus, "PRIVATE", peer)
    with pytest.raises(UnavailableError) as err, bus.Bus.connect(timeout_s=1.0) as b:
        b.call("/org/freedesktop/systemd1", "org.freedesktop.DBus.Peer", "Ping",
               timeout_s=1.0)
    assert err.value.exit_status == 69 and "\n" not in str(err.value), str(err.value)
