"""trace.lookups: strace's hex output (-xx -y -ttt -f) read back into what a start
looked up, stat'd, listed and missed, with paths as the host sees them through chroot,
working directories and descriptors; and the real strace on a real command."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from backburner.trace import lookups
from backburner.trace.lookups import LIST, MISS, OPEN, STAT


def h(path: str | bytes) -> str:
    """A string as strace -xx prints it."""
    data = path.encode() if isinstance(path, str) else path
    return "".join(f"\\x{b:02x}" for b in data)


NEWLINE = b"new\nline"
LINES = [
    f'100 1.000001 execve("{h("/usr/sbin/chroot")}", ["{h("chroot")}"], 0x7f /* 3 vars */) = 0',
    f'100 1.000002 chroot("{h("img")}") = 0',
    f'100 1.000003 chdir("{h("/")}") = 0',
    f'100 1.000004 access("{h("/etc/ld.so.preload")}", R_OK) = -1 ENOENT (No such file or '
    'directory)',
    f'100 1.000005 openat(AT_FDCWD<{h("/w/img")}>, "{h("/lib/libc.so.6")}", O_RDONLY) = '
    f'3<{h("/w/img/lib/libc.so.6")}>',
    f'100 1.000006 newfstatat(3<{h("/w/img/lib/libc.so.6")}>, "", {{st_mode=S_IFREG}}, '
    'AT_EMPTY_PATH) = 0',
    f'100 1.000007 openat(AT_FDCWD<{h("/w/img")}>, "{h("data")}", O_RDONLY|O_DIRECTORY) = '
    f'4<{h("/w/img/data")}>',
    f'100 1.000008 getdents64(4<{h("/w/img/data")}>, 0x55 /* 3 entries */, 32768) = 80',
    f'100 1.000009 newfstatat(4<{h("/w/img/data")}>, "{h(NEWLINE)}", {{st_mode=S_IFREG}}, '
    'AT_SYMLINK_NOFOLLOW) = 0',
    '100 1.000010 clone(child_stack=NULL, flags=CLONE_CHILD_SETTID|SIGCHLD <unfinished ...>',
    '100 1.000012 <... clone resumed>, child_tidptr=0x7f) = 101',
    f'101 1.000013 statx(AT_FDCWD<{h("/w/img")}>, "{h("/opt/missing/x")}", 0, STATX_ALL, '
    '0x7f) = -1 ENOENT (No such file or directory)',
    f'101 1.000014 openat(AT_FDCWD<{h("/w/img")}>, "{h("/etc/shadow")}", O_RDONLY) = -1 '
    'EACCES (Permission denied)',
    f'101 1.000015 readlink("{h("/lib64")}", "{h("usr/lib64")}", 4095) = 9',
]


def test_calls_in_order_with_host_paths_through_the_chroot() -> None:
    got = lookups.parse(LINES, cwd=b"/w")
    assert got.first_pid == 100
    assert [(c.pid, c.kind, c.path) for c in got.calls] == [
        (100, OPEN, b"/usr/sbin/chroot"),  # before the chroot: the host's own
        (100, MISS, b"/w/img/etc/ld.so.preload"),  # chroot("img") from /w, then chdir /
        (100, OPEN, b"/w/img/lib/libc.so.6"),
        (100, OPEN, b"/w/img/data"),
        (100, LIST, b"/w/img/data"),
        (100, STAT, b"/w/img/data/new\nline"),  # relative to a descriptor; any byte
        (101, MISS, b"/w/img/opt/missing/x"),  # the child keeps its parent's root
        (101, STAT, b"/w/img/etc/shadow"),  # refused: its inode was looked at
        (101, STAT, b"/w/img/lib64"),
    ]
    assert [c.t for c in got.calls] == sorted(c.t for c in got.calls)


def test_nothing_but_strace_lines_counts() -> None:
    assert lookups.parse(["", "garbage", "+++ exited with 0 +++"]).calls == []


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")
def test_the_real_strace(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d/a").write_text("x")
    (tmp_path / "d/b c").write_text("y")
    out = tmp_path / "s.out"
    argv = lookups.command(["sh", "-c", "ls d > /dev/null; cat 'd/b c' > /dev/null; "
                            "test -e d/nope; stat -c %s d/a > /dev/null"], str(out))
    subprocess.run(argv, cwd=tmp_path, check=True)
    got = lookups.parse(out.read_text().splitlines(), os.fsencode(tmp_path))
    base = os.fsencode(tmp_path)
    kinds = {(c.kind, c.path) for c in got.calls}
    assert (LIST, base + b"/d") in kinds
    assert (OPEN, base + b"/d/b c") in kinds
    assert (MISS, base + b"/d/nope") in kinds
    assert (STAT, base + b"/d/a") in kinds
    assert got.first_pid is not None
