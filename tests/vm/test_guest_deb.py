"""The Debian package on a systemd machine: the .deb built here from this checkout
(tests/test_debian.py checks its contents) installs with apt on a fresh guest that has no
backburner (no wheel), and then its command runs, its man page and completion are where
the system looks, its units are known to systemd, verify, run the installed command, are
not enabled, and the daemon starts from its unit; removing the package stops the daemon,
and purging leaves no file of ours behind."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import build_deb

import backburner

from .rig import Guest

pytestmark = [pytest.mark.root, pytest.mark.timeout(900)]

ROOT = Path(__file__).parents[2]
UNITS = sorted(p.name for p in (ROOT / "systemd").glob("*.service"))
GOVERN = "backburner-govern.service"
# Every file whose name says backburner, on the root file system.
OURS = "find / -xdev \\( -path /proc -o -path /sys \\) -prune -o -name '*backburner*' -print"


@pytest.fixture(scope="module")
def deb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_deb(ROOT, tmp_path_factory.mktemp("deb"))


def _exec_path(guest: Guest, unit: str, prop: str) -> str:
    shown = guest.run(["systemctl", "show", "-P", prop, unit], check=True).out
    found = re.search(r"path=(\S+)", shown)
    assert found, shown
    return found.group(1)


def test_the_deb_installs_runs_and_purges_without_a_trace(
        make_guest: Callable[..., Guest], deb: Path) -> None:
    where = f"/root/{deb.name}"
    g = make_guest(wheel=None, files={where: deb.read_bytes()})
    # a guest without backburner: what runs below is the package's
    assert g.run(["sh", "-c", "command -v backburner"]).status != 0
    assert g.run(["python3", "-c", "import backburner"]).status != 0
    # the image keeps man pages and docs out (dpkg path-exclude); a user's system does not
    g.run(["rm", "/etc/dpkg/dpkg.cfg.d/backburner-vm"], check=True)
    before = set(g.run(["sh", "-c", OURS], check=True).out.split())

    # offline: every dependency is in the image (tests/vm/image.py); Recommends skipped
    g.run(["apt-get", "install", "-y", "-q", "--no-install-recommends", f"./{deb.name}"],
          cwd="/root", env={"DEBIAN_FRONTEND": "noninteractive",
                            "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
          timeout=300, check=True)
    assert g.run(["dpkg-query", "-W", "-f=${Status}", "backburner"]).out == \
        "install ok installed"
    assert g.run(["sh", "-c", "command -v backburner"]).out.strip() == "/usr/bin/backburner"
    assert g.run(["backburner", "--version"], check=True).out.strip() == \
        f"backburner {backburner.__version__}"
    assert g.run(["python3", "-c", "import backburner; print(backburner.__file__)"],
                 check=True).out.startswith("/usr/lib/python3/dist-packages/backburner/")
    page = g.run(["sh", "-c", "zcat /usr/share/man/man1/backburner.1.gz | head -1"],
                 check=True).out
    assert page.startswith(".TH BACKBURNER \"1\""), page
    loaded = g.run(["bash", "--norc", "-c",
                    "source /usr/share/bash-completion/completions/backburner && "
                    "complete -p backburner && COMP_WORDS=(backburner gov) COMP_CWORD=1 && "
                    "_shtab_backburner backburner gov backburner && echo \"${COMPREPLY[*]}\""],
                   check=True).out.splitlines()
    assert loaded == ["complete -o bashdefault -F _shtab_backburner backburner", "govern"]

    # the units: known to systemd, none enabled or started, each running the installed
    # command, accepted by systemd-analyze verify
    shown = g.run(["systemctl", "cat", GOVERN], check=True).out
    assert "ExecStart=/usr/bin/backburner govern run" in shown
    paths = []
    for unit in UNITS:
        assert g.run(["systemctl", "is-enabled", unit]).out.strip() == "disabled", unit
        assert g.run(["systemctl", "is-active", unit]).out.strip() == "inactive", unit
        paths.append(g.run(["systemctl", "show", "-P", "FragmentPath", unit]).out.strip())
        assert _exec_path(g, unit, "ExecStart") == "/usr/bin/backburner", unit
    verified = g.run(["systemd-analyze", "verify", "--man=no", *paths], timeout=120)
    assert verified.status == 0 and verified.out + verified.err == "", verified

    # the daemon from its unit (Type=notify: active once it is ready) ...
    g.run(["systemctl", "start", GOVERN], timeout=120, check=True, units=[GOVERN])
    assert g.run(["systemctl", "is-active", GOVERN]).out.strip() == "active"
    # ... stopped by the removal, while `backburner restore` (ExecStopPost=) is there
    g.run(["dpkg", "--purge", "backburner"], timeout=300, check=True, units=[GOVERN])
    assert g.run(["pgrep", "-f", "backburner govern"]).status == 1
    assert g.run(["systemctl", "is-active", GOVERN]).out.strip() == "inactive"
    assert g.run(["dpkg-query", "-W", "backburner"]).status != 0
    after = set(g.run(["sh", "-c", OURS], check=True).out.split())
    assert after == before, sorted(after ^ before)
    leftover = g.run(["sh", "-c", "ls -d /usr/lib/python3/dist-packages/backburner* "
                      "/usr/share/doc/backburner /var/lib/backburner 2>&1"]).out
    assert leftover.count("No such file or directory") == 3, leftover
