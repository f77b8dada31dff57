"""bench.pkgloads: the real dpkg and flatpak installing and removing a generated app on a
loop-device testbed, round after round; what they leave when stopped or when the package
breaks mid-run; refusals where a tool is missing; and a short bench with each load. The root
disk's dpkg and flatpak state is checked untouched after every test that installs."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import bb, one_line_error

from backburner import system
from backburner.base.errors import UnavailableError
from backburner.bench import config, devices, loadio, loads, packages, pkgloads
from backburner.policy import grammar
from backburner.store import Store

KINDS = pkgloads.KINDS
TINY = "200:2m"
DEFAULT = grammar.BUILTIN["default"]


# --- refusals, before anything is built ------------------------------------------------------


@pytest.mark.parametrize("kind, package", [
    ("dpkg-loop", "apt-get install dpkg"), ("flatpak-loop", "apt-get install flatpak"),
    ("flatpak-api", "apt-get install flatpak")])
def test_a_missing_tool_is_refused_naming_its_package(
        kind: str, package: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing there
    cfg = config.BenchConfig(probes=["/bin/true"], loads=["none", f"{kind}:{TINY}"],
                             policies=["default"], schedulers=["bfq"])
    with pytest.raises(UnavailableError, match=package) as exc:
        config.plan(cfg)
    assert exc.value.exit_status == 69 and "\n" not in str(exc.value)


def test_flatpak_api_without_introspection_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pkgloads, "TYPELIBS", ("/nonexistent/Flatpak-1.0.typelib",))
    with pytest.raises(UnavailableError, match="python3-gi gir1.2-flatpak-1.0"):
        pkgloads.require("flatpak-api")
    pkgloads.require("flatpak-loop")  # the command alone does not need it


def test_the_cli_refuses_in_one_line_and_builds_nothing(tmp_path: Path, state_dir: Path) -> None:
    env = {**os.environ, "PATH": str(tmp_path)}
    r = bb("bench", "--probe", "/bin/true", "--load", "flatpak-loop", "-o",
           str(tmp_path / "r.db"), env=env)
    assert r.returncode == 69
    assert one_line_error(r) == ("backburner: load flatpak-loop needs flatpak, which is not "
                                 "installed; apt-get install flatpak")
    assert not (state_dir / "cache").exists() and not (tmp_path / "r.db").exists()


# --- on a testbed ----------------------------------------------------------------------------


@pytest.fixture
def load_dir(state_dir: Path) -> Iterator[str]:
    """A load's directory on a fresh ext4 testbed on a loop device (gone afterwards): 1G,
    for the 500 MB flatpak keeps free."""
    with system.Transaction("test-pkgloads") as tx:
        device = devices.setup(devices.DeviceSpec.parse("testbed:1G"), tx)
        directory = os.path.join(device.load_dir, "00-pkg")
        os.mkdir(directory, 0o700)
        yield directory


HOST_FLATPAK = Path("/var/lib/flatpak")
HOST_DPKG = Path("/var/lib/dpkg")
HOST_PATHS = ("/usr/lib/bench-app", "/usr/share/bench-app", "/root/.local/share/flatpak",
              "/root/.cache/flatpak", "/var/cache/flatpak", "/var/lib/dpkg/info/"
              f"{packages.DEB_PACKAGE}.list")


def _tree(root: Path) -> dict[str, tuple[int, int, int]]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            st = os.lstat(os.path.join(dirpath, name))
            out[os.path.join(dirpath, name)] = (st.st_mode, st.st_size, st.st_mtime_ns)
    return out


@pytest.fixture
def host_untouched() -> Iterator[None]:
    """The root disk's flatpak installation unchanged to the nanosecond, and nothing of our
    package in dpkg's database or log (other work may install packages meanwhile: the rest
    of /var/lib/dpkg is theirs)."""
    flatpak = _tree(HOST_FLATPAK)
    present = {p: os.path.lexists(p) for p in HOST_PATHS}
    log = Path("/var/log/dpkg.log")
    log_size = log.stat().st_size if log.exists() else 0
    yield
    assert _tree(HOST_FLATPAK) == flatpak
    assert {p: os.path.lexists(p) for p in HOST_PATHS} == present
    assert packages.DEB_PACKAGE not in (HOST_DPKG / "status").read_text()
    assert not list((HOST_DPKG / "info").glob(f"{packages.DEB_PACKAGE}.*"))
    if log.exists():
        with log.open("rb") as f:
            f.seek(log_size)
            assert packages.DEB_PACKAGE.encode() not in f.read()


def _rounds(load: loads.Load) -> int:
    done = pkgloads.progress(load.progress)
    return done[0] if done else 0


def _wait_rounds(load: loads.Load, n: int, timeout: float = 25) -> None:
    deadline = time.monotonic() + timeout
    while _rounds(load) < n:
        assert load.alive(), Path(load.log).read_text()[-2000:]
        assert time.monotonic() < deadline, f"{_rounds(load)} rounds after {timeout} s"
        time.sleep(0.05)


@pytest.mark.root
@pytest.mark.parametrize("kind", KINDS)
def test_rounds_install_and_remove_on_the_testbed(kind: str, load_dir: str,
                                                  host_untouched: None) -> None:
    load = loads.Load(loads.parse(f"{kind}:{TINY}"), load_dir)
    load.prepare()
    inst = load.installation
    assert inst is not None and not inst.installed()
    load.start(DEFAULT, [])
    try:
        _wait_rounds(load, 2)
    finally:
        load.stop()
    assert load.failure == []
    bulk = load.bulk()
    assert bulk is not None and bulk.unit == "io bytes"
    counts = dict(bulk.counts)
    assert counts["rounds"] >= 2
    installed = packages.total_bytes(packages.Shape(200, 2 << 20))
    assert counts["installed_bytes"] == counts["rounds"] * installed
    assert counts["files"] == counts["rounds"] * 200
    assert bulk.units >= counts["rounds"] * installed  # each install wrote the app at least
    assert not inst.installed()  # stopped mid-round: made whole again


@pytest.mark.root
@pytest.mark.parametrize("kind", KINDS)
def test_a_round_cut_short_counts_what_it_moved(kind: str, load_dir: str,
                                                host_untouched: None) -> None:
    """A load stopped before its first round finishes has worked: its speed is the bytes
    its tree read and wrote, not 0 (a finished-rounds count read "0.0 MB/s" for an
    installer that was busy the whole trial)."""
    load = loads.Load(loads.parse(f"{kind}:2000:64m"), load_dir)
    load.prepare()
    load.start(DEFAULT, [])
    try:
        assert load.child is not None
        deadline = time.monotonic() + 30
        while (loadio.tree_bytes(load.child.pid) or 0) < 2 << 20:
            assert load.alive() and time.monotonic() < deadline, Path(load.log).read_text()
            time.sleep(0.02)
        assert _rounds(load) == 0, "a round finished first: the app is too small to cut"
    finally:
        load.stop()
    bulk = load.bulk()
    assert bulk is not None and dict(bulk.counts)["rounds"] == 0
    assert bulk.units >= 1 << 20 and bulk.rate > 0


def _app_refs(inst: pkgloads.Installation) -> list[str]:
    """The app's refs in the installation's repository, under any remote."""
    remotes = Path(inst.flatpak_dir, "repo", "refs", "remotes")
    return [str(p) for p in remotes.glob("*/app/**/*") if p.is_file()]


def _stray_import(inst: pkgloads.Installation) -> None:
    """A flatpak install SIGKILLed once its import left the app's ref in the repository,
    before (or while) it deployed it: what a load stopped at that moment leaves."""
    proc = subprocess.Popen(["flatpak", "--system", "install", "-y", "--noninteractive",
                             "--bundle", inst.package], env={**os.environ, **inst.env()},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not _app_refs(inst):
        assert proc.poll() is None and time.monotonic() < deadline, "no ref before the end"
        time.sleep(0.001)
    proc.kill()
    proc.wait()


@pytest.mark.root
@pytest.mark.parametrize("kind", [k for k in KINDS if k.startswith("flatpak")])
def test_an_install_stopped_after_its_import_leaves_no_objects_behind(
        kind: str, load_dir: str, host_untouched: None) -> None:
    """The bundle's origin and ref stayed in the repository (`flatpak info`: not
    installed), and every later round found the app's objects there: 56 rounds a minute
    that wrote 1-2 MB each, where a round writes the app (about 117 MB) to the disk."""
    load = loads.Load(loads.parse(f"{kind}:{TINY}"), load_dir)
    load.prepare()
    inst = load.installation
    assert inst is not None
    _stray_import(inst)
    inst.recover()
    assert _app_refs(inst) == [] and not inst.installed()
    load.start(DEFAULT, [])
    try:
        _wait_rounds(load, 1)
    finally:
        load.stop()
    bulk = load.bulk()
    assert bulk is not None and load.failure == []
    installed = packages.total_bytes(packages.Shape(200, 2 << 20))
    assert bulk.units >= dict(bulk.counts)["rounds"] * installed  # the app was written


def _break(path: str) -> bytes:
    """The package replaced by its first half (a download cut short); the whole returned."""
    data = Path(path).read_bytes()
    tmp = path + ".cut"
    Path(tmp).write_bytes(data[:len(data) // 2])
    os.replace(tmp, path)
    return data


@pytest.mark.root
@pytest.mark.parametrize("kind", KINDS)
def test_a_package_that_breaks_mid_run(kind: str, load_dir: str,
                                       host_untouched: None) -> None:
    """The package is cut short after a round: the load fails with the tool's own words,
    the installation is made whole, and the next run (package repaired) installs again."""
    load = loads.Load(loads.parse(f"{kind}:{TINY}"), load_dir)
    load.prepare()
    assert load.installation is not None
    package = load.installation.package
    load.start(DEFAULT, [])
    try:
        _wait_rounds(load, 1)
        whole = _break(package)
        deadline = time.monotonic() + 25
        while load.alive():
            assert time.monotonic() < deadline, "the load went on with a broken package"
            time.sleep(0.05)
    finally:
        load.stop()
    assert load.failure, Path(load.log).read_text()[-2000:]
    said = " ".join(load.failure).lower()
    assert "error" in said, load.failure
    assert not load.installation.installed()
    Path(package).write_bytes(whole)
    load.start(DEFAULT, [])
    try:
        _wait_rounds(load, 1)
    finally:
        load.stop()
    assert load.failure == [] and not load.installation.installed()


@pytest.mark.root
def test_a_short_bench_with_each_load(tmp_path: Path, state_dir: Path,
                                      host_untouched: None) -> None:
    """Each load in a real bench on a testbed: every trial ok, its bulk work in bytes, files
    and rounds; the package cache is filled once and kept for the next run."""
    db = tmp_path / "r.db"
    specs = [f"{kind}:{TINY}" for kind in KINDS]
    # the probe lasts long enough for a round of each load to finish within its trial on a
    # busy machine (a flatpak-api round took over the 1.6 s a /bin/true trial lasted at load 8)
    r = bb("bench", "--probe", "/bin/sleep 3", *[a for s in specs for a in ("--load", s)],
           "--device", "testbed:1G", "--scheduler", "bfq", "--trials", "1", "--warmup", "0",
           "--settle", "1.5", "--seed", "3", "-o", str(db), "-q", timeout=240)
    assert r.returncode == 0, r.err
    store = Store.open(str(db), readonly=True)
    cells = {c.id: c.cell for c in store.cells()}
    trials = store.trials(include_warmup=True)
    assert {t["status"] for t in trials} == {"ok"}
    by_load = {cells[t["cell_id"]].load: t for t in trials}
    assert set(by_load) == {"none", *specs}
    for spec in specs:
        bulk = by_load[spec]["extra"]["bulk"]
        assert bulk["unit"] == "io bytes" and {"rounds", "files"} <= set(bulk), bulk
        assert bulk["rounds"] >= 1 and bulk["units"] > 0, (spec, bulk)
        during = by_load[spec]["extra"]["bulk_during"]
        assert during["seconds"] > 0 and during["bytes"] >= 0, during
    built = sorted(p.name.split("-")[0] for p in (state_dir / "cache" / "packages").iterdir())
    assert built == ["deb", "flatpak"]  # flatpak-loop and flatpak-api share one build


def test_the_worker_runs_on_the_system_python() -> None:
    """The worker is a file of its own, importing nothing of backburner (it runs on
    /usr/bin/python3, where python3-gi is)."""
    source = Path(pkgloads.WORKER).read_text()
    assert "backburner" not in "".join(ln for ln in source.splitlines()
                                       if ln.startswith(("import", "from")))


@pytest.mark.parametrize("kind, comm", [
    ("dpkg-loop", "dpkg"), ("flatpak-loop", "flatpak"), ("flatpak-api", "python3")])
def test_the_govern_rule_names_each_loads_program(kind: str, comm: str) -> None:
    """--policy govern: the daemon's rule matches the process that does the installing,
    and not the shell loop around it."""
    from backburner.bench import governed
    from backburner.govern.rulefile import parse_file
    from backburner.govern.rules import StaticFacts

    parsed = parse_file(governed.rule_for(loads.parse(kind)), "bench.rules")
    assert parsed.errors == [] and len(parsed.rules) == 1
    inst = pkgloads.Installation(kind, packages.Shape(200, 2 << 20), "/nowhere")
    argv = inst.argv("/nowhere/progress")
    if kind == "flatpak-api":
        tool = argv
    else:
        assert argv[:2] == ["sh", "-c"]
        tool = [comm, "--root=/nowhere/root", "--install"] if comm == "dpkg" \
            else [comm, "--system", "install"]
        assert parsed.rules[0].holds(StaticFacts(comm="sh", cmdline=argv)) is False
    assert parsed.rules[0].holds(StaticFacts(comm=comm, cmdline=tool))


@pytest.mark.root
def test_a_package_broken_during_a_trial_fails_only_that_trial(
        tmp_path: Path, state_dir: Path, host_untouched: None) -> None:
    """In a real bench: a setup variant run with the probe cuts the .deb short for a few
    seconds (the load's next dpkg fails on it), then puts it back. That trial fails with
    dpkg's own words; the trial without the variant is measured under a working load."""
    cut = ('f=$(find "$(findmnt -n -o TARGET -S "$BACKBURNER_DEVICE")/load" -name app.deb) && '
           'cp "$f" "$f.good" && head -c 4096 "$f.good" > "$f.cut" && mv "$f.cut" "$f" && '
           'sleep 2.5 && mv "$f.good" "$f"')
    db = tmp_path / "r.db"
    r = bb("bench", "--probe", "/bin/sleep 3", "--load", f"dpkg-loop:{TINY}",
           "--setup-variant-during", f"cut={cut}", "--device", "testbed:512M",
           "--scheduler", "bfq", "--trials", "1", "--warmup", "0", "--settle", "1",
           "--seed", "3", "--ignore-failure", "-o", str(db), "-q", timeout=240)
    assert r.returncode == 0, r.err
    store = Store.open(str(db), readonly=True)
    cells = {c.id: c.cell for c in store.cells()}
    loaded = {cells[t["cell_id"]].prepare: t for t in store.trials(include_warmup=True)
              if not cells[t["cell_id"]].unloaded}
    assert loaded["none"]["status"] == "ok", loaded["none"]["extra"]
    broken = loaded["cut"]
    assert broken["status"] == "failed", str(broken["extra"])[-3000:]
    assert broken["extra"]["reason"] == "the load failed while the probe ran"
    assert any("dpkg" in line for line in broken["extra"]["stderr_tail"]), broken["extra"]
    assert broken["extra"]["bulk"]["unit"] == "io bytes"
