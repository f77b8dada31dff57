"""Fuzzing the command line and the result databases: whatever is typed or stored, the answer
is one line on stderr and a documented exit status, never a traceback.

The cases run in one child process (not one per case, to stay fast), which calls the CLI's
`main` for each and reports its status and stderr. In that child every action that would
change the machine is replaced by a sentinel that raises `WouldRun`: a case that passes
all validation is reported as such instead of building a testbed.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import make_db

from backburner.base import errors

#: sysexits, and 125: `run`'s own failures (its job's statuses are the job's)
DOCUMENTED = set(errors.EXIT_STATUSES.values()) - {70} | {0, 125}

DRIVER = r'''
import io, json, os, sys, contextlib, tempfile
from backburner import cli, system
from backburner.run import job
from backburner.bench import runner
from backburner.net import background, service
from backburner.slowdisk import device

class WouldRun(BaseException):  # not an Exception: run reports any of those as its own (125)
    pass

def stop(*a, **k):
    raise WouldRun()

runner.preflight = stop                 # bench: every check passed, nothing built
job.run_job = stop                      # run
job.reprioritise = stop                 # run --pid
device.create = stop                    # slowdisk create
device.remove = stop
system.restore_stale = stop             # restore
background.require_kernel = stop        # run --net: its kernel probes change the machine
background.require_net_cls = stop
service.serve = stop                    # govern net
results = []
for argv in json.load(open(sys.argv[1])):
    err = io.StringIO()
    out = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            status = cli.main(argv)
    except WouldRun:
        status = "would-run"
    except SystemExit as e:
        status = e.code if isinstance(e.code, int) else 0
    except BaseException as e:
        import traceback
        status = "exception"
        err.write(traceback.format_exc())
    results.append({"argv": argv, "status": status, "err": err.getvalue(),
                    "out": out.getvalue()})
json.dump(results, open(sys.argv[2], "w"))
'''


def run_cases(tmp_path: Path, cases: list[list[str]]) -> list[dict]:
    src, dst = tmp_path / "cases.json", tmp_path / "results.json"
    src.write_text(json.dumps(cases))
    r = subprocess.run([sys.executable, "-c", DRIVER, str(src), str(dst)], cwd=tmp_path,
                       capture_output=True, timeout=600,
                       env={"BACKBURNER_STATE_DIR": str(tmp_path / "state"),
                            "PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "COLUMNS": "120"})
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    return json.loads(dst.read_text())


def check(results: list[dict], allowed: set[int | str]) -> None:
    bad = []
    for res in results:
        status, err = res["status"], res["err"]
        lines = err.strip().splitlines()
        if "Traceback" in err or status not in allowed:
            bad.append((res["argv"], status, err[-500:]))
        elif status not in (0, "would-run") and (
                len(lines) != 1 or not lines[0].startswith("backburner: ")):
            bad.append((res["argv"], status, "not one line: " + err[-500:]))
    assert bad == []


NUMBERS = ["", "0", "-1", "1e999", "inf", "-inf", "nan", "NaN", "9" * 40, "1e-400", "0x10",
           "\u00bd", "\uff11", " 5 ", "5G", "-0", "1.5", "2147483648", "-9" * 30]
STRINGS = ["", " ", "a|b", "../../etc/passwd", "postgresql://u@h/db", "x" * 3000, "\U0001f4a5",
           "-", "--", "none", "readers:0:seq", "readers:99999:seq", "cmd:", "testbed:",
           "slowdisk:::", "io=idle,cpu=", "be:9", "rt:-1", "nice:99", "batch:x", "'unclosed",
           "\\", "$(reboot)", "%s%n", "\n", "bfq\nnone"]
#: rates at and past what tc takes, and with what a shell leaves in a value
RATES = ["8kbit", "10gbit", "7999bit", "8400bit", "19999bit", "10.1gbit", "1mbit\n",
         "1mbit ", "99999999999999999999gbit", "9" * 400 + "gbit", "18446744073709551615bit"]
LINKS = ["1mbit:10001ms", "1mbit:0ms:10001ms", "10gbit:0ms:5000ms", "1mbit:0ms\n",
         "1mbit:0ms:300ms:", ":0ms", "1mbit::300ms"]
OPTIONS = {
    "bench": (["--probe", "/bin/true"], {
        "--trials": NUMBERS, "--settle": NUMBERS, "--timeout": NUMBERS,
        "--abort-factor": NUMBERS, "--seed": NUMBERS, "--rotational": NUMBERS,
        "--load": STRINGS, "--policy": STRINGS, "--scheduler": STRINGS, "--device": STRINGS,
        "--probe": STRINGS, "--ready-line": STRINGS, "--output": STRINGS, "--preset": STRINGS,
        "--resume": STRINGS, "--net-link": STRINGS + ["1mbit:0ms", "0mbit:0ms", "1mbit:-1ms",
                                                      "1mbit:0ms:0ms", "1e9gbit:0ms"]
        + [f"{rate}:0ms" for rate in RATES] + LINKS}),
    "run": ([], {"--io": STRINGS, "--cpu": STRINGS, "--io-weight": NUMBERS,
                 "--cpu-weight": NUMBERS, "--policy": STRINGS, "--pid": NUMBERS,
                 "--net": STRINGS + ["background"]}),
    "run --net background": ([], {"--net-dev": STRINGS + ["lo"], "--netns": STRINGS,
                                  "--net-uplink": STRINGS + RATES}),
    "govern net": ([], {"--dev": STRINGS + ["lo"], "--netns": STRINGS,
                        "--uplink": STRINGS + RATES}),
    "report": (["DB"], {"--tolerance": NUMBERS, "--format": STRINGS, "--plot-format": STRINGS,
                        "--plot": ["plots/sub", "x" * 300, "r.db"]}),
    "compare": (["DB", "DB"], {"--tolerance": NUMBERS}),
    "slowdisk create": (["IMG", "--profile", "flat:1"], {
        "--size": NUMBERS + ["1e30G", "99999999999T", "4096T"], "--profile": STRINGS,
        "--scheduler": STRINGS}),
    "slowdisk stats": ([], {}),
}


def _cli_cases(db: str, img: str, n: int, seed: int) -> list[list[str]]:
    rng = random.Random(seed)
    cases = []
    for command, (base, options) in OPTIONS.items():
        base = [db if a == "DB" else img if a == "IMG" else a for a in base]
        for option, values in options.items():
            for value in values:  # every value once, for every option
                argv = [*command.split(), *base, option, value]
                if command.startswith("run") and option != "--pid":
                    argv += ["--", "true"]
                cases.append(argv)
    for _ in range(n):  # and random combinations
        command = rng.choice(list(OPTIONS))
        base, options = OPTIONS[command]
        argv = [*command.split(), *[db if a == "DB" else img if a == "IMG" else a
                                    for a in base]]
        for option in rng.sample(list(options), k=min(3, len(options))):
            argv += [option, rng.choice(options[option])]
        if command.startswith("run") and "--pid" not in argv:
            argv += ["--", "true"]
        cases.append(argv)
    cases += [["slowdisk", "stats", "/dev/" + "loop" * 100], ["slowdisk", "remove", "x"],
              [], ["nonsense"], ["bench"], ["run"], ["run", "--pid", "1"],
              ["run", "--pid", "1", "--io", "idle"], ["restore", "extra"]]
    return cases


def test_every_option_and_value_gets_one_line_and_a_documented_status(tmp_path: Path) -> None:
    db = str(tmp_path / "r.db")
    make_db(db, trials=3)
    cases = _cli_cases(db, str(tmp_path / "img"), n=150, seed=11)
    results = run_cases(tmp_path, cases)
    assert len(results) == len(cases) > 700
    check(results, DOCUMENTED | {"would-run"})
    statuses = {r["status"] for r in results}
    assert {64, "would-run"} <= statuses  # the fuzz reached both refusal and acceptance
    tried = sum(1 for r in results if r["status"] != "would-run")
    print(f"fuzz: {len(results)} command lines, {tried} refused with one line")


# --- damaged databases ------------------------------------------------------------------------

MUTATIONS = [
    "UPDATE meta SET value='abc' WHERE key='schema_version'",
    "UPDATE meta SET value='1.5' WHERE key='schema_version'",
    "DELETE FROM meta",
    "ALTER TABLE trials DROP COLUMN wall_s",
    "ALTER TABLE cells DROP COLUMN policy",
    "DROP TABLE cells",
    "UPDATE trials SET wall_s='text' WHERE id=3",
    "UPDATE trials SET wall_s=9e999 WHERE id=3",
    "UPDATE trials SET wall_s=-9e999 WHERE id=3",
    "UPDATE trials SET wall_s=-1 WHERE id=3",
    "UPDATE trials SET wall_s=1e300 WHERE id=3",
    "UPDATE trials SET extra='{bad json' WHERE id=3",
    "UPDATE trials SET extra='[1, 2]' WHERE id=3",
    "UPDATE runs SET config='not json'",
    "UPDATE runs SET environment='[]'",
    "UPDATE trials SET started_at=1e20 WHERE id=3",
    "UPDATE trials SET ended_at=-1e20 WHERE id=3",
    "UPDATE runs SET started_at='yesterday'",
    "UPDATE trials SET status='weird' WHERE id=3",
    "UPDATE trials SET round=-5 WHERE id=3",
    "UPDATE trials SET cold=7 WHERE id=3",
    "UPDATE trials SET warmup='yes' WHERE id=3",
    "UPDATE trials SET load_read_bps=-5 WHERE id=3",
    "UPDATE trials SET in_blocks=9e999 WHERE id=3",
    "UPDATE runs SET seed='x'",
    "UPDATE trials SET cell_id=99999 WHERE id=3",
    "DELETE FROM trials",
    "DELETE FROM runs",
    "UPDATE cells SET probe=x'80ff'",
]


def _damaged(tmp_path: Path, name: str, sql: str | None, rng: random.Random) -> str:
    path = tmp_path / name
    make_db(path, trials=3)
    if sql is not None:
        conn = sqlite3.connect(path)
        conn.execute(sql)
        conn.commit()
        conn.close()
    else:  # bytes damaged in the middle of the file
        data = bytearray(path.read_bytes())
        for _ in range(20):
            data[rng.randrange(len(data) // 4, len(data))] = rng.randrange(256)
        path.write_bytes(bytes(data))
    return str(path)


def test_damaged_databases_are_one_line_65_never_a_traceback(tmp_path: Path) -> None:
    rng = random.Random(5)
    good = str(tmp_path / "good.db")
    make_db(good, trials=3)
    dbs = [_damaged(tmp_path, f"m{i}.db", sql, rng) for i, sql in enumerate(MUTATIONS)]
    dbs += [_damaged(tmp_path, f"bytes{i}.db", None, rng) for i in range(8)]
    half = tmp_path / "half.db"
    shutil.copy(good, half)
    half.write_bytes(half.read_bytes()[: half.stat().st_size // 2])
    dbs.append(str(half))
    cases = []
    for db in dbs:
        cases += [["report", db], ["report", db, "--format", "json"],
                  ["report", db, "--format", "csv"], ["report", db, "--export-markdown", "m"],
                  ["report", db, "--export-html", db + ".html"],
                  ["report", db, "--plot", db + ".plots"], ["compare", good, db],
                  ["bench", "--resume", db]]
    results = run_cases(tmp_path, cases)
    check(results, {0, 65, "would-run"})
    by_db = {}
    for res in results:
        by_db.setdefault(res["argv"][-1] if res["argv"][0] != "report" else res["argv"][1],
                         []).append(res["status"])
    refused = [db for db in dbs if 65 in by_db.get(db, [])]
    assert len(refused) >= len(MUTATIONS) - 3  # (a few are harmless: no counted trial lost)
    print(f"fuzz: {len(dbs)} damaged databases, {len(results)} commands")


@pytest.mark.parametrize("sql", [
    "UPDATE trials SET wall_s=-1 WHERE id=3", "UPDATE trials SET wall_s=9e999 WHERE id=3"])
def test_impossible_times_are_damage_not_medians(tmp_path: Path, sql: str) -> None:
    db = _damaged(tmp_path, "d.db", sql, random.Random(1))
    results = run_cases(tmp_path, [["report", db]])
    assert results[0]["status"] == 65
    assert "trial 3: wall_s is" in results[0]["err"]


def test_a_damaged_stored_configuration_is_65_on_resume(tmp_path: Path) -> None:
    """`bench --resume` rebuilds the run from its stored configuration: a value of the wrong
    type there is one line naming the field, not a traceback (or "python3" read as seven
    one-letter probes)."""
    from backburner.bench.config import BenchConfig

    good = BenchConfig(probes=["/bin/true"], loads=["none"], policies=["default"],
                       schedulers=["none"], device="testbed:64M", trials=1).to_dict()
    damage = {"good": {}, "trials": {"trials": "8"}, "loads": {"loads": [1]},
              "probes": {"probes": "python3"}, "cold": {"cold": "no"},
              "timeout_s": {"timeout_s": [60]}}
    cases = []
    for name, change in damage.items():
        db = tmp_path / f"{name}.db"
        make_db(db, trials=1)
        conn = sqlite3.connect(db)
        conn.execute("UPDATE runs SET config=?", (json.dumps({**good, **change}),))
        conn.commit()
        conn.close()
        cases.append(["bench", "--resume", str(db)])
    results = run_cases(tmp_path, cases)
    check(results, {65, 77, "would-run"})
    good_result, *damaged = results
    assert good_result["status"] in (77, "would-run"), good_result  # nothing refused by it
    for (name, _), res in zip(list(damage.items())[1:], damaged, strict=True):
        assert res["status"] == 65 and f"is damaged: {name} is " in res["err"], res


# --- study files --------------------------------------------------------------------------

#: TOML values of every type, for any key of a study file
TOML_VALUES = ["1", "-1", "0", "1.5", "inf", "nan", "-0.0", "true", "[]", "[1, 2]",
               '["a", 1]', "{a = 1}", '[["x"]]', "1979-05-27", "9" * 40]


def _toml_string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def test_every_study_key_and_value_gets_one_line_and_a_documented_status(
        tmp_path: Path) -> None:
    """`bench --study FILE` with each key given every hostile string and every TOML type,
    a network study's keys first: one line and a documented status, or a run that passed
    every check; then files that are not TOML at all."""
    keys = ["net-link", "probe", "load", "policy", "device", "scheduler", "trials",
            "timeout", "max-time", "setup-variant", "shell", "preset"]
    fine = ["1mbit:0ms", "8kbit:0ms:1ms", "net:page", "download:4", "background", "default"]
    values = [_toml_string(v) for v in STRINGS + RATES + LINKS + fine] + TOML_VALUES
    net = 'net-link = "1mbit:0ms"\nprobe = "net:page"\n'
    bodies = [f"{key} = {value}\n" for key in keys for value in values]
    bodies += [net + f"{key} = {value}\n" for key in ("load", "policy", "trials")
               for value in values]
    bodies += [net + "net-link = \"2mbit:0ms\"\n", "net-link = \"1mbit:0ms\"\n[x]\ny = 1\n",
               "a" * 5000, "\x00\xff", "= 1\n", "[[probe]]\n", "probe = " + "[" * 200]
    cases = []
    for i, body in enumerate(bodies):
        path = tmp_path / f"s{i}.toml"
        path.write_text(body)
        cases.append(["bench", "--study", str(path), "-o", str(tmp_path / f"s{i}.db")])
    results = run_cases(tmp_path, cases)
    check(results, DOCUMENTED | {"would-run"})
    statuses = {r["status"] for r in results}
    assert {64, "would-run"} <= statuses
    print(f"fuzz: {len(results)} study files, "
          f"{sum(r['status'] != 'would-run' for r in results)} refused with one line")


# --- database addresses holding a password ------------------------------------------------

#: addresses with a password libpq sees, one it cannot parse, and one it takes for a host
#: and a port (a '/' in the password): each holds "s3cret", which no message may show
SECRET_ADDRESSES = [
    "postgresql://bench:s3cret@db.lab/bb", "postgresql://u:s3cret@[::1/db",
    "postgres://u:pa%zzs3cret@h/db", "postgresql://u@h/db?password=s3cret&broken",
    "postgresql://u@/db?sslpassword=s3cret&host=/nonexistent-socket-dir",
    "postgresql://u:4321/s3cret@/db?host=/nonexistent-socket-dir",
    "postgresql:/u:s3cret@h/db"]
ADDRESS_FORMS = [["report", "X"], ["compare", "X", "GOOD"], ["compare", "GOOD", "X"],
                 ["compare", "X", "--by", "machine"], ["store", "copy", "GOOD", "X"],
                 ["store", "copy", "X", "NEW"], ["bench", "--resume", "X"],
                 ["bench", "--probe", "/bin/true", "--output", "X"]]


def test_no_message_shows_the_password_of_a_database_address(tmp_path: Path) -> None:
    good = str(tmp_path / "good.db")
    make_db(good, trials=1)
    cases = [[url if a == "X" else good if a == "GOOD" else str(tmp_path / "new.db")
              if a == "NEW" else a for a in form]
             for url in SECRET_ADDRESSES for form in ADDRESS_FORMS]
    results = run_cases(tmp_path, cases)
    check(results, DOCUMENTED - {0} | {"would-run"})
    shown = [(r["argv"], r["err"] + r["out"]) for r in results
             if "s3cret" in r["err"] + r["out"]]
    assert shown == []
    assert not (tmp_path / "new.db").exists()



#: where a result database is named, and what is not one: standard input, empty or foreign
#: addresses, a server that is not there, a mistyped address
DB_ARGUMENTS = [["report", "X"], ["compare", "X", "GOOD"], ["compare", "GOOD", "X"],
                ["store", "copy", "X", "GOOD"], ["store", "copy", "GOOD", "X"],
                ["bench", "--resume", "X"]]
NOT_DATABASES = ["-", "postgresql://", "postgres://?host=/nonexistent-socket-dir",
                 "postgresql://u@/db?host=/nonexistent-socket-dir&port=1", "mysql://h/db",
                 "file:///etc/passwd", "sqlite:///x.db", "postgresql:h/db", "postgres:",
                 "postgresql://h/db?nosuchoption=1"]


def test_every_database_argument_refuses_dash_and_non_addresses_in_one_line(
        tmp_path: Path) -> None:
    """"-" is no database (it cannot be one: SQLite needs a file) and is never created as
    a file of that name; neither is a mistyped address."""
    good = str(tmp_path / "good.db")
    make_db(good, trials=1)
    cases = [[x if a == "X" else good if a == "GOOD" else a for a in form]
             for x in NOT_DATABASES for form in DB_ARGUMENTS]
    results = run_cases(tmp_path, cases)
    check(results, DOCUMENTED - {0})
    made = {p.name for p in tmp_path.iterdir()} - {"cases.json", "results.json", "state"}
    assert made == {"good.db"}


# --- special files as inputs and outputs ------------------------------------------------------

SPECIAL_DRIVER = r'''
import contextlib, io, json, signal, sys
from backburner import cli

class Hung(Exception):
    pass

def alarm(*_):
    raise Hung()

signal.signal(signal.SIGALRM, alarm)
results = []
for argv in json.load(open(sys.argv[1])):
    err, out = io.StringIO(), io.StringIO()
    signal.alarm(10)
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            status = cli.main(argv)
    except Hung:
        status = "hung"
    except SystemExit as e:
        status = e.code if isinstance(e.code, int) else 0
    except BaseException:
        import traceback
        status = "exception"
        err.write(traceback.format_exc())
    finally:
        signal.alarm(0)
    results.append({"argv": argv, "status": status, "err": err.getvalue()})
json.dump(results, open(sys.argv[2], "w"))
'''

#: every command that reads a file the user names, with X where that file goes
FILE_INPUTS = [["readahead", "show", "X"], ["readahead", "replay", "X"],
               ["layout", "order", "--emit", "list", "X"],
               ["layout", "check", "--pack", "X", "/"],
               ["trace", "show", "X"], ["trace", "diff", "X", "X"],
               ["extents", "show", "X"], ["extents", "map", "--dm-table", "X"],
               ["extents", "check", "X"], ["report", "X"], ["compare", "X", "X"],
               ["store", "copy", "X", "GOOD"], ["store", "copy", "GOOD", "X"],
               ["bench", "--study", "X"]]


def _specials(tmp_path: Path) -> dict[str, str]:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "dir").mkdir()
    shared = tmp_path / "shared"  # a world-writable sticky directory, as /tmp
    shared.mkdir(mode=0o1777)
    shared.chmod(0o1777)
    (shared / "planted").symlink_to("/dev/zero")
    with open(tmp_path / "sparse", "wb") as f:  # 20 GiB of nothing: read whole, a hang
        f.truncate(20 << 30)
    return {"fifo": str(fifo), "dev-zero": "/dev/zero", "directory": str(tmp_path / "dir"),
            "planted-symlink": str(shared / "planted"), "sparse-20G": str(tmp_path / "sparse")}


@pytest.mark.timeout(600)
def test_every_file_argument_refuses_special_files_in_one_line(tmp_path: Path) -> None:
    """A FIFO, a device, a directory or a symlink to one, given where a pack, trace, map or
    database goes: one line and a documented status, never a hang or a read without end."""
    good = str(tmp_path / "good.db")
    make_db(good, trials=1)
    cases = []
    for kind, path in _specials(tmp_path).items():
        for form in FILE_INPUTS:
            if kind == "sparse-20G" and form[:2] == ["extents", "show"]:
                continue  # the file whose extents are shown, not data read: any size is one
            cases.append([path if a == "X" else good if a == "GOOD" else a for a in form])
    src, dst = tmp_path / "cases.json", tmp_path / "results.json"
    src.write_text(json.dumps(cases))
    r = subprocess.run([sys.executable, "-c", SPECIAL_DRIVER, str(src), str(dst)],
                       cwd=tmp_path, capture_output=True, timeout=580,
                       env={"BACKBURNER_STATE_DIR": str(tmp_path / "state"),
                            "PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "COLUMNS": "120"})
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    results = json.loads(dst.read_text())
    check(results, DOCUMENTED - {0})
    assert stat.S_ISFIFO(os.lstat(tmp_path / "fifo").st_mode)


@pytest.mark.root
@pytest.mark.parametrize("form", [
    ["readahead", "record", "-o", "X", "--", "true"],
    ["extents", "save", "--force", "-o", "X", "F"],
    ["report", "GOOD", "--export-json", "X"], ["layout", "order", "P", "--emit", "list",
                                                 "-o", "X"]])
def test_an_output_on_a_device_node_is_refused_and_the_node_kept(
        tmp_path: Path, form: list[str]) -> None:
    null = os.stat("/dev/null")
    dev = tmp_path / "null"
    os.mknod(dev, stat.S_IFCHR | 0o666, null.st_rdev)
    good = tmp_path / "good.db"
    make_db(good, trials=1)
    data = tmp_path / "data"
    data.write_bytes(os.urandom(1 << 16))
    pack = tmp_path / "p.pack"
    if "P" in form:
        from backburner.readahead import packfile
        from backburner.readahead.pack import Pack

        packfile.save(pack, Pack(entries=()))
    argv = [str(dev) if a == "X" else str(good) if a == "GOOD" else str(data) if a == "F"
            else str(pack) if a == "P" else a for a in form]
    r = subprocess.run([sys.executable, "-m", "backburner", *argv], capture_output=True,
                       timeout=120, cwd=tmp_path,
                       env={**os.environ, "BACKBURNER_STATE_DIR": str(tmp_path / "state")})
    assert r.returncode == 73, r.stderr.decode()
    assert "is a character device: output goes to regular files only" in r.stderr.decode()
    st = os.lstat(dev)
    assert stat.S_ISCHR(st.st_mode) and st.st_rdev == null.st_rdev
