"""A Debian guest under QEMU that a check drives from the host: run a command, put or get a
file, read the journal, reboot, all through the guest's agent (seed/agent.py) on a
virtio-serial port of its own.

Each guest boots the cached image (image.py) through a throwaway copy-on-write overlay, with
a seed disk (a tar the guest unpacks before systemd loads its units: the agent, this
commit's wheel as installed (installed.py), the files and units a check asked for).
Everything a guest has on the host (overlay, seed, disks, socket, console log) lives in one
private run directory that holds a lock while the guest lives: QEMU dies with the test
process (parent-death signal), and a run directory whose lock is free was left by a killed
session and is removed by the next.
"""

from __future__ import annotations

import atexit
import base64
import fcntl
import functools
import io
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import tarfile
import tempfile
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from backburner.files.safepath import private_dir

from . import installed
from .image import CACHE, Image
from .proc import dies_with_us

HERE = Path(__file__).parent
SEED = HERE / "seed"
PORT_NAME = "org.backburner.agent"
AGENT_UNITS = ("backburner-vm-wheel.service", "backburner-vm-agent.service")
WHEEL_DIR = "/var/lib/backburner-vm/wheel"
WHEEL_DONE = "/var/lib/backburner-vm/wheel-installed"

BOOT_TIMEOUT = float(os.environ.get("BACKBURNER_VM_BOOT_TIMEOUT", "300"))
#: Boots tried before a guest counts as unbootable: an emulated boot that stops before its
#: agent (seen once in many sessions: a silent console, and the next boot, alone, 25 s) is
#: tried once more, so one stuck boot does not fail every check that shares the guest.
BOOT_ATTEMPTS = 2
#: A boot whose kernel reports a CPU stuck this long is given up (and tried again).
LOCKUP_S = 60
_SOFT_LOCKUP = re.compile(r"soft lockup - CPU#\d+ stuck for (\d+)s!")
ANSWER_MARGIN = 30.0  # beyond a command's own timeout, for the agent to answer
CONSOLE_TAIL = 40


_LIVE: set[Guest] = set()  # closed at exit too: a ^C that skipped a fixture's teardown


@atexit.register
def _close_all() -> None:
    for g in list(_LIVE):
        g.close()


class GuestHung(Exception):
    """The guest did not answer by the deadline: it was killed (console tail attached)."""


class BootHung(GuestHung):
    """No agent answered within the boot's time: the guest never came up."""


class GuestCommandFailed(AssertionError):
    """A command failed in the guest: the message has its output and the journal asked for."""


@dataclass(frozen=True, repr=False)
class GuestResult:
    argv: list[str]
    status: int  # like Popen.returncode: the exit code, or -N for death by signal N
    stdout: bytes
    stderr: bytes
    timed_out: bool
    seconds: float

    @property
    def out(self) -> str:
        return self.stdout.decode(errors="replace")

    @property
    def err(self) -> str:
        return self.stderr.decode(errors="replace")

    def __repr__(self) -> str:
        """Readable as an assertion's message (`assert r.status == 0, r`): the command, how
        it ended, its output."""
        parts = [f"{_shell_join(self.argv)}: {self.how()}"]
        for name, text in (("stdout", self.out), ("stderr", self.err)):
            if text.strip():
                parts.append(f"--- {name} (last 30 lines) ---\n"
                             + "\n".join(text.splitlines()[-30:]))
        return "\n".join(parts)

    def how(self) -> str:
        if self.timed_out:
            return f"timed out in the guest after {self.seconds:.0f} s (its process group killed)"
        if self.status < 0:
            return f"killed by {signal.Signals(-self.status).name}"
        return f"exit status {self.status}"


@dataclass
class BootSpec:
    """What one guest boots with, beyond the image."""

    wheel: Path | None = None  # installed with pip at the first boot
    files: Mapping[str, bytes | str] = field(default_factory=dict)  # guest path -> content
    units: Mapping[str, str] = field(default_factory=dict)  # /etc/systemd/system, enabled
    kernel_args: Sequence[str] = ()
    # serial -> size of an empty disk, seen in the guest as /dev/disk/by-id/virtio-SERIAL
    disks: Mapping[str, str] = field(default_factory=dict)
    # serial -> a raw disk image on the host, attached read-only (the guest cannot change it)
    images: Mapping[str, Path] = field(default_factory=dict)
    # serial -> size of an empty disk on QEMU's emulated NVMe controller (one each), seen
    # in the guest as /dev/nvmeNn1, /dev/disk/by-id/nvme-QEMU_NVMe_Ctrl_SERIAL
    nvme: Mapping[str, str] = field(default_factory=dict)
    memory: str = "2G"
    cpus: int = 2


def kvm_works() -> bool:
    """KVM is used only with hardware virtualisation: a /dev/kvm that opens is not enough
    (a kernel with a paravirtual KVM backend opens it, and then cannot run a stock guest)."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    if not re.search(r"^flags\s*:.*\b(vmx|svm)\b", flags, re.M):
        return False
    try:
        os.close(os.open("/dev/kvm", os.O_RDWR | os.O_CLOEXEC))
    except OSError:
        return False
    return True


def accel() -> list[str]:
    choice = os.environ.get("BACKBURNER_VM_ACCEL") or ("kvm" if kvm_works() else "tcg")
    return ["-accel", "kvm", "-cpu", "host"] if choice == "kvm" else ["-accel", "tcg"]


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text)


def wanted_by(unit_text: str) -> list[str]:
    """The targets a unit's [Install] section names in WantedBy= (what `enable` links)."""
    section, targets = "", []
    for line in unit_text.splitlines():
        line = line.strip()
        if line.startswith("["):
            section = line
        elif section == "[Install]" and line.startswith("WantedBy="):
            targets += line.partition("=")[2].split()
    return targets


def seed_tar(spec: BootSpec) -> bytes:
    """The seed the guest unpacks into / before systemd loads its units."""
    members: dict[str, tuple[bytes, int] | str] = {}  # path -> (content, mode) | link target
    members["/usr/local/lib/backburner-vm/agent.py"] = ((SEED / "agent.py").read_bytes(), 0o755)
    units = {u: (SEED / u).read_text() for u in AGENT_UNITS}
    units.update(spec.units)
    for name, text in units.items():
        path = f"/etc/systemd/system/{name}"
        members[path] = (text.encode(), 0o644)
        for target in wanted_by(text):
            members[f"/etc/systemd/system/{target}.wants/{name}"] = path
    if spec.wheel:
        members.update(_wheel_members(spec.wheel))
    for path, content in spec.files.items():
        data = content.encode() if isinstance(content, str) else content
        members[path] = (data, 0o755 if data.startswith(b"#!") else 0o644)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for path, what in sorted(members.items()):
            info = tarfile.TarInfo(path.lstrip("/"))
            info.mtime = int(time.time())
            if isinstance(what, str):
                info.type, info.linkname = tarfile.SYMTYPE, what
                tar.addfile(info)
            else:
                info.size, info.mode = len(what[0]), what[1]
                tar.addfile(info, io.BytesIO(what[0]))
    return buf.getvalue()


@functools.cache
def _wheel_members(wheel: Path) -> dict[str, tuple[bytes, int] | str]:
    """The wheel installed by the host's pip (installed.py), marked done for the guest's
    install unit; or the wheel itself, for that unit to install at the first boot."""
    if installed.host_can_install():
        return {**installed.installed_files(wheel), WHEEL_DONE: (b"", 0o644)}
    return {f"{WHEEL_DIR}/{wheel.name}": (wheel.read_bytes(), 0o644)}


def run_root(cache: Path = CACHE) -> Path:
    return private_dir(cache / "run", "the VM run directory")


def remove_stale_runs(cache: Path = CACHE) -> list[Path]:
    """Run directories whose lock nobody holds: their session was killed (SIGKILL)."""
    removed = []
    for d in run_root(cache).glob("guest-*"):
        try:
            fd = os.open(d / "lock", os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:  # being created right now, or never locked: by age
            if time.time() - d.stat().st_mtime < 600:
                continue
        else:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # a live guest
            finally:
                os.close(fd)
        shutil.rmtree(d, ignore_errors=True)
        removed.append(d)
    return removed


class Guest:
    """One booted guest. `start()` boots it; `close()` kills QEMU and removes its files."""

    def __init__(self, image: Image, spec: BootSpec | None = None, *,
                 cache: Path = CACHE) -> None:
        self.image = image
        self.spec = spec or BootSpec()
        self.cache = cache
        self.dir: Path | None = None
        self.qemu: subprocess.Popen | None = None
        self.sock: socket.socket | None = None
        self.boot_id = ""
        self.boot_seconds = 0.0
        self.boot_state = ""
        self.dead = ""  # why the guest can no longer be used ("" while it can)
        self.hung_boots: list[str] = []  # boots of start() that never answered, retried
        self.answer_margin = ANSWER_MARGIN  # beyond a command's timeout: then it hung
        self._lock_fd: int | None = None
        self._buf = b""
        self._next_id = 0

    # --- life cycle ------------------------------------------------------------------------

    def start(self, timeout: float = BOOT_TIMEOUT, attempts: int = BOOT_ATTEMPTS) -> Guest:
        """Boot; return once the agent answers and systemd says the boot is over. A boot
        whose agent never answers is tried again, up to `attempts` boots, each said in
        `hung_boots` (with its console) and in a warning; any other failure is final."""
        for attempt in range(1, attempts + 1):
            try:
                return self._boot(timeout)
            except BootHung as exc:
                if attempt == attempts:
                    raise
                self.hung_boots.append(str(exc))
                warnings.warn(f"guest boot {attempt} of {attempts} hung, booting again: "
                              f"{exc}", stacklevel=2)
                self.dead = ""
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _boot(self, timeout: float) -> Guest:
        started = time.monotonic()
        self._make_run_dir()
        try:
            os.utime(self.image.path)  # in use: not pruned while sessions boot from it
            self._prepare_disks()
            self._launch()
            self._wait_for_agent(started + timeout, timeout, previous="", boot=True)
            self._check_boot(max(started + timeout - time.monotonic(), 30))
        except BaseException:
            self.close()
            raise
        self.boot_seconds = time.monotonic() - started
        return self

    def shell(self) -> int:
        """Boot with the console on this terminal: a root shell (Ctrl-A X quits QEMU)."""
        self._make_run_dir()
        try:
            self._prepare_disks()
            return subprocess.run(self.qemu_argv(console=True), preexec_fn=dies_with_us(),
                                  check=False).returncode
        finally:
            self.close()

    def _make_run_dir(self) -> None:
        """A private run directory, locked while this guest lives (see remove_stale_runs)."""
        self.dir = Path(tempfile.mkdtemp(prefix="guest-", dir=run_root(self.cache)))
        self._lock_fd = os.open(self.dir / "lock", os.O_RDWR | os.O_CREAT | os.O_EXCL
                                | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        fcntl.flock(self._lock_fd, fcntl.LOCK_EX)
        _LIVE.add(self)

    def _prepare_disks(self) -> None:
        assert self.dir
        self._qemu_img("create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", str(self.image.disk),
                       str(self.dir / "root.qcow2"))
        (self.dir / "seed.tar").write_bytes(seed_tar(self.spec))
        for serial, path in self.spec.images.items():
            if not re.fullmatch(r"[A-Za-z0-9_-]{1,20}", serial) or serial in self.spec.disks:
                raise ValueError(f"image serial {serial!r}: letters, digits, _ and -, unique")
            if "," in str(path) or not Path(path).is_file():  # a comma ends QEMU's file=
                raise ValueError(f"image {path}: a regular file, with no comma in its path")
        for serial, size in [*self.spec.disks.items(), *self.spec.nvme.items()]:
            if not re.fullmatch(r"[A-Za-z0-9_-]{1,20}", serial):
                raise ValueError(f"disk serial {serial!r}: letters, digits, _ and - only")
            self._qemu_img("create", "-q", "-f", "qcow2", str(self.dir / f"disk-{serial}.qcow2"),
                           size)

    @staticmethod
    def _qemu_img(*args: str) -> None:
        subprocess.run(["qemu-img", *args], check=True, capture_output=True, timeout=60,
                       preexec_fn=dies_with_us())

    def qemu_argv(self, console: bool = False) -> list[str]:
        """`console`: the serial console on our terminal, with a root login on it; else in
        console.log, without a getty (it would hang up every other writer of the console)."""
        assert self.dir
        d, spec = self.dir, self.spec
        # tsc=reliable: the kernel finds the vCPUs' TSCs unsynchronised under emulation
        # (they are not: QEMU derives them from one host clock) and falls back to the HPET,
        # every read of which is an emulated device access (docs/design/vm.md, "Budget")
        cmdline = ["root=/dev/vda", "rw", "console=ttyS0", "quiet", "panic=0", "tsc=reliable",
                   *([] if console else ["systemd.mask=serial-getty@ttyS0.service"]),
                   *spec.kernel_args]
        # (id, -drive options, serial): the guest finds a disk by its serial
        # (/dev/disk/by-id/virtio-SERIAL); the image is always the first, /dev/vda
        drives = [("root", f"file={d / 'root.qcow2'},format=qcow2,cache=unsafe,discard=unmap",
                   ""),
                  ("seed", f"file={d / 'seed.tar'},format=raw,readonly=on", "bbseed")]
        drives += [(f"disk{i}", f"file={d / f'disk-{s}.qcow2'},format=qcow2,cache=unsafe", s)
                   for i, s in enumerate(spec.disks)]
        drives += [(f"image{i}", f"file={path},format=raw,readonly=on", s)
                   for i, (s, path) in enumerate(spec.images.items())]
        argv = ["qemu-system-x86_64", "-name", "backburner-guest", "-nodefaults",
                "-no-user-config", "-display", "none", *accel(),
                "-smp", str(spec.cpus), "-m", spec.memory,
                "-kernel", str(self.image.kernel), "-initrd", str(self.image.initrd),
                "-append", " ".join(cmdline),
                "-serial", "mon:stdio" if console else f"file:{d / 'console.log'}",
                "-chardev", f"socket,id=agent,path={d / 'agent.sock'},server=on,wait=off",
                "-device", "virtio-serial-pci",
                "-device", f"virtserialport,chardev=agent,name={PORT_NAME}",
                "-device", "virtio-rng-pci"]
        for ident, options, serial in drives:
            argv += ["-drive", f"{options},if=none,id={ident}", "-device",
                     f"virtio-blk-pci,drive={ident}" + (f",serial={serial}" if serial else "")]
        for i, serial in enumerate(spec.nvme):
            argv += ["-drive", f"file={d / f'disk-{serial}.qcow2'},format=qcow2,cache=unsafe,"
                     f"if=none,id=nvme{i}", "-device", f"nvme,drive=nvme{i},serial={serial}"]
        return argv

    def _launch(self) -> None:
        assert self.dir
        with open(self.dir / "qemu.log", "wb") as log:
            # its own session: a ^C at the terminal is pytest's to handle, and it kills QEMU
            self.qemu = subprocess.Popen(self.qemu_argv(), stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True,
                                         preexec_fn=dies_with_us())
        path = str(self.dir / "agent.sock")
        deadline = time.monotonic() + 30
        while True:
            self._check_qemu_alive("starting")
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
            try:
                sock.connect(path)
            except (FileNotFoundError, ConnectionRefusedError):
                sock.close()
                if time.monotonic() > deadline:
                    self._hung("QEMU's agent socket", 30)
                time.sleep(0.05)
                continue
            self.sock = sock
            return

    def _check_qemu_alive(self, what: str) -> None:
        if self.qemu and self.qemu.poll() is not None:
            status = self.qemu.returncode
            log = (self.dir / "qemu.log").read_text(errors="replace")[-2000:] if self.dir else ""
            self.dead = f"QEMU exited (status {status}) while {what}"
            raise GuestHung(f"{self.dead}\n--- QEMU's output ---\n{log}\n"
                            f"{self._console_section()}")

    def _wait_for_agent(self, deadline: float, budget: float, previous: str,
                        boot: bool = False) -> None:
        """Ping until an agent of a boot other than `previous` answers. A first boot whose
        kernel reports a CPU stuck for a minute is given up at once (see `_locked_up`)."""
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._hung("the boot (no agent)", budget, BootHung if boot else GuestHung)
            if boot and self._locked_up():
                self._hung("the boot (no agent; a CPU locked up)",
                           budget - remaining, BootHung)
            try:
                reply = self._request("ping", min(5.0, remaining))
            except TimeoutError:
                continue
            if reply["boot_id"] != previous:
                self.boot_id = reply["boot_id"]
                return
            time.sleep(0.5)  # the old boot's agent, still up while it shuts down

    def _locked_up(self) -> bool:
        """The emulated kernel says a CPU has been stuck for LOCKUP_S or more: seen in a
        boot that never recovered (a soft lockup in systemd's executor from 30 s on, still
        stuck at 245 s when the 300 s ran out), so the retry need not wait for the end."""
        stuck = [int(n) for n in _SOFT_LOCKUP.findall(self.console_tail(CONSOLE_TAIL))]
        return bool(stuck) and max(stuck) >= LOCKUP_S

    def _check_boot(self, timeout: float) -> None:
        """The boot finished (or says why not), and the wheel, if any, is installed."""
        state = self.run(["systemctl", "is-system-running", "--wait"], timeout=timeout)
        self.boot_state = state.out.strip()  # "running", or "degraded" if a unit failed
        if self.spec.wheel and self.run(["test", "-e", WHEEL_DONE]).status != 0:
            raise GuestCommandFailed(
                f"this commit's wheel ({self.spec.wheel.name}) did not install in the guest\n"
                + self.journal("backburner-vm-wheel.service", 40))

    def reboot(self, timeout: float = BOOT_TIMEOUT) -> None:
        """`systemctl reboot` and wait for the next boot of the same disk to be up."""
        started = time.monotonic()
        previous = self.boot_id
        self._ask("reboot", self.answer_margin)
        self._wait_for_agent(started + timeout, timeout, previous)
        self._check_boot(max(started + timeout - time.monotonic(), 30))

    def crash(self, timeout: float = BOOT_TIMEOUT) -> None:
        """A power cut as the guest sees it: the kernel reboots at once (sysrq b: no sync, no
        unmount, no unit stopped), so what was not on its disk yet is lost; then wait for
        the next boot to be up."""
        started = time.monotonic()
        previous = self.boot_id
        self.run(["sh", "-c", "echo 1 > /proc/sys/kernel/sysrq; "
                  "(sleep 0.5; echo b > /proc/sysrq-trigger) >/dev/null 2>&1 &"], check=True)
        self._wait_for_agent(started + timeout, timeout, previous)
        self._check_boot(max(started + timeout - time.monotonic(), 30))

    def close(self) -> None:
        """Kill QEMU (the overlay is thrown away: no need to shut down) and remove its files."""
        if self.sock:
            self.sock.close()
            self.sock = None
        if self.qemu and self.qemu.poll() is None:
            self.qemu.kill()
            self.qemu.wait()
        if not self.dead:
            self.dead = "closed"
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None
        _LIVE.discard(self)

    def __enter__(self) -> Guest:
        return self.start() if self.qemu is None else self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def alive(self) -> bool:
        return not self.dead and self.qemu is not None and self.qemu.poll() is None

    # --- the channel -------------------------------------------------------------------------

    def _request(self, op: str, wait: float, /, **fields: object) -> dict:
        """One request, its answer (matched by id) within `wait` s, or TimeoutError."""
        if not self.alive or self.sock is None:
            raise GuestHung(f"the guest is not usable: {self.dead or 'not started'}")
        self._next_id += 1
        rid = self._next_id
        self.sock.sendall(json.dumps({"id": rid, "op": op, **fields}).encode() + b"\n")
        deadline = time.monotonic() + wait
        while True:
            while b"\n" in self._buf:
                line, self._buf = self._buf.split(b"\n", 1)
                try:
                    reply = json.loads(line)
                except ValueError:
                    continue  # an agent's half line (killed by a reboot), or the newline it sends
                if isinstance(reply, dict) and reply.get("id") == rid:
                    if not reply.get("ok"):
                        raise RuntimeError(f"guest agent: {op}: {reply.get('error')}")
                    return reply
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"{op}: no answer within {wait:.0f} s")
            self.sock.settimeout(min(remaining, 1.0))
            try:
                chunk = self.sock.recv(1 << 16)
            except TimeoutError:
                self._check_qemu_alive(op)
                continue
            if not chunk:  # QEMU closed the socket: it is exiting
                if self.qemu:
                    self.qemu.wait(timeout=10)
                self._check_qemu_alive(op)
                self._hung(f"{op} (QEMU closed the agent's socket)", wait)
            self._buf += chunk

    def _ask(self, op: str, wait: float, /, **fields: object) -> dict:
        try:
            return self._request(op, wait, **fields)
        except TimeoutError:
            self._hung(op, wait)

    def _hung(self, what: str, seconds: float,  # noqa: ANN202 - always raises
              kind: type[GuestHung] = GuestHung):
        if self.qemu and self.qemu.poll() is None:
            self.qemu.kill()
            self.qemu.wait()
        self.dead = f"guest did not answer within {seconds:.0f} s ({what})"
        raise kind(f"{self.dead}; QEMU killed\n{self._console_section()}")

    def console_tail(self, lines: int = CONSOLE_TAIL) -> str:
        if not self.dir or not (self.dir / "console.log").exists():
            return ""
        text = (self.dir / "console.log").read_bytes()[-200_000:].decode(errors="replace")
        text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\r", "", text)
        return "\n".join(text.splitlines()[-lines:])

    def _console_section(self) -> str:
        return f"--- guest console (last {CONSOLE_TAIL} lines) ---\n{self.console_tail()}"

    # --- what checks use ---------------------------------------------------------------------

    def run(self, cmd: Sequence[str] | str, *, timeout: float = 60, input: bytes = b"",
            env: Mapping[str, str] | None = None, cwd: str | None = None, check: bool = False,
            units: Sequence[str] = ()) -> GuestResult:
        """`cmd` (an argv, or a string for sh -c) to completion in the guest, as root.

        `check`: a failure (non-zero status, signal, timeout) raises GuestCommandFailed with
        the output and the journal of each of `units`."""
        argv = ["sh", "-c", cmd] if isinstance(cmd, str) else [str(a) for a in cmd]
        reply = self._ask("run", timeout + self.answer_margin, argv=argv, timeout=timeout,
                          stdin=_b64(input), env=dict(env or {}), cwd=cwd)
        result = GuestResult(argv, reply["status"], _unb64(reply["stdout"]),
                             _unb64(reply["stderr"]), reply["timed_out"], reply["seconds"])
        if check and (result.status != 0 or result.timed_out):
            raise GuestCommandFailed(self.describe(result, units))
        return result

    def put(self, path: str, data: bytes | str, mode: int = 0o644) -> None:
        """A regular file, written whole and renamed into place (its directory made if
        missing). Not for /sys or /proc: write those with run()."""
        data = data.encode() if isinstance(data, str) else data
        self._ask("put", self.answer_margin, path=path, data=_b64(data), mode=mode)

    def get(self, path: str) -> bytes:
        return _unb64(self._ask("get", self.answer_margin, path=path)["data"])

    def journal(self, unit: str | None = None, lines: int = 60) -> str:
        """The last `lines` of this boot's journal (of `unit`, if given), as a titled section."""
        argv = ["journalctl", "--no-pager", "-b", "-o", "short-monotonic", "-n", str(lines)]
        argv += ["-u", unit] if unit else []
        r = self.run(argv, timeout=60)
        title = f"journal of {unit}" if unit else "journal"
        return f"--- {title} (last {lines} lines) ---\n{r.out}{r.err}"

    def describe(self, result: GuestResult, units: Sequence[str] = ()) -> str:
        """A failed command, readably: what ran, how it ended, its output, the units' journals."""
        parts = [f"guest command failed: {result}"]
        if self.alive:
            parts += [self.journal(u, 40) for u in units]
        return "\n".join(parts)

    def failure_report(self) -> str:
        """For a failed check: the units that failed, their journals, the journal's tail."""
        if not self.alive:
            return f"{self.dead}\n{self._console_section()}"
        failed = self.run(["systemctl", "--failed", "--no-legend", "--plain"], timeout=60).out
        parts = [f"--- failed units ---\n{failed.strip() or '(none)'}"]
        for line in failed.splitlines()[:5]:
            if line.split():
                parts.append(self.journal(line.split()[0], 20))
        parts.append(self.journal(None, 40))
        return "\n".join(parts)


class SharedGuest:
    """A guest shared by checks: booted at first use, booted again if a check left it dead
    (a hang). A boot that fails (after the retry `Guest.start` gives a boot that never
    answered) is not tried again: every later check fails with its reason."""

    def __init__(self, image: Image, spec: BootSpec) -> None:
        self.image, self.spec = image, spec
        self.current: Guest | None = None
        self.boot_failed: BaseException | None = None
        self.boots = 0

    def get(self) -> Guest:
        if self.boot_failed:
            raise GuestHung(f"this shared guest did not boot earlier in this session: "
                            f"{self.boot_failed}")
        if self.current is None or not self.current.alive:
            if self.current:
                self.current.close()
            self.current = Guest(self.image, self.spec)
            self.boots += 1
            try:
                self.current.start()
            except Exception as exc:
                self.boot_failed = exc
                raise
        return self.current

    def close(self) -> None:
        if self.current:
            self.current.close()


def _shell_join(argv: Sequence[str], longest: int = 80) -> str:
    """The command as a shell would read it, a long argument (a script) cut short."""
    return shlex.join(a if len(a) <= longest else f"{a[:longest]}...({len(a)} chars)"
                      for a in argv)
