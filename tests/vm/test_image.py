"""The image cache, with a small stand-in build: an entry is used only when its manifest and
every file check out, anything else is built again (never booted); a build killed halfway
leaves nothing that is taken for an image; the key covers what goes into the image."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from backburner.base.errors import UnsafePathError

from . import image
from .image import (
    IMAGE_FILES,
    MANIFEST,
    ensure_image,
    image_key,
    installed_versions,
    prune,
    verify,
)

KEY = "f" * 32


class FakeBuild:
    """Writes the image's files with known contents; counts its calls; may fail halfway."""

    def __init__(self, fail: bool = False) -> None:
        self.calls = 0
        self.fail = fail

    def __call__(self, out: Path, log: Callable[[str], None]) -> dict:
        self.calls += 1
        for i, name in enumerate(IMAGE_FILES):
            (out / name).write_bytes(bytes([i]) * (1000 + i))
            if self.fail:
                raise RuntimeError("killed halfway")
        return {"built_by": "test"}


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "cache"


def _ensure(cache: Path, build: FakeBuild, key: str = KEY) -> image.Image:
    return ensure_image(cache, build=build, key=key, log=lambda _: None)


def test_built_once_then_reused(cache: Path) -> None:
    build = FakeBuild()
    first = _ensure(cache, build)
    second = _ensure(cache, build)
    assert build.calls == 1 and first == second
    assert first.disk.read_bytes() == b"\0" * 1000
    assert first.manifest["built_by"] == "test" and first.manifest["key"] == KEY
    assert os.stat(cache).st_mode & 0o777 == 0o700
    assert [p.name for p in cache.iterdir() if p.name != ".lock"] == [KEY]


@pytest.mark.parametrize("damage", ["truncate", "flip", "remove", "manifest", "garbage",
                                    "other key"])
def test_a_damaged_entry_is_built_again(cache: Path, damage: str) -> None:
    build = FakeBuild()
    entry = _ensure(cache, build).path
    disk = entry / "disk.qcow2"
    os.chmod(disk, 0o600)
    if damage == "truncate":
        os.truncate(disk, 999)
    elif damage == "flip":  # same size, one byte changed
        disk.write_bytes(b"\1" + b"\0" * 999)
    elif damage == "remove":
        disk.unlink()
    elif damage == "manifest":
        (entry / MANIFEST).unlink()
    elif damage == "garbage":
        os.chmod(entry / MANIFEST, 0o600)
        (entry / MANIFEST).write_text('{"key": ')
    else:
        os.chmod(entry / MANIFEST, 0o600)
        manifest = json.loads((entry / MANIFEST).read_text())
        (entry / MANIFEST).write_text(json.dumps({**manifest, "key": "x" * 32}))
    assert verify(entry, KEY) is None
    again = _ensure(cache, build)
    assert build.calls == 2
    assert verify(again.path, KEY) == again


def test_a_build_that_fails_leaves_nothing(cache: Path) -> None:
    with pytest.raises(RuntimeError, match="killed halfway"):
        _ensure(cache, FakeBuild(fail=True))
    assert [p.name for p in cache.iterdir()] == [".lock"]


def test_a_build_killed_before_its_rename_is_removed_not_used(cache: Path) -> None:
    """SIGKILL during a build leaves its private .build-* directory, complete or not: the
    next session removes it and builds its own."""
    build = FakeBuild()
    _ensure(cache, build, key="a" * 32)
    leftover = cache / f".build-{KEY[:12]}-killed"
    leftover.mkdir()
    for name in IMAGE_FILES:
        (leftover / name).write_bytes(b"half")
    _ensure(cache, build)
    assert not leftover.exists() and build.calls == 2


def test_prune_keeps_the_most_recently_used(cache: Path) -> None:
    build = FakeBuild()
    for i, k in enumerate(("a" * 32, "b" * 32)):
        entry = _ensure(cache, build, key=k).path
        os.utime(entry, (1000 + i, 1000 + i))
    _ensure(cache, build, key="a" * 32)  # used now: the newest
    _ensure(cache, build, key="c" * 32)  # a third build prunes the least recently used
    assert {p.name for p in cache.iterdir()} == {".lock", "a" * 32, "c" * 32}
    (cache / "run").mkdir()  # not an image: never pruned
    assert prune(cache, keep=1) == []  # "a" was used less than IN_USE ago: another session's
    os.utime(cache / ("a" * 32), (1000, 1000))
    assert [p.name for p in prune(cache, keep=1)] == ["a" * 32]
    assert {p.name for p in cache.iterdir()} == {".lock", "c" * 32, "run"}


def test_a_cache_another_user_could_plant_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    with pytest.raises(UnsafePathError, match="writable by other users"):
        _ensure(shared / "cache", FakeBuild())
    (tmp_path / "real").mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pytest.raises(UnsafePathError, match="is a symbolic link"):
        _ensure(tmp_path / "link", FakeBuild())


def test_the_key_covers_what_goes_into_the_image(monkeypatch: pytest.MonkeyPatch) -> None:
    base = image_key()
    assert image_key() == base
    monkeypatch.setattr(image, "PACKAGES", (*image.PACKAGES, "hello"))
    assert image_key() != base
    monkeypatch.undo()
    monkeypatch.setattr(image, "MIRROR", "http://example.org/debian")
    assert image_key() != base
    monkeypatch.undo()
    inputs = image.build_inputs()
    assert "image.py" in inputs["files"]
    assert "rootfs/usr/lib/systemd/system-generators/backburner-vm-seed" in inputs["files"]
    inputs["files"]["rootfs/etc/fstab"] = "0" * 64  # a glue file changed
    assert image_key(inputs) != base


def test_the_manifest_says_which_versions_were_installed(tmp_path: Path) -> None:
    status = tmp_path / "var/lib/dpkg/status"
    status.parent.mkdir(parents=True)
    status.write_text(
        "Package: systemd\nStatus: install ok installed\nVersion: 252.39-1~deb12u1\n"
        "Description: system and service manager\n more text: with a colon\n\n"
        "Package: fio\nStatus: deinstall ok config-files\nVersion: 3.33-3\n\n"
        "Package: python3\nStatus: install ok installed\nVersion: 3.11.2-1+b1\n\n"
        "Package: libc6\nStatus: install ok installed\nVersion: 2.36-9\n")
    assert installed_versions(tmp_path) == {"python3": "3.11.2-1+b1",
                                            "systemd": "252.39-1~deb12u1"}
