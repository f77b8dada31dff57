"""Bad input to readahead and layout: one line, no traceback, the documented status, for
every command that reads a pack (truncated, newer, not a pack: 65; missing: 66), and the
usage errors of each."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from helpers import bb, one_line_error

from backburner.readahead import packfile
from backburner.readahead.pack import Entry, FileState, Pack, encode


@pytest.fixture
def packs(tmp_path: Path) -> dict[str, Path]:
    good = encode(Pack((Entry(b"/nonexistent/file", FileState(1, 0, 2, 3, 4),
                              ((0, 4096),)),)))
    newer = bytearray(good)
    struct.pack_into("<H", newer, 8, 99)
    out = {}
    for name, data in (("truncated", good[:-3]), ("newer", bytes(newer)),
                       ("not-a-pack", b"#!/bin/sh\nexit 0\n"), ("empty", b"")):
        out[name] = tmp_path / name
        out[name].write_bytes(data)
    out["directory"] = tmp_path
    return out


COMMANDS = [
    ["readahead", "show", "{}"],
    ["readahead", "replay", "--wait", "{}"],
    ["readahead", "replay", "{}"],  # refused before anything runs in the background
    ["layout", "order", "{}", "--emit", "list"],
    ["layout", "check", "/", "--pack", "{}"],
    ["layout", "build-ext4", "--pack", "{}", "/nonexistent-src", "/nonexistent-dir/x.img"],
]


@pytest.mark.parametrize("kind", ["truncated", "newer", "not-a-pack", "empty", "directory"])
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_a_bad_pack_is_one_line_and_65(packs: dict[str, Path], kind: str,
                                       command: list[str]) -> None:
    res = bb(*(a.replace("{}", str(packs[kind])) for a in command))
    assert res.returncode == 65, res.err
    line = one_line_error(res)
    expected = {"truncated": "truncated", "newer": "newer", "not-a-pack": "not a backburner",
                "empty": "not a backburner", "directory": "directory"}[kind]
    assert expected in line
    if kind == "truncated":  # torn (a power cut): say how to recover
        assert "record it again" in line, line


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_a_missing_pack_is_66(tmp_path: Path, command: list[str]) -> None:
    res = bb(*(a.replace("{}", str(tmp_path / "none.pack")) for a in command))
    assert res.returncode == 66
    assert "no such pack" in one_line_error(res)


def test_usage_errors(tmp_path: Path) -> None:
    pp = tmp_path / "p.pack"
    packfile.save(pp, Pack(()))
    for args in (["readahead", "replay", "--wait", "--deadline", "0", str(pp)],
                 ["readahead", "replay", "--wait", "--deadline", "nan", str(pp)],
                 ["readahead", "replay", "--wait", "--budget", "lots", str(pp)],
                 ["readahead", "replay", "--wait", "--io", "fast", str(pp)],
                 ["readahead", "replay", "--wait", "--order", "random", str(pp)],
                 ["layout", "order", str(pp), "--emit", "tar"],
                 ["layout", "build-ext4", "--pack", str(pp), str(tmp_path), "x.img",
                  "--size", "1K"],
                 ["readahead", "record", "-o", str(pp), "--read-ahead-kb", "-1", "--", "true"]):
        res = bb(*args)
        assert res.returncode == 64, (args, res.err)
        one_line_error(res)


def test_an_empty_pack_replays_and_shows(tmp_path: Path) -> None:
    pp = tmp_path / "p.pack"
    packfile.save(pp, Pack(()))
    res = bb("readahead", "replay", "--wait", str(pp))
    assert res.returncode == 0 and res.out.startswith("replayed 0 files"), res.err
    res = bb("readahead", "show", str(pp))
    assert res.returncode == 0 and "files     0" in res.out, res.err


@pytest.mark.root
def test_record_replaces_a_pack_only_with_force(tmp_path: Path, state_dir: Path) -> None:
    """-o never replaces an existing file unless --force, checked before recording."""
    old = tmp_path / "boot.pack"
    old.write_bytes(b"precious")
    res = bb("readahead", "record", "-o", str(old), "--mount", str(tmp_path), "--", "true")
    assert res.returncode == 73 and "add --force to replace it" in one_line_error(res)
    assert old.read_bytes() == b"precious"
    res = bb("readahead", "record", "-o", str(old), "--mount", str(tmp_path), "--force", "--",
             "true")
    assert res.returncode == 0, res.err
    assert any(e.path.endswith(b"/true") for e in packfile.load(old).entries)  # a new pack


def test_layout_order_replaces_only_with_force(tmp_path: Path) -> None:
    pp = tmp_path / "p.pack"
    packfile.save(pp, Pack((Entry(b"/x/y", FileState(1, 0, 2, 3, 4)),)))
    out = tmp_path / "sort.txt"
    out.write_text("old")
    res = bb("layout", "order", str(pp), "--emit", "list", "--root", "/x", "-o", str(out))
    assert res.returncode == 73 and "add --force" in one_line_error(res)
    assert out.read_text() == "old"
    res = bb("layout", "order", str(pp), "--emit", "list", "--root", "/x", "-o", str(out),
             "--force")
    assert res.returncode == 0, res.err
    shown = bb("layout", "order", str(pp), "--emit", "list", "--root", "/x")
    assert out.read_bytes() == shown.stdout and shown.stdout
    assert out.stat().st_mode & 0o777 == 0o600  # it names a pack's files: private


def test_layout_check_and_build_name_missing_inputs(tmp_path: Path, state_dir: Path) -> None:
    pp = tmp_path / "p.pack"
    packfile.save(pp, Pack((Entry(b"/x/y", FileState(1, 0, 2, 3, 4)),)))
    res = bb("layout", "check", str(tmp_path / "no.img"), "--pack", str(pp))
    assert res.returncode == 66 and "no such image" in one_line_error(res)
    res = bb("layout", "order", str(pp), "--emit", "list", "-o", str(pp))
    assert res.returncode == 73  # -o never overwrites
    one_line_error(res)
