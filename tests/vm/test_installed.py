"""The wheel installed for the guest on the host: laid out where the guest's Python finds it,
the command for the guest's interpreter, bytecode that names the guest's paths and is used
whatever time stamps the seed gives the files, and the seed marking the install done (so
the guest does not install it again). That the guest then runs exactly this commit's
package is test_guest_system's check."""

from __future__ import annotations

import io
import marshal
import tarfile
from pathlib import Path

import pytest
from helpers import build_wheel

from .installed import host_can_install, installed_files
from .rig import WHEEL_DONE, BootSpec, seed_tar

ROOT = Path(__file__).parents[2]
SITE = "/usr/local/lib/python3.11/dist-packages"

pytestmark = pytest.mark.skipif(not host_can_install(),
                                reason="the host's /usr/bin/python3 is not 3.11 with pip: "
                                       "the guest installs the wheel itself")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel(ROOT, tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="module")
def files(wheel: Path) -> dict[str, tuple[bytes, int]]:
    return installed_files(wheel)


def test_the_package_and_command_are_where_the_guests_python_looks(
        files: dict[str, tuple[bytes, int]]) -> None:
    sources = {p.removeprefix(f"{SITE}/") for p in files
               if p.startswith(f"{SITE}/backburner/") and p.endswith(".py")}
    shipped = {p.relative_to(ROOT / "src").as_posix()
               for p in (ROOT / "src" / "backburner").rglob("*.py")}
    assert sources == shipped
    command, mode = files["/usr/local/bin/backburner"]
    assert command.startswith(b"#!/usr/bin/python3\n") and mode & 0o111
    assert any(p.startswith(f"{SITE}/backburner-") and p.endswith(".dist-info/RECORD")
               for p in files)


def test_bytecode_names_the_guests_files_and_ignores_time_stamps(
        files: dict[str, tuple[bytes, int]]) -> None:
    source = f"{SITE}/backburner/cli/__init__.py"
    data, _ = files[f"{SITE}/backburner/cli/__pycache__/__init__.cpython-311.pyc"]
    flags = int.from_bytes(data[4:8], "little")
    assert flags == 0b01  # hash-based, not checked against the source (PEP 552)
    assert marshal.loads(data[16:]).co_filename == source


def test_the_seed_carries_the_install_marked_done_not_the_wheel(wheel: Path) -> None:
    with tarfile.open(fileobj=io.BytesIO(seed_tar(BootSpec(wheel=wheel)))) as tar:
        names = set(tar.getnames())
    assert WHEEL_DONE.lstrip("/") in names
    assert f"{SITE.lstrip('/')}/backburner/__init__.py" in names
    assert not any(n.endswith(".whl") for n in names)
