"""The Debian package: debian/ builds a .deb with dpkg-buildpackage (dh-python, pybuild)
from a copy of this checkout, and the .deb holds what a distribution ships: the command in
/usr/bin and its Python package, the units (every ExecStart= the installed command, none
enabled), the man page, bash/zsh/fish completion that load, docs; its dependencies are
Debian's packages; lintian finds no error. Installing it on a systemd machine is proven in
the guest (tests/vm/test_guest_deb.py)."""

from __future__ import annotations

import gzip
import re
import shlex
import subprocess
import tomllib
from pathlib import Path

import pytest
from helpers import DEB_BUILD_PATH, TIMEOUT, build_deb

import backburner

ROOT = Path(__file__).parent.parent
UNITS = sorted(p.name for p in (ROOT / "systemd").glob("*.service"))


@pytest.fixture(scope="module")
def deb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The .deb; build_deb checks that its build left the checkout as it was."""
    return build_deb(ROOT, tmp_path_factory.mktemp("deb"))


@pytest.fixture(scope="module")
def tree(deb: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("deb-tree")
    subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True, timeout=TIMEOUT)
    return root


def control(deb: Path) -> dict[str, str]:
    text = subprocess.run(["dpkg-deb", "-f", str(deb)], check=True, capture_output=True,
                          text=True, timeout=TIMEOUT).stdout
    return dict(re.findall(r"^(\S+): (.*(?:\n .*)*)", text, re.M))


def contents(deb: Path) -> set[str]:
    listing = subprocess.run(["dpkg-deb", "-c", str(deb)], check=True, capture_output=True,
                             text=True, timeout=TIMEOUT).stdout
    return {line.split(None, 5)[5].split(" -> ")[0].removeprefix(".")
            for line in listing.splitlines()}


def test_the_package_is_this_version_with_debian_dependencies(deb: Path) -> None:
    fields = control(deb)
    assert fields["Package"] == "backburner" and fields["Architecture"] == "all"
    assert fields["Version"].startswith(f"{backburner.__version__}-")
    depends = [d.strip() for d in fields["Depends"].split(",")]
    # from pyproject's dependencies, by dh_python3: jeepney, shtab and regex (also named in
    # debian/control: Debian versions it 0.1.DATE, so no floor), Python >= 3.11
    assert {d.split(" (")[0] for d in depends} == {"python3-jeepney", "python3-shtab",
                                                   "python3-regex", "python3:any"}, depends
    assert len(depends) == len(set(depends)), depends  # named once
    assert "python3:any (>= 3.11~)" in depends
    assert [r.strip() for r in fields["Recommends"].split(",")] == [
        "python3-numpy", "python3-scipy", "python3-matplotlib", "python3-rich"]
    assert {"fio", "python3-psycopg"} <= {s.strip() for s in fields["Suggests"].split(",")}


def test_python3_psycopg_satisfies_the_postgres_extra() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    assert extras["postgres"] == ["psycopg>=3.1.7"]  # no [binary]: Debian has no psycopg-binary


def test_the_package_holds_the_command_units_man_page_completion_and_docs(deb: Path) -> None:
    files = contents(deb)
    unit_dir = "/usr/lib/systemd/system" if f"/usr/lib/systemd/system/{UNITS[0]}" in files \
        else "/lib/systemd/system"  # where this release's debhelper puts units
    wanted = {"/usr/bin/backburner",
              "/usr/lib/python3/dist-packages/backburner/entry.py",
              "/usr/lib/python3/dist-packages/backburner/govern/defaults/10-packages.toml",
              "/usr/share/man/man1/backburner.1.gz",
              "/usr/share/bash-completion/completions/backburner",
              "/usr/share/zsh/vendor-completions/_backburner",
              "/usr/share/fish/vendor_completions.d/backburner.fish",
              "/usr/share/doc/backburner/copyright",
              "/usr/share/doc/backburner/changelog.gz",
              "/usr/share/doc/backburner/README.md.gz",
              *(f"{unit_dir}/{name}" for name in UNITS)}
    assert wanted <= files, sorted(wanted - files)
    assert not [f for f in files if f.startswith(("/usr/local", "/etc/", "/opt"))]
    assert not [f for f in files if "/tests/" in f or f.endswith(".pyc")]


def test_every_unit_runs_the_installed_command_and_none_is_enabled(deb: Path,
                                                                   tree: Path) -> None:
    files = contents(deb)
    for name in UNITS:
        (unit,) = tree.glob(f"**/systemd/system/{name}")
        for line in unit.read_text().splitlines():
            if line.startswith(("ExecStart=", "ExecStopPost=")):
                argv = shlex.split(line.split("=", 1)[1])
                assert argv[0] == "/usr/bin/backburner", (name, line)
                assert argv[0] in files
    # not enabled by the package: no symlink in *.wants, no enable in postinst
    assert not [f for f in files if ".wants/" in f]
    postinst = subprocess.run(["dpkg-deb", "-I", str(deb), "postinst"], check=True,
                              capture_output=True, text=True, timeout=TIMEOUT).stdout
    lines = [ln.strip() for ln in postinst.splitlines() if ln.strip()]
    enables = [i for i, ln in enumerate(lines) if ln.startswith("deb-systemd-helper enable")]
    assert enables  # each re-enables a unit the admin had enabled, across an upgrade only
    for i in enables:
        assert lines[i - 2].startswith("if deb-systemd-helper --quiet was-enabled"), lines[i]
    entry = (tree / "usr/bin/backburner").read_text()
    assert entry.startswith("#!/usr/bin/python3\n") and "from backburner.entry import main" in entry


def test_the_man_page_and_completion_are_the_parsers(tree: Path) -> None:
    page = gzip.decompress((tree / "usr/share/man/man1/backburner.1.gz").read_bytes()).decode()
    assert page.startswith(".TH BACKBURNER \"1\"") and f"backburner {backburner.__version__}" \
        in page
    assert ".SH EXIT STATUS" in page and "govern" in page
    script = tree / "usr/share/bash-completion/completions/backburner"
    loaded = subprocess.run(
        ["bash", "--norc", "-c", f"source {shlex.quote(str(script))}; complete -p backburner; "
         "COMP_WORDS=(backburner gov); COMP_CWORD=1; _shtab_backburner backburner gov "
         "backburner; echo \"${COMPREPLY[*]}\""],
        capture_output=True, text=True, timeout=TIMEOUT, env={"PATH": DEB_BUILD_PATH})
    assert loaded.stdout.splitlines() == [
        "complete -o bashdefault -F _shtab_backburner backburner", "govern"], loaded
    fish = (tree / "usr/share/fish/vendor_completions.d/backburner.fish").read_text()
    assert "complete -c backburner" in fish
    assert "#compdef backburner" in (tree / "usr/share/zsh/vendor-completions/_backburner"
                                     ).read_text()


def test_lintian_finds_no_error(deb: Path) -> None:
    (changes,) = deb.parent.glob("backburner_*.changes")
    res = subprocess.run(["lintian", "--pedantic", str(changes)], capture_output=True,
                         text=True, timeout=120, env={"PATH": DEB_BUILD_PATH})
    tags = [ln for ln in res.stdout.splitlines() if re.match(r"[EWIPX]: ", ln)]
    assert not [t for t in tags if t.startswith("E:")], res.stdout
    # the warnings docs/guide/packaging.md lists, and no other
    warnings = {t.split()[2] for t in tags if t.startswith("W:")}
    assert warnings <= {"initial-upload-closes-no-bugs"}, res.stdout
