"""govern/procinfo.py: the facts of a real process, and the cgroup path helpers (exact)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import wait_for

from backburner.govern import procinfo


@pytest.mark.parametrize("path, unit", [
    ("/user.slice/user-1000.slice/user@1000.service/app.slice/app-gnome-x-12.scope",
     "app-gnome-x-12.scope"),
    ("/system.slice/apt-daily.service", "apt-daily.service"),
    ("/user.slice/user-1000.slice/session-2.scope", "session-2.scope"),
    ("/init.scope", "init.scope"),
    ("/system.slice", ""),
    ("/", ""),
    ("/backburner/govern-x", ""),
])
def test_unit_from_cgroup(path: str, unit: str) -> None:
    assert procinfo.unit_from_cgroup(path) == unit


def test_cgroup_path_prefers_v2_then_systemds_own_hierarchy() -> None:
    v2 = ("0", "", "/system.slice/x.service")
    named = ("1", "name=systemd", "/system.slice/y.service")
    blkio = ("7", "blkio", "/backburner/z")
    assert procinfo.cgroup_path([blkio, named, v2]) == "/system.slice/x.service"
    assert procinfo.cgroup_path([blkio, named, ("0", "", "/")]) == "/system.slice/y.service"
    assert procinfo.cgroup_path([("0", "", "/")]) == "/"
    assert procinfo.cgroup_path([blkio]) == ""


def test_facts_of_a_live_process(tmp_path: Path) -> None:
    link = tmp_path / "bb-facts-test"
    link.symlink_to(sys.executable)
    with subprocess.Popen([str(link), "-c", "import sys; sys.stdin.read()", "one two"],
                          stdin=subprocess.PIPE) as proc:
        try:
            # a vfork()ed child lets its parent go on before the kernel renames it
            wait_for(lambda: procinfo.ProcInfo(proc.pid).comm == "bb-facts-test",
                     what="the child's exec")
            info = procinfo.ProcInfo(proc.pid)
            assert info.comm == "bb-facts-test"  # the name it was started by
            assert info.exe == os.path.realpath(sys.executable)
            assert info.cmdline == [str(link), "-c", "import sys; sys.stdin.read()", "one two"]
            assert info.ancestors[0][0] == procinfo.ProcInfo(os.getpid()).comm
            assert info.ancestors[-1][0] == procinfo.ProcInfo(1).comm
            assert info.uid == os.geteuid() and info.user == procinfo.user_name(os.geteuid())
            assert info.cgroup.startswith("/")
            frozen = info.freeze()
            assert frozen.pid == proc.pid and frozen.comm == "bb-facts-test"
        finally:
            proc.stdin.close()  # type: ignore[union-attr]
    gone = procinfo.ProcInfo(proc.pid)
    assert (gone.comm, gone.exe, gone.cmdline, gone.uid, gone.user) == ("", "", [], -1, "")


def test_kernel_threads_are_recognised() -> None:
    assert procinfo.is_kernel_thread(2)
    assert not procinfo.is_kernel_thread(os.getpid())
