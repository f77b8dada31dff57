"""This commit's wheel installed for the guest by pip on the host, as files for the seed.

pip inside the guest took 26 s of emulated CPU at every boot that installs the wheel, and
the guest's Python then compiled every module at its first import (about 6 s more): the
guest checks boot several guests a session. The host's own pip installs the same wheel
into a staging root instead, laid out as the guest's pip lays it out (Debian's
/usr/local/lib/python3.X/dist-packages, scripts in /usr/local/bin for /usr/bin/python3),
and compiles it there; the seed carries the result. Only where the host's /usr/bin/python3
is the guest's minor version (bytecode is per minor version) and has pip: otherwise the
guest installs the wheel itself at its first boot, as before.

Bytecode is compiled with unchecked hashes (the seed's tar stamps every file with the time
it was packed, which would make mtime-checked bytecode stale) and with the paths the files
have in the guest, so a traceback there names the guest's files.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from .proc import dies_with_us

HOST_PYTHON = "/usr/bin/python3"
GUEST_PYTHON = (3, 11)  # Debian 12's, the image's (image.py)
COMMAND = "/usr/local/bin/backburner"  # where pip puts the command, in the guest too


def host_can_install() -> bool:
    """The host's system Python is the guest's minor version and has pip."""
    probe = ("import sys, pip; "
             f"sys.exit(0 if sys.version_info[:2] == {GUEST_PYTHON!r} else 1)")
    try:
        return subprocess.run([HOST_PYTHON, "-I", "-c", probe], capture_output=True,
                              timeout=60, cwd="/", preexec_fn=dies_with_us()).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def installed_files(wheel: Path) -> dict[str, tuple[bytes, int]]:
    """guest path -> (content, mode) of the wheel as pip installs it, bytecode included."""
    with tempfile.TemporaryDirectory(prefix="bb-vm-install-") as stage:
        _pip_module("pip", ["install", "--no-deps", "--no-index", "--no-cache-dir", "--no-compile",
              "--root", stage, "--break-system-packages", "--disable-pip-version-check",
              "--root-user-action=ignore", str(wheel)])
        _pip_module("compileall", ["-q", "-j", "0", "--invalidation-mode", "unchecked-hash",
                                   "-s", stage, "-p", "/", str(Path(stage, "usr"))])
        files = {}
        for path in sorted(Path(stage).rglob("*")):
            if path.is_file() and not path.is_symlink():
                guest = "/" + path.relative_to(stage).as_posix()
                files[guest] = (path.read_bytes(), path.stat().st_mode & 0o777)
        if COMMAND not in files:
            raise RuntimeError(f"pip installed no backburner command from {wheel.name}")
        return files



def _pip_module(module: str, args: list[str]) -> None:
    subprocess.run([HOST_PYTHON, "-I", "-m", module, *args], check=True, capture_output=True,
                   timeout=300, cwd="/", preexec_fn=dies_with_us())
