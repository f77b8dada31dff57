"""bench.probes: parsing, timing to exit / to ready / to timeout (never leaving the probe
running), and the strace-discovered chroot a probe runs in on a testbed."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from backburner.base.errors import CommandNotFound, UnavailableError, UsageError
from backburner.bench import probes

# --- parse / resolve -------------------------------------------------------------------------


def test_parse_splits_like_a_shell() -> None:
    p = probes.Probe.parse("python3 -c 'import sys; print(1)'", ready_line="READY")
    assert p.argv == ("python3", "-c", "import sys; print(1)")
    assert p.ready_line == "READY" and p.ready_file is None
    assert probes.Probe.parse(p.text).argv == p.argv


@pytest.mark.parametrize("text, kw", [
    ("'unbalanced", {}), ("", {}), ("   ", {}), ("true", {"ready_line": "(unclosed"}),
])
def test_parse_errors(text: str, kw: dict) -> None:
    with pytest.raises(UsageError) as exc:
        probes.Probe.parse(text, **kw)
    assert exc.value.exit_status == 64 and "\n" not in str(exc.value)


def test_resolve_gives_an_absolute_real_path() -> None:
    p = probes.Probe.parse("true --ignored", ready_file="/x").resolve()
    assert p.argv[0] == os.path.realpath(shutil.which("true") or "")
    assert os.path.isabs(p.argv[0]) and not os.path.islink(p.argv[0])
    assert p.argv[1:] == ("--ignored",) and p.ready_file == "/x"


@pytest.mark.parametrize("cmd", ["no-such-probe-xyz --flag", "/nonexistent/bin/probe"])
def test_resolve_of_a_missing_command(cmd: str) -> None:
    with pytest.raises(CommandNotFound) as exc:
        probes.Probe.parse(cmd).resolve()
    msg = str(exc.value)
    assert exc.value.exit_status == 127
    assert "\n" not in msg and cmd.split()[0] in msg and "not found" in msg


# --- timing ------------------------------------------------------------------------------------


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in "ZX"
    except OSError:
        return True


def test_time_probe_true_is_ok_and_fast() -> None:
    r = probes.time_probe(probes.Probe.parse("true").resolve(), timeout=10)
    assert r.status == "ok"
    assert r.outcome is not None and r.outcome.exit_code == 0 and r.outcome.signal is None
    assert 0 < r.wall_s < 0.5 and r.wall_s == r.outcome.wall_s
    assert _gone(r.outcome.pid)


def test_time_probe_failing_is_failed() -> None:
    r = probes.time_probe(probes.Probe.parse("false"), timeout=10)
    assert r.status == "failed"
    assert r.outcome is not None and r.outcome.exit_code == 1


@pytest.mark.parametrize("cmd", ["sleep 5", "sh -c 'sleep 5 & sleep 5; wait'"])
def test_time_probe_timeout_kills_the_probe(cmd: str) -> None:
    t0 = time.monotonic()
    r = probes.time_probe(probes.Probe.parse(cmd), timeout=0.3)
    elapsed = time.monotonic() - t0
    assert r.status == "timeout" and r.wall_s == 0.3
    assert 0.3 <= elapsed < 2.5
    assert r.outcome is not None and r.outcome.signal is not None
    assert _gone(r.outcome.pid)
    deadline = time.monotonic() + 2  # stragglers were SIGKILLed: give the kernel a moment
    while _group(r.outcome.pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _group(r.outcome.pid) == []


def _group(pgid: int) -> list[int]:
    """Live (non-zombie) members of a process group."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] not in "ZX" and int(fields[2]) == pgid:
                out.append(int(entry.name))
    return out


def _script(tmp_path: Path, body: str) -> str:
    path = tmp_path / "probe.sh"
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return str(path)


def test_ready_line(tmp_path: Path) -> None:
    script = _script(tmp_path, "sleep 0.1; echo starting; echo READY now; exec sleep 5")
    t0 = time.monotonic()
    r = probes.time_probe(probes.Probe.parse(script, ready_line="^READY"), timeout=10)
    assert r.status == "ok"
    assert 0.1 <= r.wall_s < 2 and time.monotonic() - t0 < 4
    assert r.outcome is not None and r.outcome.signal is not None  # terminated, not exited
    assert _gone(r.outcome.pid)


def test_ready_line_without_newline_and_split_writes(tmp_path: Path) -> None:
    script = _script(tmp_path, "printf 'RE'; sleep 0.2; printf 'ADY'; exec sleep 5")
    r = probes.time_probe(probes.Probe.parse(script, ready_line="READY"), timeout=10)
    assert r.status == "ok" and 0.2 <= r.wall_s < 2


def test_ready_line_never_printed(tmp_path: Path) -> None:
    exits = _script(tmp_path, "echo not yet")
    r = probes.time_probe(probes.Probe.parse(exits, ready_line="READY"), timeout=10)
    assert r.status == "failed" and r.detail.get("reason") == "exited before ready"
    hangs = _script(tmp_path, "echo not yet; exec sleep 5")
    t0 = time.monotonic()
    r = probes.time_probe(probes.Probe.parse(hangs, ready_line="READY"), timeout=0.4)
    assert r.status == "timeout" and r.wall_s == 0.4 and time.monotonic() - t0 < 3
    assert r.outcome is not None and _gone(r.outcome.pid)


def test_ready_file(tmp_path: Path) -> None:
    flag = tmp_path / "ready.flag"
    script = _script(tmp_path, f"sleep 0.1; touch {flag}; exec sleep 5")
    t0 = time.monotonic()
    r = probes.time_probe(probes.Probe.parse(script, ready_file=str(flag)), timeout=10)
    assert r.status == "ok" and 0.1 <= r.wall_s < 2 and time.monotonic() - t0 < 4
    assert r.outcome is not None and _gone(r.outcome.pid)


# --- the probe's files and its chroot -----------------------------------------------------


def test_exec_interpreters_of_an_elf_and_a_script(tmp_path: Path) -> None:
    (interp,) = probes.exec_interpreters("/bin/true")
    readelf = shutil.which("readelf")
    if readelf:
        out = subprocess.run([readelf, "-l", "/bin/true"], capture_output=True, text=True).stdout
        assert f"[Requesting program interpreter: {interp}]" in out
    assert "ld-linux" in interp and os.path.exists(interp)
    script = tmp_path / "s"
    script.write_text("#!/usr/bin/env python3 -I\nprint(1)\n")
    assert probes.exec_interpreters(str(script)) == ["/usr/bin/env"]
    plain = tmp_path / "plain"
    plain.write_text("just text, not a program at all\n")
    assert probes.exec_interpreters(str(plain)) == []
    assert probes.exec_interpreters(str(tmp_path / "missing")) == []


@pytest.mark.root
def test_discover_and_install_true_into_a_chroot(tmp_path: Path) -> None:
    probe = probes.Probe.parse("/bin/true").resolve()
    files = probes.discover_files(probe, str(tmp_path), timeout=30)
    assert probe.argv[0] in files
    assert any("libc.so" in f for f in files), files
    root = tmp_path / "root"
    root.mkdir()
    copied = probes.install(files, str(root))
    assert copied >= 2  # the program and at least libc
    for virtual in probes.VIRTUAL_ROOTS:
        assert (root / virtual.lstrip("/")).is_dir()
    assert stat.S_IMODE((root / "tmp").stat().st_mode) == 0o1777
    real = os.path.realpath("/bin/true")
    assert (root / real.lstrip("/")).is_file()
    run = subprocess.run(["chroot", str(root), real], capture_output=True, timeout=30)
    assert run.returncode == 0, run.stderr
    r = probes.time_probe(probe, timeout=10, chroot=str(root))
    assert r.status == "ok"
    # and nothing of the host leaked in beyond what was asked for
    assert not (root / "etc" / "passwd").exists()


@pytest.mark.root
def test_install_is_needed_for_the_chroot(tmp_path: Path) -> None:
    """The check above can fail: an empty root does not run /bin/true."""
    root = tmp_path / "empty"
    root.mkdir()
    probes.install([], str(root))
    run = subprocess.run(["chroot", str(root), os.path.realpath("/bin/true")],
                         capture_output=True, timeout=30)
    assert run.returncode != 0


def test_devices_of_groups_regular_files(tmp_path: Path) -> None:
    """Regular files by st_dev; directories, virtual roots (/proc, /tmp, ...) and missing
    paths are left out."""
    f = os.path.realpath(sys.executable)
    tmp_file = tmp_path / "f"
    tmp_file.write_text("x")
    groups = probes.devices_of([f, "/proc/self/status", str(tmp_path), "/nonexistent",
                                os.path.dirname(f), str(tmp_file)])
    if str(tmp_path).startswith("/tmp/"):
        assert groups == {os.stat(f).st_dev: [f]}
    else:
        assert groups[os.stat(f).st_dev][0] == f


@pytest.mark.parametrize("name", ["ünï.txt", os.fsdecode(b"latin1-\xe9.txt")],
                         ids=["utf8", "not-utf8"])
def test_discover_files_keeps_non_ascii_names(tmp_path: Path, name: str) -> None:
    """strace prints non-ASCII bytes as octal escapes: the paths found are the real ones."""
    target = tmp_path / "x" / name
    target.parent.mkdir()
    target.write_text("hi\n")
    probe = probes.Probe(("cat", str(target))).resolve()
    files = probes.discover_files(probe, str(tmp_path), timeout=30)
    assert str(target) in files, [f for f in files if str(tmp_path) in f]


def test_a_ready_file_left_by_an_earlier_start_is_not_taken_for_this_one(
        tmp_path: Path) -> None:
    flag = tmp_path / "ready.flag"
    script = _script(tmp_path, f"sleep 0.3; touch {flag}; exec sleep 5")
    probe = probes.Probe.parse(script, ready_file=str(flag))
    walls = [probes.time_probe(probe, timeout=10).wall_s for _ in range(2)]
    assert all(w >= 0.3 for w in walls), walls  # the second waited for its own file


@pytest.mark.root
def test_a_ready_file_reached_through_a_planted_symlink_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "tmp").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "ready").write_text("keep me")
    (root / "tmp" / "link").symlink_to(outside)
    probe = probes.Probe(("/bin/true",), ready_file="/tmp/link/ready")
    with pytest.raises(UsageError, match="leads outside the testbed"):
        probes.time_probe(probe, timeout=10, chroot=str(root))
    assert (outside / "ready").read_text() == "keep me"


@pytest.mark.root
def test_discovery_sees_every_thread_and_leaves_no_ready_file(tmp_path: Path) -> None:
    """Files opened by several threads at once are all found (strace -f into one file splits
    such calls into <unfinished>/<resumed> halves that match nothing); the ready file the
    discovery run created on the host is removed again."""
    names = [tmp_path / f"f{i}" for i in range(8)]
    for n in names:
        n.write_text("x")
    flag = tmp_path / "ready"
    code = ("import threading, time\n"
            f"names = {[str(n) for n in names]!r}\n"
            "gate = threading.Barrier(len(names))\n"
            "def read(n):\n"
            "    gate.wait(); open(n).read()\n"
            "ts = [threading.Thread(target=read, args=(n,)) for n in names]\n"
            "[t.start() for t in ts]; [t.join() for t in ts]\n"
            f"open({str(flag)!r}, 'w').close(); time.sleep(5)\n")
    script = tmp_path / "threads.py"
    script.write_text(code)
    probe = probes.Probe((sys.executable, str(script)), ready_file=str(flag)).resolve()
    (tmp_path / "work").mkdir()
    files = probes.discover_files(probe, str(tmp_path / "work"), timeout=30)
    assert {str(n) for n in names} <= set(files), sorted(set(map(str, names)) - set(files))
    assert not flag.exists()
    assert os.listdir(tmp_path / "work") == []  # no trace file left


DISCOVER_AND_DIE = r'''
import sys
from backburner.bench import probes
probe = probes.Probe(("sh", "-c", f"sleep {sys.argv[2]} & sleep {sys.argv[2]}")).resolve()
probes.discover_files(probe, sys.argv[1], timeout=60)
'''


def _with_cmdline(marker: bytes) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if marker in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0"):
                found.append(int(pid))
        except OSError:
            continue
    return found


def test_a_discovery_killed_leaves_none_of_the_probes_tree(tmp_path: Path) -> None:
    """SIGKILL to the process discovering a probe's files: strace, the probe and the
    probe's own child all end (strace alone would leave them running, detached)."""
    marker = f"{60 + os.getpid() % 1000 / 1000:.3f}"  # a sleep length nobody else uses
    proc = subprocess.Popen([sys.executable, "-c", DISCOVER_AND_DIE, str(tmp_path), marker])
    try:
        deadline = time.monotonic() + 20
        while len(_with_cmdline(marker.encode())) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)  # both sleeps running under strace
        assert len(_with_cmdline(marker.encode())) >= 2
    finally:
        proc.kill()
        proc.wait()
    deadline = time.monotonic() + 10
    while _with_cmdline(marker.encode()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _with_cmdline(marker.encode()) == []


def test_a_discovery_that_cannot_start_its_tracer_is_one_clear_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No PID namespace (a container without CAP_SYS_ADMIN): not an empty list of files,
    which would build a chroot without the probe's files, but an error saying why."""
    monkeypatch.setattr(probes, "DIES_WITH_ITS_FIRST", ["sh", "-c", "exit 1", "unshare"])
    probe = probes.Probe.parse("true").resolve()
    with pytest.raises(UnavailableError, match="could not be traced.*exited with status 1"):
        probes.discover_files(probe, str(tmp_path), timeout=30)


SCRIBBLER = '''#!/bin/sh
# what a desktop program writes for itself on a first start: a profile, a temporary
# file where TMPDIR says, a socket in /tmp whatever TMPDIR says (LibreOffice's IPC pipe)
mkdir -p "$HOME/.config/scribbler" && echo on > "$HOME/.config/scribbler/profile"
echo t > "$TMPDIR/scribbler.tmp"
python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$1"
cat {given}
touch {flag}
exec sleep 5
'''


@pytest.mark.root
def test_a_probe_on_the_host_leaves_no_profile_and_nothing_in_tmp(
        tmp_path: Path, outside_tmp: Path) -> None:
    """Discovery and a trial run on the host: the probe's profile, TMPDIR and /tmp writes
    stay in the bench's scratch; a ready file written to /tmp is still seen."""
    given = tmp_path / "given"
    given.write_text("x")
    flag = tmp_path / "ready"
    socket_path = f"/tmp/backburner-test-{os.getpid()}.pipe"
    script = tmp_path / "scribbler.sh"
    script.write_text(SCRIBBLER.format(given=given, flag=flag))
    script.chmod(0o755)
    probe = probes.Probe((str(script), socket_path), ready_file=str(flag)).resolve()
    home = Path(os.path.expanduser("~"), ".config", "scribbler")
    files = probes.discover_files(probe, str(outside_tmp), timeout=30)
    assert str(given) in files and str(script) in files
    assert not [f for f in files if "scribbler" in f and f != str(script)], files
    assert socket_path not in files and str(flag) not in files
    assert os.listdir(outside_tmp) == []  # its scratch removed with the trace
    scratch = probes.Scratch.make(str(outside_tmp), "trials")
    assert scratch.overlay
    for _ in range(2):  # the second start finds the first one's profile and socket
        result = probes.time_probe(probe, timeout=10, scratch=scratch)
        assert result.status == "ok", result
    assert Path(scratch.root, "home/.config/scribbler/profile").read_text() == "on\n"
    for left in (home, Path(socket_path), flag):
        assert not left.exists(), left
    assert not list(Path(os.environ.get("TMPDIR", "/tmp")).glob("scribbler.tmp"))


def test_a_scratch_inside_tmp_has_a_private_tmpdir_but_no_overlay(tmp_path: Path) -> None:
    """overlayfs refuses a layer inside the tree it covers: a scratch in /tmp (a state
    directory there) gives the probe a private HOME and TMPDIR only."""
    scratch = probes.Scratch.make(str(tmp_path), "s")
    assert not scratch.overlay and scratch.private_tmp is None
    env = scratch.env()
    assert env["TMPDIR"] == str(tmp_path / "s" / "tmp") and Path(env["TMPDIR"]).is_dir()
    assert env["HOME"] == str(tmp_path / "s" / "home")
    assert scratch.seen("/tmp/x") == "/tmp/x"
