"""bench's options on real testbeds: what each one stores, seen in the result database.

Each run is small (a 512M testbed, /bin/true or python as the probe, 2 trials) and checks
several options at once to keep the suite fast."""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path

import pytest
from helpers import Result, bb, one_line_error

from backburner.bench import proberoot, probes, room
from backburner.store import Store

pytestmark = pytest.mark.root

SMALL = "from backburner.bench import loads; loads.FIO_FILE_SIZE = '32m'; loads.COPY_SIZE = '32m'"


def bench(tmp_path: Path, *args: str, timeout: float = 300) -> tuple[Result, Store]:
    db = tmp_path / "r.db"
    code = f"import sys; {SMALL}; from backburner.cli import main; sys.exit(main())"
    import subprocess

    r = subprocess.run([sys.executable, "-c", code, "bench", "--device", "testbed:512M",
                        "--scheduler", "bfq", "--settle", "0.3", "--seed", "3", "-o", str(db),
                        *args], capture_output=True, timeout=timeout, text=True,
                       stdin=subprocess.DEVNULL)
    assert "Traceback" not in r.stderr, r.stderr
    assert db.exists(), f"bench wrote no results ({r.returncode}): {r.stderr}"
    return Result(0, r.returncode, r.stdout.encode(), r.stderr.encode()), \
        Store.open(str(db), readonly=True)


def _trials(store: Store, **cell: str) -> list[dict]:
    ids = {c.id for c in store.cells()
           if all(getattr(c.cell, k) == v for k, v in cell.items())}
    return [t for t in store.trials(include_warmup=True) if t["cell_id"] in ids]


def test_bulk_work_background_and_preparation(tmp_path: Path, state_dir: Path) -> None:
    """fio's own bytes and a cmd load's own count are kept per load run; the unloaded
    cell's background throughput is ~0 (the probe's reads are not "background"); a setup
    variant runs before the probe with the testbed's root and device; --prepare before
    every trial, warm-ups included."""
    marker = tmp_path / "prepared"
    prep = f"echo \"$BACKBURNER_ROOT $BACKBURNER_DEVICE\" >> {shlex.quote(str(marker))}"
    each = tmp_path / "each"
    each.mkdir()
    every = shlex.join(["mktemp", "-p", str(each)])
    count = "cmd:'while :; do echo 5 >> \"$BACKBURNER_PROGRESS\"; sleep 0.05; done'"
    py = shlex.join([sys.executable, "-I", "-c", "import json, email.parser"])
    r, s = bench(tmp_path, "--probe", f"py={py}", "--load", "readers:1:seq", "--load", count,
                 "--trials", "2", "--setup-variant", f"mark={prep}", "--prepare", every)
    assert r.returncode == 0, r.err
    # the 0.3 s settle under BFQ is named once, before any trial: inside the stable-merge
    # window a start can be served as part of its load (docs/measurements/startup.md)
    warned = [ln for ln in r.err.splitlines() if "BFQ's stable merging" in ln]
    assert warned == ["backburner: --settle 0.3 s under bfq: a start within 0.6 s of "
                      "its load's start, at the same IO class, can be merged into the load's "
                      "queue (BFQ's stable merging); settle 1 s or more to measure the load "
                      "as it stays"], r.err
    # each load run keeps its own work, fio's bytes and the command's count; a run that
    # got no CPU in its second keeps 0 (the first warm-up's fio, still starting, on a
    # machine whose 2 cores the suite's workers and guest keep busy)
    readers = [t["extra"]["bulk"] for t in _trials(s, load="readers:1:seq")]
    assert readers and all(b["unit"] == "bytes" and b["seconds"] >= 0.3 for b in readers)
    assert sum(b["units"] for b in readers) > 1e6, readers
    counted = [t["extra"]["bulk"] for t in _trials(s, load=count)]
    assert counted and all(b["seconds"] >= 0.3 for b in counted)
    assert sum(b["units"] for b in counted if b["unit"] == "units") >= 5, counted
    idle = [t for t in _trials(s, load="none") if not t["warmup"]]
    assert idle and all(t["load_read_bps"] < 2e6 for t in idle), [
        (t["load_read_bps"], t["in_blocks"]) for t in idle]  # the probe read ~MBs itself
    prepared = [t for t in s.trials(include_warmup=True) if "prepare" in t["extra"]]
    assert prepared and all(t["extra"]["prepare"]["status"] == "ok" for t in prepared)
    root, dev = marker.read_text().splitlines()[0].split()
    assert root.endswith("/mnt/root") and dev.startswith("/dev/loop")
    cells = {c.cell.prepare for c in s.cells()}
    assert cells == {"none", "mark"}
    trials = s.trials(include_warmup=True)
    assert len(list(each.iterdir())) == len(trials)  # one --prepare per trial, warm-ups too
    assert all(t["extra"]["trial_prepare"]["status"] == "ok" for t in trials)
    env = s.runs()[0].environment["device"]["probe_layout"]
    assert env["mode"] == "touched" and env["probe_files"] > 10 and env["physical_runs"] >= 10


def test_a_load_that_lives_for_a_block(tmp_path: Path, state_dir: Path) -> None:
    """--load-lifetime cell: one run of the load per block of consecutive trials, settled
    past BFQ's weight raising; its bulk work recorded once per block. With --trace too: the
    per-trial IO attribution must not stop the load between trials."""
    r, s = bench(tmp_path, "--probe", "/bin/true", "--load", "install-loop:long-lived",
                 "--trials", "3", "--block", "3", "--load-lifetime", "cell", "--warmup", "0",
                 "--settle", "0.3", "--scheduler", "mq-deadline", "--trace", timeout=400)
    assert r.returncode == 0, r.err
    loaded = sorted(_trials(s, load="install-loop:long-lived", scheduler="mq-deadline"),
                    key=lambda t: t["id"])
    assert [t["round"] for t in loaded] == [0, 1, 2]  # no warm-up, one block
    assert "bulk" not in loaded[0]["extra"] and "bulk" in loaded[-1]["extra"]
    assert loaded[-1]["extra"]["bulk"]["unit"] == "files"
    assert loaded[-1]["extra"]["bulk"]["units"] > 0
    assert loaded[0]["extra"]["settle_s"] == 0.3  # no weight raising under mq-deadline
    assert all("settle_s" not in t["extra"] for t in loaded[1:])  # started once
    assert all("io_by" in t["extra"] for t in loaded)


def test_failures_exit_1_and_keep_stderr(tmp_path: Path, state_dir: Path) -> None:
    probe = "sh -c 'echo first line >&2; echo the reason it failed >&2; exit 3'"
    r, s = bench(tmp_path, "--probe", probe, "--trials", "1", "-q")
    assert r.returncode == 1
    assert one_line_error(r).startswith("backburner: 1 cell(s) without a successful trial")
    assert r.out == ""  # --quiet
    t = [t for t in s.trials() if t["status"] == "failed"][0]
    assert t["exit_code"] == 3
    assert t["extra"]["stderr_tail"] == ["first line", "the reason it failed"]
    again = tmp_path / "again"
    again.mkdir()
    r2, _ = bench(again, "--probe", probe, "--trials", "1", "--ignore-failure", "-q")
    assert r2.returncode == 0, r2.err


@pytest.mark.parametrize("layout", ["directories", "aged"])
def test_probe_layouts_spread_the_files(tmp_path: Path, state_dir: Path, layout: str) -> None:
    py = shlex.join([sys.executable, "-I", "-c", "import json"])
    # whole directories of this machine (/usr/bin, the libraries'): a testbed sized to
    # them, as bench's own room check reckons them (1.2 GB here with LibreOffice installed)
    work = tmp_path / "discover"
    work.mkdir()
    touched = probes.discover_files(probes.Probe.parse(py).resolve(), str(work), timeout=60)
    need = proberoot.bytes_needed(layout, touched)
    size = room.fitting_size(max(int(need * 1.1), 1 << 29))
    r, s = bench(tmp_path, "--probe", py, "--trials", "1", "--probe-layout", layout,
                 "--device", f"testbed:{size}")
    assert r.returncode == 0, r.err
    facts = s.runs()[0].environment["device"]["probe_layout"]
    assert facts["mode"] == layout and facts["files"] > facts["probe_files"] > 10
    if layout == "aged":
        assert facts["seed"] == 3


def test_probe_root_as_a_tree_and_as_an_image(tmp_path: Path, state_dir: Path) -> None:
    import subprocess

    tree = tmp_path / "tree"
    (tree / "bin").mkdir(parents=True)
    probe = tree / "bin" / "probe"  # a static program: the tree needs no libraries
    probe.write_bytes(_static_true())
    probe.chmod(0o755)
    image = tmp_path / "root.img"
    subprocess.run(["mkfs.ext4", "-q", "-F", "-d", str(tree), str(image), "64M"], check=True,
                   capture_output=True)
    for root, device in ((tree, "testbed:512M"), (image, "testbed:512M"),
                         (image, "slowdisk:sdcard:64M")):
        d = tmp_path / ("run-" + root.name.replace(".", "_") + device.split(":")[0])
        d.mkdir()
        r, s = bench(d, "--probe", "/bin/probe", "--trials", "1", "--probe-root", str(root),
                     "--device", device)
        assert r.returncode == 0, r.err
        env = s.runs()[0].environment["device"]
        assert env["probe_layout"]["mode"] == ("tree" if root == tree else "image")
        ok = [t for t in s.trials() if t["status"] == "ok"]
        assert len(ok) == 1 and ok[0]["in_blocks"] > 0  # read cold from the device
        if device.startswith("slowdisk"):
            assert env["slowdisk"]["image_bytes"] == 64 << 20
    assert image.stat().st_size == 64 << 20  # the user's image itself was never used
    r = bb("bench", "--probe", "/bin/probe", "--probe-root", str(tree), "--device",
           str(tmp_path))
    assert r.returncode == 64 and "needs a testbed or slowdisk" in one_line_error(r)


def test_study_files(tmp_path: Path, state_dir: Path) -> None:
    study = tmp_path / "s.toml"
    study.write_text('probe = "/bin/true"\ntrials = 1\nscheduler = ["bfq"]\n'
                     'device = "testbed:256M"\nsettle = 0.2\n')
    r, s = bench(tmp_path, "--study", str(study), "--trials", "2")  # the command line wins
    assert r.returncode == 0, r.err
    run = s.runs()[0]
    assert run.config["trials"] == 2 and run.config["probes"] == ["/bin/true"]
    assert run.environment["study"]["text"] == study.read_text()
    bad = tmp_path / "bad.toml"
    bad.write_text('probe = "/bin/true"\nwarp = 9\n')
    r = bb("bench", "--study", str(bad))
    assert r.returncode == 64 and "unknown key 'warp'" in one_line_error(r)
    bad.write_text('trials = "many"\n')
    r = bb("bench", "--study", str(bad))
    assert r.returncode == 64 and "'trials' must be a whole number" in one_line_error(r)


def test_until_decided_on_a_real_testbed(tmp_path: Path, state_dir: Path) -> None:
    """A study file's budget runs the sequential loop on a real testbed: three trials per
    cell cannot decide anything at 95%, so every cell stops on max-runs, the run records
    why, and the report says which budget left the loaded cell undecided, with the method
    of its interval."""
    study = tmp_path / "s.toml"
    study.write_text('probe = "/bin/true"\nmin-runs = 2\nmax-runs = 3\n')
    r, s = bench(tmp_path, "--study", str(study), "--load", "cmd:'sleep 100'")
    assert r.returncode == 0, r.err
    assert "2\u20133 trials until decided (the band a person notices)" in r.err
    run = s.runs()[0]
    assert set(run.environment["stopping"].values()) == {"max-runs"}
    counted = [t for t in s.trials() if not t["warmup"]]
    assert len(counted) == 2 * 3
    page = (tmp_path / "r.html").read_text()  # the terminal table wraps its columns
    assert re.search(r"undecided at \u00b1[\d.]+% when --max-runs ran out after 3 trials",
                     page)
    assert "95% paired sequential CI" in page


def test_loads_that_do_not_fit_beside_the_probes_files_are_refused_before_fio(
        tmp_path: Path, state_dir: Path) -> None:
    """plan() checks only the loads (the probe's files are not found yet); with the whole
    testbed counted as room (USABLE_FRACTION 1) it lets this through; then
    the run-time check (after the probe's files are laid out, before any load file) refuses
    with one line, 64, and the size that would fit, where fio used to fail with "No space
    left on device". Nothing is left behind."""
    db = tmp_path / "r.db"
    code = (f"import sys; {SMALL}; from backburner.bench import room; "
            "room.USABLE_FRACTION = 1.0; "
            "from backburner.cli import main; sys.exit(main())")
    import subprocess

    r = subprocess.run([sys.executable, "-c", code, "bench", "--device", "testbed:512M",
                        "--scheduler", "bfq", "--probe", "/bin/true", "--load",
                        "readers:15:seq", "--trials", "1", "-o", str(db)],
                       capture_output=True, timeout=300, text=True, stdin=subprocess.DEVNULL)
    assert r.returncode == 64, r.stderr
    line = r.stderr.splitlines()[-1]  # (after the run's header line)
    assert "the loads' files need 480 MiB but testbed:512M has" in line
    assert "left beside the probe's" in line and "testbed:1G" in line
    assert "Traceback" not in r.stderr and not db.exists()


def test_trace_records_counters_and_who_did_the_io(tmp_path: Path, state_dir: Path) -> None:
    # a start that lasts, after a settle that lets the reader get going beside the whole
    # suite: in /bin/true's few milliseconds BFQ can serve the weight-raised probe alone
    # (no request of the reader's: once in three runs alone), and after the helper's 0.3 s
    # settle fio may not have started reading yet on a busy machine (seen in the suite)
    r, s = bench(tmp_path, "--probe", "sleep 1", "--load", "readers:1:seq", "--trials",
                 "1", "--trace", "--warmup", "0", "--settle", "2")
    assert r.returncode == 0, r.err
    loaded = _trials(s, load="readers:1:seq")
    extra = loaded[0]["extra"]
    assert "psi_io_some_s" in extra["counters"] and "ctxt" in extra["counters"]
    assert extra["io_by"]["method"] in ("perf", "proc-io")
    assert extra["io_by"]["groups"]["load"]["requests"] > 0, json.dumps(extra["io_by"])


def _static_true() -> bytes:
    """The smallest static x86-64 ELF that exits 0 (exit_group(0)), built here: no compiler
    or library is needed inside the prepared root."""
    import platform
    import struct

    if platform.machine() != "x86_64":
        pytest.skip("the hand-made static probe is x86-64 code")
    code = bytes.fromhex("31ff" "b8e7000000" "0f05")  # xor edi,edi; mov eax,231; syscall
    base = 0x400000
    ehdr = struct.pack("<4sBBBBB7sHHIQQQIHHHHHH", b"\x7fELF", 2, 1, 1, 0, 0, b"\0" * 7,
                       2, 62, 1, base + 120, 64, 0, 0, 64, 56, 1, 0, 0, 0)
    phdr = struct.pack("<IIQQQQQQ", 1, 5, 0, base, base, 120 + len(code), 120 + len(code),
                       0x1000)
    return ehdr + phdr + code


def test_an_unreachable_server_falls_back_only_when_asked(tmp_path: Path,
                                                         state_dir: Path) -> None:
    url = "postgresql://bench@/lab?host=/nonexistent-socket-dir&port=1"
    r = bb("bench", "--probe", "/bin/true", "--trials", "1", "--scheduler", "bfq",
           "--device", "testbed:256M", "-o", url, timeout=120)
    assert r.returncode == 69 and "unreachable" in r.err.strip().splitlines()[-1]
    assert "give --fallback FILE.db" in r.err.strip().splitlines()[-1]
    fallback = tmp_path / "local.db"
    r = bb("bench", "--probe", "/bin/true", "--trials", "1", "--scheduler", "bfq",
           "--device", "testbed:256M", "-o", url, "--fallback", str(fallback),
           "--export-json", str(tmp_path / "r.json"), "--export-hyperfine-json",
           str(tmp_path / "h.json"), "--export-html", str(tmp_path / "r.html"), timeout=120)
    assert r.returncode == 0, r.err
    assert "results" in json.loads((tmp_path / "h.json").read_text())  # hyperfine's form
    assert (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")
    assert f"keeping the results in {fallback} instead" in r.err
    assert len(Store.open(str(fallback), readonly=True).trials(include_warmup=True)) == 2
    assert json.loads((tmp_path / "r.json").read_text())["format"] == "backburner-results"


def test_weight_raising_time(tmp_path: Path) -> None:
    from backburner.bench.devices import BFQ_WR_MAX_S, weight_raising_s

    iosched = tmp_path / "queue" / "iosched"
    iosched.mkdir(parents=True)
    (iosched / "low_latency").write_text("1\n")
    queue = str(tmp_path / "queue")
    assert weight_raising_s(queue, "mq-deadline") == 0.0
    assert weight_raising_s(queue, "bfq") == BFQ_WR_MAX_S == 25.0  # mainline: no tunable
    (iosched / "wr_max_time").write_text("6000\n")  # a kernel that exports it (ms)
    assert weight_raising_s(queue, "bfq") == 6.0
    (iosched / "low_latency").write_text("0\n")  # no weight raising at all
    assert weight_raising_s(queue, "bfq") == 0.0


def test_a_governed_load_is_put_on_the_back_burner_by_the_daemon(tmp_path: Path,
                                                                 state_dir: Path) -> None:
    """--policy govern: the load starts unprotected and a govern daemon's rule (naming its
    command) gives it the idle IO class; in the default cell it stays as started."""
    seen = tmp_path / "ioclass"
    probe_cmd = f"while :; do ionice -p $$ >> {shlex.quote(str(seen))}; sleep 0.1; done"
    r, s = bench(tmp_path, "--probe", "/bin/true", "--load", f"cmd:'{probe_cmd}'",
                 "--policy", "default", "--policy", "govern", "--trials", "1", "--warmup", "0",
                 "--scheduler", "mq-deadline", "--settle", "0.6", timeout=300)
    assert r.returncode == 0, r.err
    assert {c.cell.policy for c in s.cells()} == {"-", "default", "govern"}
    lines = [ln for ln in seen.read_text().splitlines() if not ln.startswith("==")]
    assert any(ln.startswith("idle") for ln in lines), lines  # governed: idle, by the rule
    assert any(not ln.startswith("idle") for ln in lines), lines  # default: as started


def test_loads_alike_in_60_characters_and_a_quiet_loads_device_bytes(
        tmp_path: Path, state_dir: Path) -> None:
    """Two cmd loads alike in their first 60 characters get a directory each; a load that
    counts nothing is measured by the device's bytes, and those exclude the probe's own."""
    pad = "#" + "x" * 70
    r, s = bench(tmp_path, "--probe", "python3 -c 'import json, email, http.client'",
                 "--load", f"cmd:'sleep 60 {pad}1'", "--load", f"cmd:'sleep 60 {pad}2'",
                 "--trials", "1", "--warmup", "0", "--policy", "default")
    assert r.returncode == 0, r.err
    loaded = [t for t in s.trials(include_warmup=True) if "bulk" in t["extra"]]
    assert len(loaded) == 2
    for t in loaded:
        assert t["extra"]["bulk"]["unit"] == "device bytes"
        probe_bytes = 512 * t["in_blocks"]
        assert probe_bytes > 1 << 20, t  # a cold start that read from the testbed
        assert t["extra"]["bulk"]["units"] < probe_bytes / 4, (t["extra"]["bulk"], probe_bytes)


def test_a_readahead_replay_as_a_setup_variant(tmp_path: Path, state_dir: Path) -> None:
    """A setup variant at work: a pack recorded on an image mounted at one place is
    replayed (--rebase) on the copy of that image the bench starts the probe from; the
    replayed trials' probe then reads (almost) nothing from the device itself."""
    import subprocess

    from backburner import system
    from backburner.bench import probes

    tree = tmp_path / "tree"
    tree.mkdir()
    cat = probes.Probe(("cat", "/dev/null")).resolve()
    probes.install(probes.discover_files(cat, str(tmp_path), timeout=30), str(tree))
    (tree / "data").mkdir()
    names = [f"/data/f{i:03d}" for i in range(150)]
    for i, name in enumerate(names):
        (tree / name.lstrip("/")).write_bytes(bytes([i % 251]) * 24_000)
    image = tmp_path / "app.img"
    subprocess.run(["mkfs.ext4", "-q", "-F", "-d", str(tree), str(image), "64M"], check=True,
                   capture_output=True)
    recorded, pack = tmp_path / "recorded", tmp_path / "app.pack"
    recorded.mkdir()
    with system.Transaction("test-record") as tx:
        loop = tx.apply(system.LoopDevice(str(image), read_only=True))
        tx.apply(system.Mount(loop, str(recorded), "ext4", "ro"))
        r = bb("readahead", "record", "-o", str(pack), "--mount", str(recorded),
               "--drop-caches", "--", "chroot", str(recorded), cat.argv[0], *names, timeout=120)
        assert r.returncode == 0, r.err
    replay = (f"{sys.executable} -m backburner readahead replay --wait --rebase "
              f"{recorded} \"$BACKBURNER_ROOT\" {pack}")
    r, s = bench(tmp_path, "--probe", shlex.join([cat.argv[0], *names]), "--probe-root",
                 str(image), "--setup-variant", f"replay={replay}", "--trials", "3",
                 "--warmup", "0")
    assert r.returncode == 0, r.err
    plain = _trials(s, prepare="none")
    replayed = _trials(s, prepare="replay")
    steps = [t["extra"]["prepare"] for t in replayed]
    assert all(p["status"] == "ok" and p["said"].startswith("replayed ") for p in steps), steps
    read = [t["in_blocks"] for t in plain]
    after_replay = [t["in_blocks"] for t in replayed]
    assert min(read) * 512 > 150 * 24_000  # cold: the data came from the device
    assert max(after_replay) < min(read) / 4, (read, after_replay)


def test_the_throttle_policy_and_a_tunables_variant(tmp_path: Path, state_dir: Path) -> None:
    """--policy background,pause-ms=...: the load's group is paused while the probe's own
    group is stalled, and how is kept with its bulk work; --setup-variant-tune: BFQ's
    tunable written for the variant's cells only, and nothing of either left after."""
    probe = shlex.join([sys.executable, "-I", "-c", "import json, email.parser, http.client,"
                        " asyncio, unittest, xml.dom.minidom, argparse"])
    # a clean-up of empty groups by another program, before every trial: the throttled
    # load's group is made again (seen on a shared machine)
    gone = "rmdir /sys/fs/cgroup/unified/backburner/bench-*-background_pause* || true"
    r, s = bench(tmp_path, "--probe", f"py={probe}", "--load", "readers:2:seq:buffered",
                 "--policy", "default", "--policy",
                 "background,pause-ms=100,min-duty=0.2,stall-ms=5,window-ms=500",
                 "--setup-variant-tune", "si0=bfq:slice_idle=0", "--trials", "2",
                 "--warmup", "0", "--settle", "1.0", "--prepare", gone)
    assert r.returncode == 0, r.err
    assert "was removed behind bench's back: made again" in r.err
    paced = "background,pause-ms=100,min-duty=0.2,stall-ms=5,window-ms=500"
    assert {(c.cell.prepare, c.cell.policy) for c in s.cells()} == {
        (v, p) for v in ("none", "si0") for p in ("-", "default", paced)}
    for t in _trials(s, policy=paced):
        bulk = t["extra"]["bulk"]
        assert bulk["pause_ms"] == 100 and bulk["min_duty"] == 0.2, bulk
        # a pause ends when its 100 ms are up and the thaw is written: on a machine whose
        # CPUs are busy (the suite's workers beside it) the thaw came up to 0.14 s late
        assert bulk["pauses"] >= 1 and 0 < bulk["longest_pause_s"] <= 0.1 + 0.4, bulk
        assert t["extra"]["throttle_during"]["pauses"] >= 1, t["extra"]
        assert "throttle_problems" not in bulk
    for t in _trials(s, policy="default"):
        assert "pauses" not in t["extra"]["bulk"]
        assert t["extra"]["bulk_during"]["seconds"] > 0
    tuned = _trials(s, prepare="si0")
    assert tuned and all(t["extra"]["tunables"] == {"slice_idle": "0"} for t in tuned)
    assert not any("tunables" in t["extra"] for t in _trials(s, prepare="none"))
    facts = s.runs()[0].environment["device"]
    assert facts["queue"]["bfq"]["bfq"]["slice_idle"] == "8"  # as selected, before any cell
    assert set(facts["throttle_cgroups"]["loads"]) == {paced}


def test_flush_behind_writes_back_a_loads_files_as_its_writers_close_them(
        tmp_path: Path, state_dir: Path) -> None:
    """--policy io=idle,flush-behind on bench's path (the load's tree, the testbed's
    filesystem): every file the load writes is written back by bench's thread and counted
    with the load's bulk work; the unprotected cell has no such count."""
    writer = ("cmd:'i=0; while :; do i=$((i+1)); head -c 262144 /dev/urandom > f$((i % 8)); "
              "echo 1 >> \"$BACKBURNER_PROGRESS\"; sleep 0.05; done'")
    py = shlex.join([sys.executable, "-I", "-c", "import json, email.parser"])
    r, s = bench(tmp_path, "--probe", f"py={py}", "--load", writer, "--policy", "default",
                 "--policy", "io=idle,flush-behind", "--trials", "2", "--warmup", "0",
                 "--settle", "1.0")
    assert r.returncode == 0, r.err
    flushed = [t["extra"]["bulk"] for t in _trials(s, policy="io=idle,flush-behind")]
    # a round writes one file by `head` and appends to the progress file: both the load's
    assert flushed and all(b["flushed_files"] >= b["units"] >= 1 and "flush_problems" not in b
                           for b in flushed), flushed
    assert not any("flushed_files" in t["extra"]["bulk"]
                   for t in _trials(s, policy="default")), "flush-behind in the plain cell"
