"""The kernel-filtered exec watch: its filter text, the tracepoint's layout, and on the
real kernel that matching execs arrive (absolute, relative, names cut at 15 bytes) while
others never wake the watcher, leaving tracefs as it was."""

from __future__ import annotations

import os
import select
import shutil
import subprocess
from pathlib import Path

import pytest

from backburner.govern import execwatch
from backburner.system import tracefs_mount

FORMAT = """name: sched_process_exec
ID: 312
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:__data_loc char[] filename;\toffset:8;\tsize:4;\tsigned:0;
\tfield:pid_t pid;\toffset:12;\tsize:4;\tsigned:1;
\tfield:pid_t old_pid;\toffset:16;\tsize:4;\tsigned:1;
"""


def test_the_filter_matches_names_as_the_kernel_cuts_them() -> None:
    assert execwatch.name_filter([b"dpkg", b"apt"]) == 'filename ~ "*apt" || filename ~ "*dpkg"'
    assert execwatch.name_filter([b"unattended-upgr"]) == (  # 15 bytes: the name was cut
        'filename ~ "*unattended-upgr*"')


def test_a_filter_longer_than_the_kernel_takes_means_no_watch() -> None:
    names = [f"prog{i:04d}".encode() for i in range(300)]
    assert execwatch.name_filter(names[:100]) is not None
    assert execwatch.name_filter(names) is None


@pytest.mark.parametrize("name", [b"a*b", b"a?", b"[x]", b'q"', b"back\\slash", b"",
                                  b"t\nx", "é".encode()])
def test_a_name_the_filter_cannot_express_means_no_watch(name: bytes) -> None:
    assert execwatch.name_filter([b"apt", name]) is None
    assert execwatch.open_watch([b"apt", name]) is None


def test_the_layout_comes_from_the_format_file() -> None:
    assert execwatch.parse_format(FORMAT) == execwatch.Layout(filename_at=8, pid_at=12)
    with pytest.raises(ValueError):
        execwatch.parse_format(FORMAT.replace("filename", "file"))


@pytest.mark.root
def test_matching_execs_arrive_and_others_never_wake_it(tmp_path: Path) -> None:
    before = tracefs_mount()
    short, long = tmp_path / "zqmatch", tmp_path / "zqlongname123456789"
    for path in (short, long):
        shutil.copy("/bin/true", path)
    watch = execwatch.open_watch([b"zqmatch", b"zqlongname12345"])
    assert watch is not None
    try:
        assert tracefs_mount() == before  # mounted only to read the tracepoint, if at all
        poller = select.poll()
        for fd in watch.fds:
            poller.register(fd, select.POLLIN)
        for _ in range(50):
            subprocess.run(["true"], check=True)
        assert poller.poll(200) == [] and watch.read() == []
        pids = [subprocess.Popen([str(short)]), subprocess.Popen([str(long)]),
                subprocess.Popen(["./zqmatch"], cwd=tmp_path)]
        for p in pids:
            p.wait()
        assert poller.poll(5000)
        got = sorted(watch.read())
        assert got == sorted([(pids[0].pid, os.fsencode(short)), (pids[1].pid, os.fsencode(long)),
                              (pids[2].pid, b"./zqmatch")])
        assert watch.lost == 0
    finally:
        watch.close()
