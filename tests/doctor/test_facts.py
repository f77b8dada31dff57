"""doctor's reading of the machine: sysfs and mount tables made up in a temporary directory,
then the real machine, under strace, to show that nothing is written, created or removed."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import BB, TIMEOUT, bb

from backburner import cli
from backburner.doctor import checks, facts


def _queue(root: Path, name: str, text: str, device: bool = False) -> None:
    queue = root / name / "queue"
    queue.mkdir(parents=True)
    (queue / "scheduler").write_text(text + "\n")
    if device:
        (root / name / "device").mkdir()


def test_disks_and_loop_devices(tmp_path: Path) -> None:
    _queue(tmp_path, "sda", "mq-deadline kyber [bfq] none", device=True)
    _queue(tmp_path, "nvme0n1", "[none] mq-deadline", device=True)
    _queue(tmp_path, "zram0", "none")  # no hardware: not a disk
    _queue(tmp_path, "loop3", "[none] mq-deadline kyber bfq")
    disks, loops = facts.block_schedulers(str(tmp_path))
    assert disks == {"nvme0n1": ("none", "mq-deadline"),
                     "sda": ("mq-deadline", "kyber", "bfq", "none")}
    assert loops == ("none", "mq-deadline", "kyber", "bfq")  # an existing loop device's


def test_without_a_loop_device_the_registered_elevators_tell(tmp_path: Path) -> None:
    _queue(tmp_path, "vda", "[mq-deadline] none", device=True)
    _queue(tmp_path, "sdb", "bfq [none]", device=True)
    assert facts.block_schedulers(str(tmp_path))[1] == ("none", "mq-deadline", "bfq")


MOUNTINFO = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
38 31 0:35 / /sys/fs/cgroup/blkio rw,relatime - cgroup cgroup rw,blkio
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / {v2} rw,relatime - cgroup2 cgroup2 rw
"""


def test_cgroups_v1_and_a_cgroup2_mount(tmp_path: Path) -> None:
    v2 = tmp_path / "unified"
    v2.mkdir()
    (v2 / "cgroup.controllers").write_text("cpu io memory\n")
    (v2 / "cgroup.subtree_control").write_text("io\n")
    info = tmp_path / "mountinfo"
    info.write_text(MOUNTINFO.format(v2=v2))
    cg = facts.cgroups(str(info))
    assert cg == facts.Cgroups(("blkio", "cpu", "freezer"), str(v2), ("cpu", "io", "memory"),
                               ("io",))


def test_free_space_of_a_directory_not_made_yet(tmp_path: Path) -> None:
    missing = tmp_path / "state" / "work"
    assert facts.free_bytes(str(missing)) == facts.free_bytes(str(tmp_path)) > 0
    assert not (tmp_path / "state").exists()


def test_perf_not_installed() -> None:
    assert facts.perf_trace(None) == "perf is not installed"


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("perf") is None,
                    reason="perf trace as root")
def test_doctor_finds_perf_where_trace_uses_it() -> None:
    """`trace engines` names perf the default here: doctor must not call it missing (it
    used to try the CPU's instructions counter, which a VM without a PMU lacks and nothing
    of backburner uses)."""
    from backburner.trace import engines

    assert engines.default_name() == "perf"
    assert facts.perf_trace(shutil.which("perf")) is None
    assert checks.perf(facts.read()).ok


def test_an_unreachable_database_says_why() -> None:
    why = facts.database("postgresql://bench@/lab?host=/nonexistent-socket-dir&port=1")
    assert why is not None and "unreachable" in why


def test_this_machine() -> None:
    found = facts.read()
    assert found.euid == os.geteuid() and found.kernel.startswith("Linux ")
    assert found.tools["fio"] == shutil.which("fio")
    assert found.modules["numpy"] and found.db is None


# --- the command -----------------------------------------------------------------------------


def test_doctor_on_the_test_machine_can_run_the_main_job() -> None:
    """CI's machine is set up by scripts/setup --test, as root: the main job runs there."""
    r = bb("doctor")
    assert r.returncode == 0, r.out
    assert r.out.splitlines()[-1] == "The main job can run here: backburner bench --preset quick"
    assert r.err == ""
    doc = json.loads(bb("doctor", "--json").out)
    assert doc["main_job"]["can_run"]
    # the same document both ways, but for the free space, which other work changes between
    # the two runs ("57 GiB free" then "57.1 GiB free", seen beside the suite's workers)
    assert _steady(doc) == _steady(json.loads(bb("doctor", "--format", "json").out))


def _steady(doc: dict) -> str:
    return re.sub(r"[0-9.]+ ([KMGT]i?B) free", r"N \1 free", json.dumps(doc, sort_keys=True))


def test_not_root_is_69_with_root_missing(monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(facts.os, "geteuid", lambda: 1000)
    assert cli.main(["doctor", "--json"]) == 69
    doc = json.loads(capsys.readouterr().out)
    assert doc["main_job"]["missing"] == ["root"]


def test_a_database_in_the_environment_is_tried(tmp_path: Path) -> None:
    url = "postgresql://bench@/lab?host=/nonexistent-socket-dir&port=1"
    r = bb("doctor", env={**os.environ, "BACKBURNER_DB": url})
    assert r.returncode == 69
    assert re.search(r"^  missing  PostgreSQL +\$BACKBURNER_DB: .*unreachable", r.out, re.M)
    r = bb("doctor", "--db", url)  # asked about, not where bench writes: not needed
    assert r.returncode == 0 and re.search(r"^  missing  PostgreSQL +--db: ", r.out, re.M)


#: system calls that change files (a successful open for writing is filtered below)
CHANGING = ("creat,mkdir,mkdirat,rename,renameat,renameat2,unlink,unlinkat,rmdir,truncate,"
            "chmod,fchmodat,chown,fchownat,link,linkat,symlink,symlinkat,mount,umount2,"
            "open,openat")


def _changes(argv: list[str], tmp_path: Path) -> list[str]:
    """The file-changing system calls `argv` made that succeeded (strace -f)."""
    trace = tmp_path / "trace"
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1",
           "BACKBURNER_STATE_DIR": str(tmp_path / "state")}
    done = subprocess.run(["strace", "-f", "-qq", "-o", str(trace), "-e", f"trace={CHANGING}",
                           *argv], capture_output=True, text=True, env=env,
                          timeout=TIMEOUT * 2, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    changes = []
    for line in trace.read_text().splitlines():
        if " = -1 " in line or "---" in line or "+++" in line or "resumed>" in line:
            continue  # refused calls change nothing; signals and exits are not calls
        call = line.split(None, 1)[1]
        if call.startswith(("open(", "openat(")) and (
                not re.search(r"O_WRONLY|O_RDWR|O_CREAT|O_TRUNC", call)
                or '"/dev/null"' in call):  # a helper's stdin
            continue
        changes.append(call)
    return changes


@pytest.mark.root
def test_it_changes_nothing(tmp_path: Path) -> None:
    """Under strace: no file opened for writing but /dev/null, nothing created, renamed,
    removed, mounted or chmod'ed; no state directory, so no journal."""
    assert _changes([*BB, "doctor"], tmp_path) == []
    assert not (tmp_path / "state").exists()


@pytest.mark.root
def test_the_trace_sees_a_change(tmp_path: Path) -> None:
    made = _changes([sys.executable, "-c", "import os; open('f', 'w').close(); os.mkdir('d')"],
                    tmp_path)
    assert len(made) == 2 and made[0].startswith("openat(") and made[1].startswith("mkdir(")
