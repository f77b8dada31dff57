"""Inputs are regular files read with a bound; outputs replace only regular files."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from backburner.base.errors import DataError, ExistsError, NotFoundError
from backburner.files import infile, outfile


def test_a_regular_file_is_read_whole(tmp_path: Path) -> None:
    f = tmp_path / "pack"
    f.write_bytes(b"x" * 5000)
    assert infile.read(f, "pack", 5000) == b"x" * 5000


def test_one_byte_over_the_bound_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "pack"
    f.write_bytes(b"x" * 5001)
    with pytest.raises(DataError, match="larger than any pack"):
        infile.read(f, "pack", 5000)


def test_a_fifo_is_refused_at_once_not_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    done: list[BaseException] = []

    def attempt() -> None:
        try:
            infile.read(fifo, "trace file", 1 << 20)
        except BaseException as err:  # noqa: BLE001 - handed to the test thread
            done.append(err)

    t = threading.Thread(target=attempt, daemon=True)
    t.start()
    t.join(5)
    assert done, "reading a FIFO blocked"
    assert isinstance(done[0], DataError) and "is a FIFO, not a trace file" in str(done[0])


@pytest.mark.parametrize("path,kind", [("/dev/zero", "a character device"),
                                       ("/", "a directory")])
def test_special_files_are_named_for_what_they_are(path: str, kind: str) -> None:
    with pytest.raises(DataError, match=f"{path} is {kind}, not a map file"):
        infile.read(path, "map file", 1 << 20)


def test_a_missing_file_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match="no such pack"):
        infile.read(tmp_path / "nope", "pack", 10)


def test_text_that_is_not_utf8_is_not_a_file_of_the_kind(tmp_path: Path) -> None:
    f = tmp_path / "t"
    f.write_bytes(b"\xff\xfe")
    with pytest.raises(DataError, match="not UTF-8"):
        infile.read_text(f, "trace file", 10)


def test_check_follows_the_users_own_symlink_to_a_regular_file(tmp_path: Path) -> None:
    (tmp_path / "real").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert infile.check(tmp_path / "link", "database").st_size == 1
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(DataError, match="FIFO"):
        infile.check(tmp_path / "fifo", "database")


@pytest.mark.root
def test_an_output_that_is_a_device_node_stays_a_device(tmp_path: Path) -> None:
    null = os.stat("/dev/null")
    dev = tmp_path / "null"
    os.mknod(dev, stat.S_IFCHR | 0o666, null.st_rdev)
    with pytest.raises(ExistsError, match="is a character device: output goes to regular"):
        outfile.write_bytes(str(dev), b"data")
    st = os.lstat(dev)
    assert stat.S_ISCHR(st.st_mode) and st.st_rdev == null.st_rdev
    assert [p.name for p in tmp_path.iterdir()] == ["null"]  # no temporary file left


def test_outputs_refuse_fifos_sockets_and_directories(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "dir").mkdir()
    for name, kind in (("fifo", "a FIFO"), ("dir", "a directory")):
        with pytest.raises(ExistsError, match=f"is {kind}"), \
                outfile.replaced(str(tmp_path / name)) as f:
            f.write("never")
    assert stat.S_ISFIFO(os.lstat(tmp_path / "fifo").st_mode)


def test_private_outputs_are_0600_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        outfile.write_bytes(str(tmp_path / "p"), b"x", outfile.PRIVATE)
        outfile.write_bytes(str(tmp_path / "r"), b"x")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "p").st_mode) == 0o600
    assert stat.S_IMODE(os.stat(tmp_path / "r").st_mode) == 0o644


def test_a_regular_output_is_replaced(tmp_path: Path) -> None:
    f = tmp_path / "r"
    f.write_text("old")
    outfile.write_bytes(str(f), b"new")
    assert f.read_bytes() == b"new"


def test_the_rename_is_synced_after_the_file(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A power cut right after a write must find the new file: its bytes are synced, then
    the directory that names it (the boot pack written at shutdown is the case)."""
    synced: list[tuple[bool, bool]] = []  # (a directory?, the new name there yet?)
    real = os.fsync

    def fsync(fd: int) -> None:
        synced.append((stat.S_ISDIR(os.fstat(fd).st_mode), (tmp_path / "out").exists()))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    outfile.write_bytes(str(tmp_path / "out"), b"new")
    assert synced == [(False, False), (True, True)]


def test_a_directory_that_cannot_be_synced_does_not_fail_the_write(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The file is written by the time the directory is synced: a directory that cannot be
    opened (write-only, for another user) leaves it written, not reported failed."""
    real_open = os.open

    def no_dirs(path, flags, *a, **kw):  # noqa: ANN001, ANN002, ANN003, ANN202
        if flags & os.O_DIRECTORY:
            raise PermissionError(13, "Permission denied")
        return real_open(path, flags, *a, **kw)

    monkeypatch.setattr(os, "open", no_dirs)
    outfile.write_bytes(str(tmp_path / "out"), b"new")
    assert (tmp_path / "out").read_bytes() == b"new"
