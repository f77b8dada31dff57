"""Packaging: the wheel builds, carries its metadata and license, installs into a fresh
virtual environment (alone, then with the hashed runtime lock) and runs there; `python -m
backburner` works; `run` imports none of the heavy optional dependencies; the locks pin
every package with hashes and agree with pyproject.toml."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from helpers import TIMEOUT, Result, bb, build_wheel, make_db, one_line_error

import backburner

ROOT = Path(__file__).parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
HEAVY = ("numpy", "scipy", "matplotlib", "rich", "mfusepy", "psycopg", "fuse")


def imported_modules(*args: str) -> set[str]:
    """Top-level modules a backburner command imports (python -X importtime)."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "backburner", *args],
                          capture_output=True, text=True, timeout=TIMEOUT)
    names = set()
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip().split(".")[0])
    assert "backburner" in names, done.stderr[-500:]
    return names


@pytest.mark.parametrize("args", [["run", "--", "true"], ["policies"], ["completion", "bash"],
                                  ["completion", "fish"], ["doctor"],
                                  ["apply", "--unit", "x", "--dry-run"], ["status"]])
def test_light_commands_import_no_heavy_dependency(args: list[str]) -> None:
    assert imported_modules(*args).isdisjoint(HEAVY)


def test_the_scan_sees_heavy_imports(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    make_db(db)
    assert {"numpy", "rich"} <= imported_modules("report", str(db))


def test_python_dash_m_backburner() -> None:
    res = bb("--version")
    assert res.returncode == 0 and res.out.strip() == f"backburner {backburner.__version__}"
    assert bb("policies").out.startswith("default")
    assert bb().returncode == 64


def test_locks_pin_and_hash_every_package() -> None:
    for name in ("requirements.lock", "requirements-dev.lock"):
        text = (ROOT / name).read_text()
        reqs = re.findall(r"^([A-Za-z0-9_.-]+)==[^\s;]+", text, re.M)
        assert reqs, name
        blocks = re.split(r"\n(?=[A-Za-z0-9_.-]+==)", text.split("\n", 1)[1])
        for block in blocks:
            if "==" in block:
                assert "--hash=sha256:" in block, f"{name}: {block.splitlines()[0]}"
        runtime = {r.lower() for r in reqs}
        if name == "requirements.lock":
            assert {"numpy", "scipy", "matplotlib", "rich", "mfusepy", "psycopg"} <= runtime
            assert runtime.isdisjoint({"pytest", "ruff", "html5lib", "pytest-timeout"})
        else:
            assert {"pytest", "ruff", "html5lib", "numpy", "setuptools"} <= runtime


def test_runtime_dependencies_are_extras_with_debian_12_floors() -> None:
    project = PYPROJECT["project"]
    # the unconditional dependencies: python3-jeepney 0.8.0 in bookworm; python3-shtab 1.7.1
    # in trixie (bookworm's 1.5.5 completes subcommands wrongly in bash); python3-regex
    # 2022.10.31 in bookworm (Debian calls it 0.1.20221031)
    assert project["dependencies"] == ["jeepney>=0.8", "shtab>=1.7.1", "regex>=2022.10.31"]
    extras = project["optional-dependencies"]
    assert set(extras) >= {"report", "slowdisk", "postgres", "all", "test"}
    floors = {re.split(r"[\[>=]", r)[0]: r
              for e in ("report", "slowdisk", "postgres") for r in extras[e]}
    floors["pytest"] = next(r for r in extras["test"] if r.startswith("pytest>"))
    # python3-numpy 1.24.2, python3-scipy 1.10.1, python3-matplotlib 3.6.3, python3-rich
    # 13.3.1, python3-psycopg 3.1.7, python3-pytest 7.2.1 in bookworm
    for name, floor in {"numpy": "1.24", "scipy": "1.10", "matplotlib": "3.6", "rich": "13.3",
                        "psycopg": "3.1.7", "pytest": "7.2"}.items():
        assert floors[name].endswith(f">={floor}"), floors[name]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel(ROOT, tmp_path_factory.mktemp("dist"))


def test_the_wheel_carries_metadata_license_and_entry_point(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as whl:
        names = whl.namelist()
        dist = next(n.split("/")[0] for n in names if ".dist-info/" in n)
        meta = whl.read(f"{dist}/METADATA").decode()
        entry = whl.read(f"{dist}/entry_points.txt").decode()
        license_text = whl.read(f"{dist}/licenses/LICENSE").decode()
    assert f"Version: {backburner.__version__}" in meta
    assert "License-Expression: Apache-2.0" in meta
    assert "Apache License" in license_text and "Version 2.0" in license_text
    assert "Classifier: Operating System :: POSIX :: Linux" in meta
    assert "Requires-Python: >=3.11" in meta
    requires = [ln for ln in meta.splitlines() if ln.startswith("Requires-Dist:")]
    unconditional = [r for r in requires if "extra ==" not in r]
    assert unconditional == ["Requires-Dist: jeepney>=0.8",  # the rest are extras
                             "Requires-Dist: shtab>=1.7.1", "Requires-Dist: regex>=2022.10.31"]
    assert "backburner = backburner.entry:main" in entry
    assert "backburner/systemd/bus.py" in names and "backburner/cli/apply.py" in names
    assert not any(n.startswith("tests/") for n in names)


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Path:
    venv = tmp_path_factory.mktemp("venv") / "fresh"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    subprocess.run([venv / "bin/pip", "install", "-q", "--disable-pip-version-check",
                    "--no-deps", "--no-index", str(wheel)], check=True, timeout=120)
    return venv


def _run(venv: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run([*args], capture_output=True, text=True, timeout=TIMEOUT, env=env,
                          cwd=venv)


def test_the_wheel_alone_runs_the_light_commands(fresh_venv: Path, tmp_path: Path) -> None:
    tool = str(fresh_venv / "bin/backburner")
    assert _run(fresh_venv, tool, "--version").stdout.strip() == \
        f"backburner {backburner.__version__}"
    assert _run(fresh_venv, tool, "policies").stdout.startswith("default")
    py = str(fresh_venv / "bin/python")
    assert _run(fresh_venv, py, "-m", "backburner", "-V").returncode == 0
    assert "complete -c backburner" in _run(fresh_venv, tool, "completion", "fish").stdout
    where = _run(fresh_venv, py, "-c", "import backburner; print(backburner.__file__)").stdout
    assert where.startswith(str(fresh_venv))  # the installed copy, not this checkout
    db = tmp_path / "r.db"
    make_db(db)
    res = _run(fresh_venv, tool, "report", str(db))
    assert res.returncode == 69, res.stderr
    line = one_line_error(Result(0, res.returncode, b"", res.stderr.encode()))
    assert "pip install 'backburner[report]'" in line


def test_the_wheel_with_the_runtime_lock_runs_report(fresh_venv: Path, tmp_path: Path) -> None:
    """--no-deps plus the hashed runtime lock: what an offline install of a release does."""
    subprocess.run([fresh_venv / "bin/pip", "install", "-q", "--disable-pip-version-check",
                    "--require-hashes", "-r", str(ROOT / "requirements.lock")], check=True,
                   timeout=600)
    db = tmp_path / "r.db"
    make_db(db)
    res = _run(fresh_venv, str(fresh_venv / "bin/backburner"), "report", str(db))
    assert res.returncode == 0, res.stderr
    assert "bfq" in res.stdout and "mq-deadline" in res.stdout
    assert _run(fresh_venv, str(fresh_venv / "bin/backburner"), "policies").returncode == 0
    bash = _run(fresh_venv, str(fresh_venv / "bin/backburner"), "completion", "bash").stdout
    assert "complete -o bashdefault -F _shtab_backburner backburner" in bash
