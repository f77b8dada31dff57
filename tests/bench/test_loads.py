"""bench.loads: the spec grammar, fio job files, and real loads started and stopped on the
real filesystem: nothing of a load may survive `stop`, and its priorities are applied."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from backburner import spawn
from backburner.base.errors import UsageError
from backburner.bench import loads
from backburner.kernel import priorities, procfs
from backburner.policy import grammar

# --- grammar ---------------------------------------------------------------------------------


def test_parse_none() -> None:
    spec = loads.parse(" none ")
    assert spec.kind == "none" and spec.is_none and spec.fio == ()


@pytest.mark.parametrize("text, parts", [
    ("readers:10:seq", [("readers", 10, "seq", "direct", "read", "1m")]),
    ("readers:2:rand", [("readers", 2, "rand", "direct", "randread", "4k")]),
    ("readers:3:seq:buffered", [("readers", 3, "seq", "buffered", "read", "1m")]),
    ("writers:1:seq", [("writers", 1, "seq", "direct", "write", "1m")]),
    ("writers:4:rand:direct", [("writers", 4, "rand", "direct", "randwrite", "4k")]),
    ("readers:2:seq+writers:1:rand:buffered",
     [("readers", 2, "seq", "direct", "read", "1m"),
      ("writers", 1, "rand", "buffered", "randwrite", "4k")]),
    ("readers:1:seq + readers:1:rand", [("readers", 1, "seq", "direct", "read", "1m"),
                                        ("readers", 1, "rand", "direct", "randread", "4k")]),
    ("readers:10:seq:buffered:4k", [("readers", 10, "seq", "buffered", "read", "4096")]),
    ("readers:10:seq:4k:buffered", [("readers", 10, "seq", "buffered", "read", "4096")]),
    ("readers:1:rand:64K", [("readers", 1, "rand", "direct", "randread", "65536")]),
    ("writers:1:seq:512", [("writers", 1, "seq", "direct", "write", "512")]),
    ("readers:1:seq:64m", [("readers", 1, "seq", "direct", "read", str(64 << 20))]),
])
def test_parse_fio(text: str, parts: list[tuple]) -> None:
    spec = loads.parse(text)
    assert spec.kind == "fio" and not spec.is_none
    assert [(p.role, p.jobs, p.pattern, p.mode, p.rw, p.bs) for p in spec.fio] == parts
    assert not any(p.passes for p in spec.fio)


@pytest.mark.parametrize("text, mode, bs", [
    ("readers:10:seq:s-suite", "buffered", "4096"),
    ("readers:10:seq:s-suite:1m", "buffered", str(1 << 20)),  # one factor changed
    ("readers:10:seq:1m:s-suite:buffered", "buffered", str(1 << 20)),
    ("readers:2:seq:passes", "direct", "1m"),
    ("readers:2:seq:passes:buffered:4k", "buffered", "4096"),
])
def test_parse_whole_file_passes(text: str, mode: str, bs: str) -> None:
    (part,) = loads.parse(text).fio
    assert (part.passes, part.mode, part.bs) == (True, mode, bs)


@pytest.mark.parametrize("text, variant", [
    ("install-loop", "shell-loop"), ("install-loop:shell-loop", "shell-loop"),
    ("install-loop:long-lived", "long-lived")])
def test_parse_install_loop(text: str, variant: str) -> None:
    spec = loads.parse(text)
    assert (spec.kind, spec.variant) == ("install-loop", variant)


@pytest.mark.parametrize("text, kind, files, size", [
    ("dpkg-loop", "dpkg-loop", 3000, 96 << 20),
    ("flatpak-loop:200:2m", "flatpak-loop", 200, 2 << 20),
    ("flatpak-api:5000:300m", "flatpak-api", 5000, 300 << 20)])
def test_parse_package_manager_loads(text: str, kind: str, files: int, size: int) -> None:
    spec = loads.parse(text)
    assert spec.kind == kind and spec.shape is not None
    assert (spec.shape.files, spec.shape.size) == (files, size)
    assert spec.data_bytes == 3 * size  # the package, the app, what a round leaves
    assert spec.headroom_bytes == (0 if kind == "dpkg-loop" else 500_000_000)


def test_flatpaks_free_space_is_counted_once() -> None:
    specs = [loads.parse("flatpak-loop:200:2m"), loads.parse("flatpak-api:200:2m"),
             loads.parse("dpkg-loop:200:2m")]
    assert loads.room_needed(specs) == 9 * (2 << 20) + 500_000_000


def test_parse_copy_and_cmd() -> None:
    assert loads.parse("copy").kind == "copy"
    for text, command in [("cmd:'tar xf big.tar'", "tar xf big.tar"),
                          ('cmd:"sleep 1; echo x"', "sleep 1; echo x"),
                          ("cmd:sleep 5", "sleep 5"),
                          ("cmd:'it''s'", "it''s")]:
        spec = loads.parse(text)
        assert (spec.kind, spec.command) == ("cmd", command), text


@pytest.mark.parametrize("text", [
    "readers:x:seq", "readers:10", "writers:2:zigzag", "cmd:", "cmd:''", "cmd:  ",
    "install-loop:bogus", "readers:0:seq", "readers:2:seq:sync", "readers:2:seq+",
    "none+readers:1:seq", "copy:1g", "", "bogus", "readers:-1:seq", "READERS:1:seq",
    "readers:1:seq+install-loop", "dpkg-loop:200", "dpkg-loop:x:2m", "flatpak-loop:2m:200",
    "flatpak-api:5:1m", "dpkg-loop:200:100k", "rpm-loop",
    "readers:1:seq:4k:8k", "readers:1:seq:direct:buffered", "readers:1:seq:s-suite:passes",
    "readers:1:seq:s-suite:direct", "readers:1:seq:100", "readers:1:seq:256", "readers:1:seq:0",
    "readers:1:seq:128m", "readers:1:seq:4q", "readers:1:seq:", "readers:1:seq::4k",
    "readers:1:seq:S-SUITE", "readers:1:seq:4k+", "readers:1:seq:1.5k",
])
def test_parse_errors(text: str) -> None:
    with pytest.raises(UsageError) as exc:
        loads.parse(text)
    assert exc.value.exit_status == 64
    assert "\n" not in str(exc.value)


def _sections(jobfile: str) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    cur = None
    for line in jobfile.splitlines():
        line = line.strip()
        if line.startswith("["):
            cur = out.setdefault(line[1:-1], {})
        elif line and cur is not None:
            key, _, value = line.partition("=")
            cur[key] = value
    return out


def test_fio_jobfile_for_a_mix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loads, "FIO_FILE_SIZE", "16m")
    spec = loads.parse("readers:2:seq+writers:1:rand:buffered+readers:3:rand")
    text = loads.fio_jobfile(spec, "/some/dir")
    s = _sections(text)
    assert list(s)[0] == "global"
    g = s.pop("global")
    assert g["directory"] == "/some/dir" and g["size"] == "16m"
    assert g["time_based"] == "1" and int(g["runtime"]) >= 3600
    assert g["ioengine"] == "psync"
    jobs = list(s.values())
    assert [(j["rw"], j["bs"], j["numjobs"], j["direct"]) for j in jobs] == [
        ("read", "1m", "2", "1"), ("randwrite", "4k", "1", "0"), ("randread", "4k", "3", "1")]
    assert len(s) == 3  # one section per part, unique names
    # every part has its own files: two reader parts must not share bbload.readers.$jobnum
    formats = [j["filename_format"] for j in jobs]
    assert len(set(formats)) == 3 and all("$jobnum" in f for f in formats)
    assert not any("loops" in j or "time_based" in j for j in jobs)  # the global stream


def test_fio_jobfile_whole_file_passes() -> None:
    """S's readers: fio's defaults (buffered, 4 KiB), whole-file loops with invalidate=1;
    a time-based part beside it keeps the global stream."""
    s = _sections(loads.fio_jobfile(loads.parse("readers:10:seq:s-suite+readers:1:seq"), "/d"))
    s.pop("global")
    suite, plain = s.values()
    assert (suite["rw"], suite["bs"], suite["direct"], suite["numjobs"]) == (
        "read", "4096", "0", "10")
    assert (suite["time_based"], suite["invalidate"]) == ("0", "1")
    assert int(suite["loops"]) >= 100_000
    assert "loops" not in plain and "time_based" not in plain and plain["bs"] == "1m"


# --- real loads --------------------------------------------------------------------------------


def _all_of(pid: int) -> dict[int, int | None]:
    """Its process group and all its descendants (fio's jobs setsid() out of the group)."""
    return {p: procfs.start_time(p) for p in {*procfs.group_members(pid),
                                        *procfs.descendants_of(pid)}}


def _wait_members(load: loads.Load, at_least: int, timeout: float = 15) -> dict[int, int]:
    """The load's live processes, with start times, once there are `at_least`."""
    assert load.child is not None
    deadline = time.monotonic() + timeout
    while True:
        members = _all_of(load.child.pid)
        members = {p: s for p, s in members.items() if s is not None}
        if len(members) >= at_least:
            return members
        assert load.alive(), Path(load.log).read_text()[-2000:]
        assert time.monotonic() < deadline, f"only {members} after {timeout}s"
        time.sleep(0.05)


def _assert_all_gone(members: dict[int, int]) -> None:
    alive = {p for p, start in members.items() if procfs.start_time(p) == start}
    for pid in alive:  # leave nothing running when the assertion fails
        os.kill(pid, signal.SIGKILL)
    assert not alive, f"load processes still alive after stop: {alive}"


@pytest.fixture
def small(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loads, "FIO_FILE_SIZE", "16m")
    monkeypatch.setattr(loads, "COPY_SIZE", "8m")


@pytest.fixture
def load_dir(tmp_path: Path) -> Iterator[Path]:
    d = tmp_path / "load"
    d.mkdir()
    yield d


DEFAULT = grammar.BUILTIN["default"]


def _run_and_stop(spec: str, directory: Path, at_least: int,
                  policy: grammar.Policy = DEFAULT) -> tuple[loads.Load, dict[int, int]]:
    load = loads.Load(loads.parse(spec), str(directory))
    load.prepare()
    load.start(policy, [])
    try:
        members = _wait_members(load, at_least)
        assert load.child is not None and load.child.pid in members
        time.sleep(0.3)
        assert load.alive()
    finally:
        outcome = load.stop()
    assert outcome is not None
    assert not load.alive() and load.child is None
    _assert_all_gone(members)
    assert load.stop() is None  # a second stop is a no-op
    return load, members


@pytest.mark.root
def test_fio_readers_start_and_stop(small: None, load_dir: Path) -> None:
    load, members = _run_and_stop("readers:2:seq", load_dir, at_least=3)  # main + 2 jobs
    laid_out = sorted(p.name for p in load_dir.glob("bbload.*"))
    assert len(laid_out) == 2, laid_out
    assert all((load_dir / n).stat().st_size == 16 << 20 for n in laid_out)


def _read_from_storage(pids: Iterable[int]) -> int:
    """The bytes these processes caused to be fetched from storage (page-cache misses)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/io") as f:
                total += next(int(line.split()[1]) for line in f
                              if line.startswith("read_bytes:"))
        except (OSError, StopIteration):
            continue
    return total


@pytest.mark.root
@pytest.mark.parametrize("spec, passes", [("readers:1:seq:s-suite", True),
                                          ("readers:1:seq:buffered:4k", False)])
def test_every_pass_reaches_the_device(small: None, load_dir: Path, spec: str,
                                       passes: bool) -> None:
    """A buffered reader's every pass is read from the device again, whether written as
    S's loops or as a time-based stream: fio drops the file's pages at each wrap, so the
    files fitting in memory does not turn the load into memory copies. Measured as the
    fio job's own storage reads."""
    load = loads.Load(loads.parse(spec), str(load_dir))
    load.prepare()
    fd = os.open(next(load_dir.glob("bbload.*")), os.O_RDONLY)
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
    size = 16 << 20
    load.start(DEFAULT, [])
    try:
        members = _wait_members(load, 2)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and _read_from_storage(members) < 4 * size:
            time.sleep(0.1)
        fetched = _read_from_storage(members)
    finally:
        load.stop()
    _assert_all_gone(members)
    assert fetched >= 4 * size, fetched  # four passes or more, each from storage
    assert loads.parse(spec).fio[0].passes == passes


@pytest.mark.root
def test_install_loop_shell_loop_start_and_stop(small: None, load_dir: Path) -> None:
    _run_and_stop("install-loop:shell-loop", load_dir, at_least=2)  # sh + installer
    assert (load_dir / "install.tar").stat().st_size > 1 << 20


@pytest.mark.root
def test_install_loop_long_lived_start_and_stop(small: None, load_dir: Path) -> None:
    _, members = _run_and_stop("install-loop:long-lived", load_dir, at_least=1)
    cmdlines = {p: Path(f"/proc/{p}/cmdline") for p in members}
    assert cmdlines  # the installer was our own python, now gone
    assert not any(c.exists() and procfs.start_time(p) == members[p] for p, c in cmdlines.items())


@pytest.mark.root
def test_copy_start_and_stop(small: None, load_dir: Path) -> None:
    _run_and_stop("copy", load_dir, at_least=1)
    assert (load_dir / "copy.src").stat().st_size == 8 << 20


def test_cmd_start_and_stop(load_dir: Path) -> None:
    load, _ = _run_and_stop("cmd:'sleep 100 & sleep 100; wait'", load_dir, at_least=3)
    assert load.spec.command == "sleep 100 & sleep 100; wait"


def test_cmd_runs_in_the_load_dir_and_logs_there(load_dir: Path) -> None:
    load = loads.Load(loads.parse("cmd:'pwd; echo out; echo err >&2; sleep 100'"),
                      str(load_dir))
    load.prepare()
    load.start(DEFAULT, [])
    try:
        deadline = time.monotonic() + 10
        while "err" not in Path(load.log).read_text() and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        load.stop()
    assert Path(load.log).read_text().split() == [str(load_dir), "out", "err"]


@pytest.fixture
def short_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    """Load.stop's SIGTERM grace (10 s) cut to 0.5 s to keep the suite fast."""
    real = spawn.Child.stop_tree

    def stop_tree(self: spawn.Child, grace: float = 10.0, verify_s: float = 5.0
                  ) -> spawn.Outcome:
        return real(self, min(grace, 0.5), verify_s)

    monkeypatch.setattr(spawn.Child, "stop_tree", stop_tree)


def test_load_ignoring_sigterm_is_still_stopped(load_dir: Path, short_grace: None) -> None:
    """Everything in the group ignores SIGTERM: stop waits its grace, then SIGKILLs."""
    _run_and_stop("cmd:'trap \"\" TERM; sleep 100 & sleep 100; wait'", load_dir, at_least=3)


@pytest.mark.root
def test_fio_jobs_outside_the_group_are_stopped(small: None, load_dir: Path,
                                                short_grace: None) -> None:
    """fio's job processes setsid() out of the load's group; when fio's main process cannot
    end them (here: stopped, then SIGKILLed after the grace), stop must kill them itself."""
    load = loads.Load(loads.parse("readers:2:seq"), str(load_dir))
    load.prepare()
    load.start(DEFAULT, [])
    try:
        assert load.child is not None
        main = load.child.pid
        deadline = time.monotonic() + 15
        while True:  # fio's jobs call setsid() shortly after they are forked
            members = _wait_members(load, 3)
            jobs = [p for p in members if p != main]
            if all(procfs.pgid_of(p) not in (main, None) for p in jobs):
                break
            assert time.monotonic() < deadline, "fio's jobs never left the load's group"
            time.sleep(0.02)
        os.kill(main, signal.SIGSTOP)
    finally:
        load.stop()
    _assert_all_gone(members)


def test_straggler_ignoring_sigterm_after_leader_exits(load_dir: Path) -> None:
    """The leader dies on SIGTERM at once; a grandchild that ignores it must not survive."""
    t0 = time.monotonic()
    _run_and_stop("cmd:'(trap \"\" TERM; sleep 100; true) & wait'", load_dir, at_least=3)
    assert time.monotonic() - t0 < 8  # no grace period wasted: the group was SIGKILLed


def test_none_load_starts_nothing(load_dir: Path) -> None:
    load = loads.Load(loads.parse("none"), str(load_dir))
    load.prepare()
    load.start(DEFAULT, [])
    assert load.child is None and not load.alive() and load.stop() is None


@pytest.mark.root
def test_policy_is_applied_to_every_fio_process(small: None, load_dir: Path) -> None:
    policy = grammar.Policy("bgish", priorities.IOPrio("idle"), priorities.CPUPolicy("idle"))
    assert not policy.needs_cgroup
    load = loads.Load(loads.parse("readers:2:seq"), str(load_dir))
    load.prepare()
    load.start(policy, [])
    try:
        members = _wait_members(load, 3)
        seen = {}
        for pid in members:
            for tid in procfs.threads_of(pid):
                seen[tid] = (str(priorities.ioprio_get(tid)), priorities.read_cpu(tid)[0])
    finally:
        load.stop()
    _assert_all_gone(members)
    assert len(seen) >= 3
    assert set(seen.values()) == {("idle", "idle")}, seen
    # and we ourselves are untouched
    assert priorities.read_cpu(os.getpid())[0] == "normal"


def test_default_policy_changes_nothing(load_dir: Path) -> None:
    mine = (str(priorities.ioprio_get(os.getpid())), priorities.read_cpu(os.getpid()))
    load = loads.Load(loads.parse("cmd:'sleep 100'"), str(load_dir))
    load.start(DEFAULT, [])
    try:
        theirs = {(str(priorities.ioprio_get(pid)), priorities.read_cpu(pid))
                  for pid in _wait_members(load, 1)}
    finally:
        load.stop()
    assert theirs == {mine}


@pytest.mark.root
def test_a_killed_bench_leaves_no_fio_running(small: None, load_dir: Path) -> None:
    """The bench process dies by SIGKILL mid-trial: its fio load must end by itself."""
    script = textwrap.dedent(f"""
        import sys, time
        from backburner import spawn
        from backburner.kernel import priorities
        from backburner.policy import grammar
        from backburner.kernel import procfs
        from backburner.bench import loads
        loads.FIO_FILE_SIZE = "16m"
        load = loads.Load(loads.parse("readers:2:seq"), {str(load_dir)!r})
        load.prepare()
        load.start(grammar.BUILTIN["default"], [])
        while len(procfs.descendants_of(load.child.pid)) < 2:
            time.sleep(0.02)
        print(load.child.pid, flush=True)
        time.sleep(100)
    """)
    bench = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    timer = threading.Timer(30, bench.kill)  # never hang on readline
    timer.start()
    try:
        assert bench.stdout is not None
        line = bench.stdout.readline()
        assert line, "the bench script failed"
        members = _all_of(int(line))
        assert len(members) >= 3 and None not in members.values()
    finally:
        timer.cancel()
        bench.send_signal(signal.SIGKILL)
        bench.wait(10)
    deadline = time.monotonic() + 10
    while (any(procfs.start_time(p) == s for p, s in members.items())
           and time.monotonic() < deadline):
        time.sleep(0.05)
    left = [p for p, s in members.items() if procfs.start_time(p) == s]
    for pid in left:  # do not leave them running if the assertion fails
        os.kill(pid, signal.SIGKILL)
    assert not left, f"fio processes {left} outlived the killed bench"
