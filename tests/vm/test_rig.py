"""The rig itself: a failing guest command reads well (output, the unit's journal), a
command that outlives its timeout is killed in the guest, a guest that hangs is killed at
the deadline and reported with its console, a guest boots with the units, files, kernel
arguments and disks a check asks for and reboots the same disk, and QEMU and its files go
away with the test process however it ends."""

from __future__ import annotations

import fcntl
import hashlib
import io
import os
import signal
import subprocess
import sys
import tarfile
import time
import types
from pathlib import Path

import pytest
from helpers import wait_for

from .conftest import RIG_IMAGE
from .image import Image
from .rig import (
    BootHung,
    BootSpec,
    Guest,
    GuestCommandFailed,
    GuestHung,
    remove_stale_runs,
    run_root,
    seed_tar,
    wanted_by,
)

pytestmark = pytest.mark.timeout(900)

FAILING_UNIT = """\
[Unit]
Description=rig check: a unit that fails
[Service]
Type=oneshot
ExecStart=/bin/sh -c 'echo "bb-rig-marker: about to fail"; exit 3'
"""


@pytest.mark.root
def test_a_failing_command_reads_well(guest: Guest) -> None:
    unit = "bb-rig-fails.service"
    guest.put(f"/run/systemd/system/{unit}", FAILING_UNIT)
    guest.run(["systemctl", "daemon-reload"], check=True)
    try:
        with pytest.raises(GuestCommandFailed) as caught:
            guest.run(["systemctl", "start", unit], check=True, units=[unit])
        msg = str(caught.value)
        assert msg.splitlines()[0] == f"guest command failed: systemctl start {unit}: exit status 1"
        assert f"--- stderr (last 30 lines) ---\nJob for {unit} failed" in msg
        journal = msg.split(f"--- journal of {unit} (last 40 lines) ---\n")[1]
        assert "bb-rig-marker: about to fail" in journal
        assert "status=3/NOTIMPLEMENTED" in journal
        # what a failed check gets attached: the failed unit, its journal
        report = guest.failure_report()
        assert unit in report.split("--- failed units ---\n")[1].splitlines()[0]
        assert "bb-rig-marker: about to fail" in report
    finally:
        guest.run(["rm", "-f", f"/run/systemd/system/{unit}"], check=True)
        guest.run(["systemctl", "reset-failed", unit])
        guest.run(["systemctl", "daemon-reload"], check=True)


@pytest.mark.root
def test_a_command_past_its_timeout_is_killed_in_the_guest(guest: Guest) -> None:
    started = time.monotonic()
    r = guest.run(["sh", "-c", "echo started; sleep 60 & wait"], timeout=2)
    assert r.timed_out and r.status == -signal.SIGKILL and r.out == "started\n"
    assert time.monotonic() - started < 20
    assert guest.run(["pgrep", "-f", "sleep 60"]).status == 1  # its whole group went
    with pytest.raises(GuestCommandFailed, match=r": timed out in the guest after 2 s"):
        guest.run(["sleep", "60"], timeout=2, check=True)


# --- the seed and the run directories -------------------------------------------------------


def test_stale_run_directories_go_live_ones_stay(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    root = run_root(cache)
    live, dead = root / "guest-live", root / "guest-dead"
    for d in (live, dead):
        d.mkdir()
        (d / "lock").touch()
    fd = os.open(live / "lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        assert remove_stale_runs(cache) == [dead]
        assert live.exists() and not dead.exists()
    finally:
        os.close(fd)


class _Booting(Guest):
    """A guest whose QEMU is `sleep` and whose agent answers from the boot numbered in
    `answers_from` on: the boot's own steps (run directory, launch, wait, close) are real."""

    def __init__(self, tmp_path: Path, answers_from: int) -> None:
        image = tmp_path / "image.qcow2"
        image.touch()
        super().__init__(types.SimpleNamespace(path=image), cache=tmp_path / "cache")
        self.answers_from, self.boots, self.launched = answers_from, 0, []

    def _prepare_disks(self) -> None:
        pass

    console = ""  # what the first boot's kernel writes to its console

    def _launch(self) -> None:
        self.boots += 1
        self.qemu = subprocess.Popen(["sleep", "60"])
        self.launched.append(self.qemu)
        if self.boots == 1 and self.dir:
            (self.dir / "console.log").write_text(self.console)

    def _request(self, op: str, wait: float, /, **fields: object) -> dict:
        if self.boots < self.answers_from:
            time.sleep(min(wait, 0.05))
            raise TimeoutError
        return {"boot_id": f"boot-{self.boots}"}

    def _check_boot(self, timeout: float) -> None:
        pass


def test_a_boot_that_never_answers_is_tried_once_more(tmp_path: Path) -> None:
    g = _Booting(tmp_path, answers_from=2)
    with pytest.warns(UserWarning, match="guest boot 1 of 2 hung, booting again: guest did "
                      "not answer within 0 s \\(the boot \\(no agent\\)\\)"):
        g.start(timeout=0.3)
    try:
        assert g.boot_id == "boot-2" and g.alive and not g.dead
        assert len(g.hung_boots) == 1 and "--- guest console" in g.hung_boots[0]
        first, second = g.launched
        assert first.poll() is not None and second.poll() is None  # the hung one killed
        assert g.dir and g.dir.exists() and len(list(g.dir.parent.iterdir())) == 1
    finally:
        g.close()
    assert second.poll() is not None


def test_a_boot_whose_cpu_locked_up_is_given_up_at_once(tmp_path: Path) -> None:
    g = _Booting(tmp_path, answers_from=2)
    g.console = ("[   29.95] rcu: INFO: rcu_preempt self-detected stall on CPU\n"
                 "[   56.59] watchdog: BUG: soft lockup - CPU#0 stuck for 44s! [(sd-e):166]\n"
                 "[   84.59] watchdog: BUG: soft lockup - CPU#0 stuck for 70s! [(sd-e):166]\n")
    started = time.monotonic()
    with pytest.warns(UserWarning, match="a CPU locked up"):
        g.start(timeout=60)
    try:
        assert time.monotonic() - started < 10 and g.boots == 2
        assert "stuck for 70s" in g.hung_boots[0]
    finally:
        g.close()
    (tmp_path / "short").mkdir()
    short = _Booting(tmp_path / "short", answers_from=1)
    short.console = "watchdog: BUG: soft lockup - CPU#0 stuck for 23s! [(sd-e):166]\n"
    short.start(timeout=5)  # a lockup shorter than a minute is waited out
    short.close()
    assert short.boots == 1


def test_a_boot_that_hangs_twice_fails_with_the_last_hang(tmp_path: Path) -> None:
    g = _Booting(tmp_path, answers_from=3)
    with pytest.warns(UserWarning, match="guest boot 1 of 2 hung"), \
            pytest.raises(BootHung, match="the boot \\(no agent\\)"):
        g.start(timeout=0.3)
    assert g.boots == 2 and all(q.poll() is not None for q in g.launched)
    assert g.dir is None and not g.alive


def test_a_boot_that_fails_otherwise_is_not_tried_again(tmp_path: Path) -> None:
    class Failing(_Booting):
        def _check_boot(self, timeout: float) -> None:
            raise GuestCommandFailed("the wheel did not install")

    g = Failing(tmp_path, answers_from=1)
    with pytest.raises(GuestCommandFailed, match="the wheel"):
        g.start(timeout=5)
    assert g.boots == 1 and g.dir is None


def test_units_are_enabled_as_their_install_section_says() -> None:
    text = "[Unit]\nWantedBy=no.target\n[Install]\nWantedBy=multi-user.target a.target\n"
    assert wanted_by(text) == ["multi-user.target", "a.target"]
    assert wanted_by("[Service]\nExecStart=/bin/true\n") == []
    spec = BootSpec(units={"x.service": text}, files={"/etc/x": "plain", "/usr/bin/y": "#!/bin/sh"})
    with tarfile.open(fileobj=io.BytesIO(seed_tar(spec))) as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert members["etc/systemd/system/multi-user.target.wants/x.service"].linkname == \
        "/etc/systemd/system/x.service"
    assert members["etc/x"].mode == 0o644 and members["usr/bin/y"].mode == 0o755
    assert members["usr/local/lib/backburner-vm/agent.py"].mode == 0o755
    assert len(seed_tar(spec)) % 512 == 0  # a disk QEMU can attach


# --- the shared guest: booted with the rig's extras, rebooted, then hung (the last of its
# checks in the session's order: a later one would boot it again) ---------------------------

@pytest.mark.root
def test_a_guest_boots_with_its_units_files_kernel_args_and_disks(guest: Guest) -> None:
    own = guest
    # the unit was enabled from the seed and started by systemd at this very boot
    # (a shared guest that hung earlier was booted anew, from a fresh overlay)
    assert own.get("/var/lib/bb-rig/boots").decode().split() == [own.boot_id]
    assert own.run(["systemctl", "is-enabled", "bb-rig-boots.service"]).out == "enabled\n"
    assert own.run(["bb-rig-hello"], check=True).out == "hello from the seed\n"
    assert "bb_rig.marker=42" in own.get("/proc/cmdline").decode().split()
    size = own.run(["blockdev", "--getsize64", "/dev/disk/by-id/virtio-extra"], check=True)
    assert int(size.out) == 1 << 30
    ro = "/dev/disk/by-id/virtio-ro"  # a host image, attached read-only
    assert own.run(["blockdev", "--getro", ro], check=True).out == "1\n"
    assert own.run(["sha256sum", ro], check=True).out.split()[0] == \
        hashlib.sha256(RIG_IMAGE).hexdigest()


@pytest.mark.root
def test_reboot_boots_the_same_disk_again(guest: Guest) -> None:
    own, first = guest, guest.boot_id
    own.run("echo changed > /var/lib/bb-rig/note", check=True)
    try:
        own.reboot()
        assert own.boot_id != first
        assert own.get("/var/lib/bb-rig/boots").decode().split() == [first, own.boot_id]
        assert own.get("/var/lib/bb-rig/note") == b"changed\n"  # the seed is the first boot's
    finally:
        if own.alive:
            own.run("echo seeded > /var/lib/bb-rig/note")


@pytest.mark.root
def test_a_guest_that_hangs_is_killed_and_reported(guest: Guest) -> None:
    own = guest
    qemu, run_dir = own.qemu, own.dir
    assert qemu and run_dir
    own.answer_margin = 5
    with pytest.raises(GuestHung) as caught:
        own.run("echo c > /proc/sysrq-trigger", timeout=2)  # a kernel panic: nothing answers
    msg = str(caught.value)
    assert msg.startswith("guest did not answer within 7 s (run); QEMU killed\n"), msg
    assert "--- guest console (last 40 lines) ---" in msg
    assert "Kernel panic - not syncing: sysrq triggered crash" in msg
    assert qemu.poll() is not None and not own.alive
    with pytest.raises(GuestHung, match="the guest is not usable: guest did not answer"):
        own.run(["true"])
    own.close()
    assert not run_dir.exists()


# --- QEMU dies with the test process -------------------------------------------------------

CHILD = """\
import sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from vm.image import verify
from vm.rig import BootSpec, Guest
Guest(verify(Path({path!r}), {key!r}), BootSpec()).start()
"""


def _qemu_child_of(pid: int) -> int | None:
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                stat = (proc / "stat").read_text()
            except OSError:
                continue
            comm, rest = stat.rsplit(")", 1)
            if int(rest.split()[1]) == pid and comm.endswith("(qemu-system-x86"):
                return int(proc.name)
    return None


def _run_dir_of(qemu: int) -> Path | None:
    """The run directory QEMU was started with (its agent socket's): another session's
    guests may be starting in the same run root meanwhile. None while its command line
    is not there yet: an exec names the process before it sets the new command line
    (a whole run once read it empty)."""
    argv = Path(f"/proc/{qemu}/cmdline").read_bytes().decode().split("\0")
    socks = [a for a in argv if a.startswith("socket,id=agent,path=")]
    if not socks:
        return None
    (sock,) = socks
    run_dir = Path(sock.split("path=", 1)[1].split(",", 1)[0]).parent
    assert run_dir.parent == run_root(), run_dir
    return run_dir


def _gone(pid: int) -> bool:
    """Dead: reaped, or a zombie nobody has reaped yet."""
    try:
        return (Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]) == "Z"
    except FileNotFoundError:
        return True


@pytest.mark.root
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=lambda s: s.name)
def test_qemu_and_its_files_go_with_the_test_process(vm_image: Image, sig: int) -> None:
    """SIGKILL: QEMU gets its parent-death signal, and the next session removes the run
    directory (its lock is free). ^C: the guest is closed on the way out."""
    code = CHILD.format(tests=str(Path(__file__).parents[1]), path=str(vm_image.path),
                        key=vm_image.key)
    with subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE) as child:
        qemu, run_dir = 0, None

        def started() -> bool:
            nonlocal qemu, run_dir
            qemu = _qemu_child_of(child.pid) or 0
            run_dir = _run_dir_of(qemu) if qemu else None
            return run_dir is not None

        wait_for(started, timeout=60, what="QEMU")
        assert run_dir is not None
        time.sleep(1)  # inside start(), waiting for the agent
        os.kill(child.pid, sig)
        child.wait(timeout=60)
        err = child.stderr.read().decode() if child.stderr else ""
    wait_for(lambda: _gone(qemu), timeout=30, what="QEMU to die")
    if sig == signal.SIGKILL:
        assert run_dir.exists()
        assert run_dir in remove_stale_runs()
    else:
        assert "KeyboardInterrupt" in err
    assert not run_dir.exists()
