"""bench.packages: the generated app's shape, and builds with Debian's real dpkg-deb and
flatpak, cached under the state directory, a failed build leaving nothing behind."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from backburner import spawn
from backburner.base.errors import SystemStateError, UsageError
from backburner.bench import packages
from backburner.bench.packages import Shape

TINY = Shape(200, 2 << 20)


def test_the_shape_of_a_desktop_app() -> None:
    shape = Shape()
    files = packages.files_of(shape)
    assert len(files) == shape.files == 3000
    assert sum(size for _, size in files) == pytest.approx(shape.size, rel=0.001)
    large = [size for rel, size in files if rel.endswith(".so.1")]
    assert len(large) == 4 and sum(large) == shape.size // 2  # some large shared objects
    small = sorted(size for rel, size in files if not rel.endswith(".so.1"))
    assert small[len(small) // 2] < 32 << 10  # mostly small files
    assert len({rel for rel, _ in files}) == len(files)
    assert files == packages.files_of(shape)  # the same every time: cacheable


@pytest.mark.parametrize("text, files, size", [
    ("dpkg-loop", None, None), ("flatpak-api:300:4m", "300", "4m")])
def test_shape_parse(text: str, files: str | None, size: str | None) -> None:
    shape = Shape.parse(text, files, size)
    assert shape == (Shape() if files is None else Shape(300, 4 << 20))


@pytest.mark.parametrize("files, size, message", [
    ("5", "1m", "5 files out of range"), ("200", "100k", "out of range"),
    ("200", "lots", "does not parse"), ("200", "9g", "out of range")])
def test_shape_parse_refuses(files: str, size: str, message: str) -> None:
    with pytest.raises(UsageError, match=message) as exc:
        Shape.parse("dpkg-loop:x", files, size)
    assert "\n" not in str(exc.value) and exc.value.exit_status == 64


def test_layout_writes_exactly_the_files(tmp_path: Path) -> None:
    packages.layout(str(tmp_path), TINY)
    found = {str(p.relative_to(tmp_path)): p.stat().st_size
             for p in tmp_path.rglob("*") if p.is_file()}
    assert found == dict(packages.files_of(TINY))


@pytest.mark.root
def test_a_deb_is_built_once_and_taken_from_the_cache(state_dir: Path) -> None:
    path = packages.build("deb", TINY)
    deb = path / "app.deb"
    assert path.parent == state_dir / "cache" / "packages"
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    listed = spawn.run_tool(["dpkg-deb", "--contents", str(deb)])
    assert listed.status == 0
    payload = [ln for ln in listed.stdout.splitlines() if not ln.startswith("d")]
    assert len(payload) == TINY.files and all(" root/root " in ln for ln in payload)
    info = spawn.run_tool(["dpkg-deb", "--field", str(deb), "Package"]).stdout.strip()
    assert info == packages.DEB_PACKAGE
    inode = deb.stat().st_ino
    assert packages.build("deb", TINY) == path and deb.stat().st_ino == inode  # cached
    assert not list(path.parent.glob(".build-*"))  # the scratch directory is gone


@pytest.mark.root
def test_a_flatpak_runtime_and_app_are_exported_and_bundled(state_dir: Path) -> None:
    path = packages.build("flatpak", TINY)
    assert {p.name for p in path.iterdir()} == {"repo", "app.flatpak", "runtime.flatpak"}
    refs = spawn.run_tool(["ostree", f"--repo={path / 'repo'}", "refs"]).stdout.split()
    assert sorted(refs) == sorted([packages.app_ref(), packages.runtime_ref()])
    assert (path / "app.flatpak").stat().st_size > TINY.size // 4
    assert not list(path.parent.glob(".build-*"))


@pytest.mark.root
def test_a_failed_build_says_why_and_caches_nothing(state_dir: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """dpkg-deb fails (here: a real program that exits 2 with an error): the bench gets
    one line with its last words; no cache entry, no scratch directory left."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "dpkg-deb"
    fake.write_text("#!/bin/sh\necho 'dpkg-deb: error: no space left on device' >&2\nexit 2\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    with pytest.raises(SystemStateError, match="building the .deb failed .*no space left") as e:
        packages.build("deb", TINY)
    assert "\n" not in str(e.value)
    cache = state_dir / "cache" / "packages"
    assert list(cache.iterdir()) == []
    assert packages.cached("deb", TINY) is None
