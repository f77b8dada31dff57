"""The CLI's own duties, as a real subprocess: errors mapped to one line and an exit status,
--debug only where it belongs, options validated before anything is printed, and `bench`'s
option handling (now in bench.runner) and --resume rules."""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import ENV, bb, make_db, one_line_error

from backburner import cli
from backburner.base import errors, interrupts
from backburner.base.errors import ExistsError
from backburner.bench import config, runner
from backburner.cli import build_parser
from backburner.run import job
from backburner.store import Store


@pytest.fixture
def db(tmp_path: Path) -> str:
    path = str(tmp_path / "r.db")
    make_db(path, trials=4)
    return path


# --- run's own failures: 125, whatever their kind ------------------------------------------


@pytest.mark.parametrize("args, command", [
    (["run", "--", "ls"], "run"), (["--debug", "run", "ls"], "run"), (["report", "x"], "report"),
    (["--", "run"], None), ([], None), (["-V"], None)])
def test_the_command_word(args: list[str], command: str | None) -> None:
    assert cli.command_of(args) == command


@pytest.mark.parametrize("failure, status", [
    (errors.UnavailableError("no io controller"), 125), (errors.NotRootError("x"), 125),
    (OSError(5, "Input/output error"), 125), (RuntimeError("a bug"), 125),
    (errors.CommandNotFound("x: command not found"), 127),
    (errors.CommandNotExecutable("x: cannot execute"), 126)])
def test_runs_own_failures_are_125_and_the_jobs_exec_errors_126_127(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        failure: BaseException, status: int) -> None:
    def fail(*_args: object, **_kw: object) -> None:
        raise failure

    monkeypatch.setattr(job, "run_job", fail)
    monkeypatch.setattr(interrupts, "install", lambda: None)  # pytest keeps its handlers
    assert cli.main(["run", "--", "true"]) == status
    err = capsys.readouterr().err
    if isinstance(failure, RuntimeError):  # a bug is told as one, with its traceback
        assert "Traceback" in err and "RuntimeError: a bug" in err
    else:
        assert len(err.strip().splitlines()) == 1


def test_other_commands_keep_sysexits(monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["policies", "--bogus"]) == 64
    assert cli.main(["restore", "--pid", "x"]) == 64


# --- OS and SQLite errors: one line, not a traceback ------------------------------------------


def test_the_readme_documents_every_exit_status() -> None:
    """The README's table of statuses is the error family's, no more and no less."""
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    table = readme[readme.index("| status | meaning |"):].split("\n\n", 1)[0]
    documented = {int(m) for m in re.findall(r"^\| (\d+)\b", table, re.M)}
    documented |= {int(m) for m in re.findall(r"^\| \d+ / (\d+)\b", table, re.M)}
    assert documented == set(errors.EXIT_STATUSES.values()) - {70} | {cli.RUN_OWN_FAILURE}


@pytest.mark.parametrize("args", [["--export-html", "/nonexistent/x.html"],
                                  ["--export-csv", "/nonexistent/x.csv"]])
def test_unwritable_output_is_one_line_74(db: str, args: list[str]) -> None:
    r = bb("report", db, *args)
    assert r.returncode == 74, r.err
    line = one_line_error(r)
    target = args[-1]
    assert line == f"backburner: {target}: No such file or directory"


def test_debug_before_the_command_shows_the_traceback_and_keeps_the_status(db: str) -> None:
    """--debug adds the traceback; the status stays the one the error has (a run's 125
    must not become a 1 that reads like the job's own)."""
    r = bb("--debug", "report", db, "--export-html", "/nonexistent/x.html")
    assert r.returncode == 74, r.err
    assert "Traceback" in r.err and "IOFailure: /nonexistent/x.html" in r.err
    assert r.err.endswith("backburner: /nonexistent/x.html: No such file or directory\n")
    assert "matplotlib" not in r.err  # our debug logging only, not every library's
    r = bb("--debug", "run", "--io", "bogus", "--", "true")
    assert r.returncode == 125 and "Traceback" in r.err, r.err


def test_a_jobs_own_debug_argument_is_not_ours() -> None:
    r = bb("run", "--", "true", "--debug")
    assert r.returncode == 0, r.err
    assert r.err == ""  # no debug logging switched on by the job's argument
    r = bb("--debug", "run", "--", "true")
    assert r.returncode == 0, r.err
    assert "launched" in r.err  # ours, before the command: debug logging is on


def test_sqlite_error_is_a_data_error_65(tmp_path: Path) -> None:
    path = tmp_path / "half.db"
    conn = sqlite3.connect(path)  # ours by its meta table, but without the other tables
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.executemany("INSERT INTO meta VALUES (?, ?)",
                     [("schema_version", "1"), ("application", "backburner")])
    conn.commit()
    conn.close()
    r = bb("report", str(path))
    assert r.returncode == 65, r.err
    assert "has no table runs" in one_line_error(r)


# --- validation before anything is printed ----------------------------------------------------


@pytest.mark.parametrize("value", ["0", "1", "1.5", "-0.1", "nan", "ten"])
def test_tolerance_must_be_a_fraction(db: str, value: str) -> None:
    for args in (["report", db], ["compare", db, db]):
        r = bb(*args, "--tolerance", value)
        assert r.returncode == 64, r.err
        assert "--tolerance" in one_line_error(r)
        assert r.out == ""


def test_tolerance_in_range_is_accepted(db: str) -> None:
    r = bb("report", db, "--tolerance", "0.2", "--format", "json")
    assert r.returncode == 0, r.err


@pytest.mark.parametrize("fmt", ["bogus", "png,jpgg"])
def test_unknown_plot_format_fails_before_the_table(db: str, tmp_path: Path, fmt: str) -> None:
    r = bb("report", db, "--plot", str(tmp_path / "plots"), "--plot-format", fmt)
    assert r.returncode == 64, r.err
    line = one_line_error(r)
    assert "unknown plot format" in line and "png,svg,pdf" in line
    assert r.out == ""  # the table was not printed first
    assert not (tmp_path / "plots").exists()


#: `python -m backburner` on a machine without matplotlib (the rest of the report extra there)
WITHOUT_MATPLOTLIB = """
import sys

class NoMatplotlib:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] == "matplotlib":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

sys.meta_path.insert(0, NoMatplotlib())
from backburner.entry import main
sys.exit(main())
"""


def _without_matplotlib(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", WITHOUT_MATPLOTLIB, *args],
                          capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.parametrize("args", [["--format", "csv"], ["--json"],
                                  ["--format", "markdown"], [], ["--recommend"]])
def test_only_what_draws_needs_matplotlib(db: str, args: list[str]) -> None:
    r = _without_matplotlib("report", db, *args)
    assert r.returncode == 0, r.stderr
    assert r.stdout and "matplotlib" not in r.stderr
    r = _without_matplotlib("compare", db, db)
    assert r.returncode == 0 and "no change" in r.stdout, r.stderr


@pytest.mark.parametrize("args", [["--export-html", "r.html"], ["--plot", "plots"]])
def test_drawing_without_matplotlib_is_one_line_before_anything(db: str, tmp_path: Path,
                                                               args: list[str]) -> None:
    r = _without_matplotlib("report", db, args[0], str(tmp_path / args[1]))
    assert r.returncode == errors.UnavailableError.exit_status, r.stderr
    assert r.stderr.splitlines() == [
        "backburner: this command needs matplotlib, which is not installed; install the "
        "report extra: pip install 'backburner[report]'"]
    assert r.stdout == "" and os.listdir(tmp_path) == ["r.db"]


def test_cold_and_warm_together_64(tmp_path: Path) -> None:
    r = bb("bench", "--probe", "/bin/true", "--cold", "--warm", "-o", str(tmp_path / "r.db"))
    assert r.returncode == 64, r.err
    assert "--cold" in one_line_error(r)
    assert not (tmp_path / "r.db").exists()


def test_no_html_and_export_html_together_64(tmp_path: Path) -> None:
    r = bb("bench", "--probe", "/bin/true", "--no-html", "--export-html",
           str(tmp_path / "r.html"), "-o", str(tmp_path / "r.db"))
    assert r.returncode == 64 and r.stdout == b""
    assert "--no-html and --export-html" in one_line_error(r)
    assert os.listdir(tmp_path) == []


@pytest.mark.root
def test_no_html_leaves_the_database_alone(tmp_path: Path, state_dir: Path) -> None:
    """No report page next to the database; the terminal report is still printed."""
    r = bb("bench", "--probe", "/bin/true", "--device", "testbed:64M", "--trials", "1",
           "-w", "0", "--scheduler", "mq-deadline", "--no-html", "-o", str(tmp_path / "out.db"),
           timeout=120)
    assert r.returncode == 0, r.err
    assert sorted(p.name for p in tmp_path.glob("out.*")) == ["out.db"]
    assert "mq-deadline" in r.out and "report:" not in r.out


def test_the_old_matrix_spelling_of_prepare_is_refused_with_a_hint(tmp_path: Path) -> None:
    r = bb("bench", "--probe", "/bin/true", "--prepare", "replay=backburner readahead replay p",
           "-o", str(tmp_path / "r.db"))
    assert r.returncode == 64 and r.stdout == b""
    line = one_line_error(r)
    assert "now --setup-variant NAME=COMMAND" in line
    assert not (tmp_path / "r.db").exists()


def _bench_args(*args: str) -> argparse.Namespace:
    return cli.build_parser().parse_args(["bench", "--probe", "/bin/true", *args])


def test_hyperfines_prepare_and_shell_options(capsys: pytest.CaptureFixture[str]) -> None:
    args = _bench_args("-p", "sync", "--prepare", "true", "-N")
    assert (args.prepare, args.shell) == (["sync", "true"], "none")
    assert _bench_args("--shell=none").shell == "none"
    assert _bench_args("-S", "bash --norc").shell == "bash --norc"
    assert _bench_args().shell is None  # the configuration's default, sh
    args = _bench_args("--setup-variant", "r=true", "--setup-variant-during", "b=true")
    assert (args.setup_variant, args.setup_variant_during) == (["r=true"], ["b=true"])
    assert capsys.readouterr().err == ""


def test_the_old_during_spelling_works_with_one_note(capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from backburner.cli import common

    monkeypatch.setattr(common, "_NOTED", set())
    args = _bench_args("--prepare-during", "a=true", "--prepare-during", "b=true")
    assert args.setup_variant_during == ["a=true", "b=true"]
    err = capsys.readouterr().err
    assert err == "backburner: --prepare-during is deprecated; use --setup-variant-during\n"
    assert "--prepare-during" not in cli.build_parser().format_help()


def test_prepare_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    existing = tmp_path / "r.db"
    existing.write_text("precious")
    with pytest.raises(ExistsError, match="never overwritten"):
        runner.prepare_output(str(existing))
    assert existing.read_text() == "precious"
    assert runner.prepare_output(str(tmp_path / "a" / "b.db")) == str(tmp_path / "a" / "b.db")
    assert (tmp_path / "a").is_dir()
    monkeypatch.chdir(tmp_path)
    path = runner.prepare_output(None)
    assert path == runner.default_output() or path.startswith("results/bench-")
    assert path.endswith(".db") and (tmp_path / "results").is_dir()


# --- --resume ---------------------------------------------------------------------------------


@pytest.mark.parametrize("extra", [["--load", "readers:1:seq"], ["--policy", "background"],
                                   ["--scheduler", "bfq"], ["--device", "testbed:1G"],
                                   ["--trials", "3"], ["--probe", "/bin/true"],
                                   ["--preset", "quick"], ["--seed", "1"], ["--warm"],
                                   ["--prepare", "sync"], ["--setup-variant", "v=true"],
                                   ["--shell", "none"], ["--net-link", "1mbit:0ms"]])
def test_resume_with_matrix_options_64(db: str, extra: list[str]) -> None:
    r = bb("bench", "--resume", db, *extra)
    assert r.returncode == 64, r.err
    line = one_line_error(r)
    assert "--resume continues the stored configuration" in line and extra[0] in line


def test_resume_of_a_database_without_a_run_65(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    Store.create(str(path)).close()
    r = bb("bench", "--resume", str(path))
    assert r.returncode == 65, r.err
    assert "no bench run" in one_line_error(r)


def _complete_db(path: Path, *, finish: bool) -> None:
    """Every slot of a run stored, as bench would; its probe does not exist, so any attempt
    to set the run up again (resolve the probe, build a testbed) would fail."""
    cfg = config.BenchConfig(probes=["/nonexistent/probe-xyz"], loads=["none", "cmd:sleep 1"],
                             policies=["default"], schedulers=["bfq"], trials=2, seed=5,
                             device="testbed:64M")
    store = Store.create(str(path))
    run_id = store.add_run("bb test", cfg.to_dict(), cfg.seed, dict(ENV), "0")
    t = 1_700_000_000.0
    for slot in config.plan(cfg, resolve=False).slots():
        c = slot.cell
        cid = store.add_cell(run_id, c)
        wall = 0.1 if c.unloaded else 0.5
        store.add_trial(run_id, cid, round=slot.round, warmup=int(slot.warmup), status="ok",
                        cold=int(not slot.warmup), wall_s=wall, started_at=t, ended_at=t + wall)
        t += 1
    if finish:
        store.finish_run(run_id)
    store.close()


@pytest.mark.parametrize("finished", [True, False])
def test_resume_of_a_complete_run_shows_the_report(tmp_path: Path, state_dir: Path,
                                                   finished: bool) -> None:
    path = tmp_path / "done.db"
    _complete_db(path, finish=finished)
    before = Store.open(str(path), readonly=True).trials(include_warmup=True)
    r = bb("bench", "--resume", str(path))
    assert r.returncode == 0, r.err
    assert "the run is complete (6 trials); nothing to resume" in r.err
    assert "Traceback" not in r.err and "probe-xyz: command not found" not in r.err
    assert "baseline" in r.out and (tmp_path / "done.html").is_file()  # the report
    # it ends with the answer the run was for, and the command that applies it
    last = r.out.rstrip().splitlines()[-2:]
    assert last == ["answer: under cmd:sleep 1 a start of /nonexistent/probe-xyz takes "
                    "0.500 s on bfq + default (5.00\u00d7 its unloaded 0.100 s)",
                    "  $ backburner apply --scheduler bfq   # the IO scheduler, for matching "
                    "disks (a udev rule)"], r.out
    s = Store.open(str(path), readonly=True)
    assert s.trials(include_warmup=True) == before  # nothing added
    assert s.runs()[0].finished_at is not None  # a lost finish time is set
    assert not (state_dir / "work").exists() or not any((state_dir / "work").iterdir())


# --- a full disk ------------------------------------------------------------------------------


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A tiny tmpfs, filled up."""
    import subprocess

    mnt = tmp_path / "full"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k,nosuid,nodev", "tmpfs", str(mnt)],
                   check=True, timeout=30)
    try:
        fd = os.open(mnt / "filler", os.O_WRONLY | os.O_CREAT)
        try:
            while os.write(fd, b"x" * 4096):
                pass
        except OSError:
            pass
        finally:
            os.close(fd)
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=True, timeout=30)


@pytest.mark.root
@pytest.mark.parametrize("args", [["--export-html", "FULL/r.html"],
                                  ["--export-csv", "FULL/r.csv"],
                                  ["--plot", "FULL/plots"]])
def test_a_full_disk_is_74_naming_the_file(db: str, full_disk: Path, args: list[str]) -> None:
    args = [a.replace("FULL", str(full_disk)) for a in args]
    r = bb("report", db, *args)
    assert r.returncode == 74, r.err
    line = one_line_error(r)
    assert str(full_disk) in line and "No space left on device" in line, line


@pytest.mark.root
def test_a_bench_database_on_a_full_disk_is_74(full_disk: Path, state_dir: Path) -> None:
    out = full_disk / "r.db"
    r = bb("bench", "--probe", "/bin/true", "--device", "testbed:64M", "--trials", "1",
           "--scheduler", "bfq", "-o", str(out), timeout=120)
    assert r.returncode == 74, r.err
    assert str(out) in r.err.strip().splitlines()[-1]
    assert not (state_dir / "work").exists() or not list((state_dir / "work").iterdir())


INTERRUPTED_IMPORT = r'''
import os, signal, sys
from backburner import cli, system

def restore_stale(report):  # ^C lands while a C extension initialises (scipy did it)
    try:
        os.kill(os.getpid(), int(sys.argv[1]))
    except BaseException as why:
        raise ImportError("initialization failed") from why
    return []

system.restore_stale = restore_stale
sys.exit(cli.main(["restore"]))
'''


@pytest.mark.root
@pytest.mark.parametrize("sig", [2, 15])
def test_a_signal_that_surfaces_as_another_error_is_still_the_signal(
        tmp_path: Path, sig: int) -> None:
    """An interrupt turned into another exception on its way out (an ImportError from an
    interrupted C initialisation) is reported as the interruption: 128+N, one line."""
    import subprocess
    import sys
    res = subprocess.run([sys.executable, "-c", INTERRUPTED_IMPORT, str(sig)],
                         capture_output=True, text=True, timeout=60,
                         env={**os.environ, "BACKBURNER_STATE_DIR": str(tmp_path / "state")})
    assert res.returncode == 128 + sig, res.stderr
    want = "interrupted" if sig == 2 else "terminated by SIGTERM"
    assert res.stderr == f"backburner: {want}; system state restored\n", res.stderr


# --- the output convention: --format for the terminal, --export-FORMAT FILE, -o --------------


@pytest.mark.parametrize("args", [["--format", "json"], ["--json"]])
def test_report_format_json_goes_to_the_terminal(db: str, args: list[str]) -> None:
    r = bb("report", db, *args)
    assert r.returncode == 0 and r.err == "", r.err
    assert json.loads(r.out)["format"] == "backburner-results"


def test_report_exports_files_and_still_prints_its_table(db: str, tmp_path: Path) -> None:
    files = {fmt: tmp_path / f"r.{fmt}" for fmt in ("json", "csv", "markdown",
                                                     "hyperfine-json", "html")}
    files["json"].write_text("an old export: replaced, as hyperfine's are")
    r = bb("report", db, *[a for fmt, path in files.items()
                           for a in (f"--export-{fmt}", str(path))])
    assert r.returncode == 0 and r.err == "", r.err
    assert "bfq" in r.out and f"report: {files['html']}" in r.out
    assert json.loads(files["json"].read_text())["format"] == "backburner-results"
    assert "results" in json.loads(files["hyperfine-json"].read_text())
    assert files["csv"].read_text().count("\n") > 4 and "|" in files["markdown"].read_text()
    assert files["html"].read_text().startswith("<!DOCTYPE html>")


def test_with_a_machine_format_notices_go_to_stderr(db: str, tmp_path: Path) -> None:
    page = tmp_path / "r.html"
    r = bb("report", db, "--json", "--export-html", str(page))
    assert r.returncode == 0 and json.loads(r.out) and page.exists()
    assert r.err == f"backburner: report: {page}\n"


def test_the_old_report_spellings_still_work_with_a_note(db: str, tmp_path: Path) -> None:
    out = tmp_path / "r.csv"
    r = bb("report", db, "--export", "csv", "-o", str(out))
    assert r.returncode == 0 and r.out == ""  # as before: the export only
    assert out.read_text() == bb("report", db, "--format", "csv").out
    assert r.err.splitlines() == [
        "backburner: --export is deprecated; use --export-FORMAT FILE, or --format FORMAT "
        "for stdout", "backburner: -o is deprecated; use --export-FORMAT FILE"]
    r = bb("report", db, "--html", str(tmp_path / "r.html"))
    assert r.returncode == 0 and (tmp_path / "r.html").exists()
    assert "--html is deprecated; use --export-html" in r.err
    plots = tmp_path / "plots"
    r = bb("report", db, "--plot", str(plots), "--format", "png,svg")
    assert r.returncode == 0, r.err
    assert r.err == "backburner: --format with plot formats is deprecated; use --plot-format\n"
    assert {p.suffix for p in plots.iterdir()} == {".png", ".svg"}
    assert "--export " not in cli.build_parser().parse_args(["report"]).parser.format_help()


def test_report_minus_o_without_export_is_refused(db: str) -> None:
    r = bb("report", db, "-o", "x.csv")
    assert r.returncode == 64 and r.out == ""
    assert r.err.splitlines()[-1] == ("backburner: -o goes with --export; use "
                                      "--export-FORMAT FILE")


def test_recommend_prints_text_only(db: str) -> None:
    r = bb("report", db, "--recommend", "--json")
    assert r.returncode == 64 and "--recommend prints text" in one_line_error(r)


def _commands() -> dict[str, argparse.ArgumentParser]:
    from backburner.cli.shells import _parsers

    return dict(_parsers(cli.build_parser()))


def test_one_convention_across_commands() -> None:
    """--json is short for --format json wherever JSON can be printed; every -o/--output
    has --force (bench's database excepted: it is never replaced); files besides it are
    --export-FORMAT FILE."""
    with_json = []
    for path, parser in _commands().items():
        options = {o: a for a in parser._actions for o in a.option_strings}
        if "--json" in options:
            with_json.append(path)
            assert "--format" in options and "json" in options["--format"].choices
            assert options["--json"].dest == "format" and options["--json"].const == "json"
        out = options.get("--output")
        if out is not None and out.help != argparse.SUPPRESS and path != "bench":
            assert "--force" in options, path
        assert not [o for o in options if o == "--html" and options[o].help != argparse.SUPPRESS]
    assert set(with_json) >= {"report", "extents show", "slowdisk stats", "slowdisk profiles",
                              "govern status", "trace show", "trace diff", "trace compare"}


@pytest.mark.parametrize("argv", [["govern", "status"], ["slowdisk", "stats", "loop0"],
                                  ["slowdisk", "profiles"], ["extents", "show", "f"],
                                  ["trace", "show", "t.json"], ["report", "r.db"],
                                  ["apply", "--status"]])
def test_format_json_and_json_are_the_same(argv: list[str]) -> None:
    parse = cli.build_parser().parse_args
    assert parse([*argv, "--format", "json"]).format == parse([*argv, "--json"]).format == "json"
    assert parse(argv).format == "text"


def _parsers() -> list[argparse.ArgumentParser]:
    out, todo = [], [build_parser()]
    while todo:
        p = todo.pop()
        out.append(p)
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                todo += list(action.choices.values())
    return out


def test_every_command_has_a_description_and_no_help_says_none() -> None:
    """`backburner COMMAND --help` says what the command does (not only its usage), and no
    option's help shows a Python value where a default belongs ("None: /etc/…")."""
    parsers = _parsers()
    assert len(parsers) > 20
    for p in parsers:
        assert p.description, f"{p.prog} --help has no description"
        for action in p._actions:
            assert "None:" not in (action.help or ""), (p.prog, action.option_strings)


def test_every_log_line_is_one_line() -> None:
    """A daemon's log goes to the journal: a newline in a message (a process's name, a
    path) would start a forged entry, an escape sequence would drive the reader's
    terminal."""
    record = logging.LogRecord("backburner.govern.governor", logging.INFO, __file__, 1,
                               "governing PID %d (%s)", (42, "x\n=> forged\x1b[2K"), None)
    line = cli.OneLineFormatter("backburner: %(name)s: %(message)s").format(record)
    assert line == "backburner: backburner.govern.governor: governing PID 42 (x\\n=> forged" \
                   "\\x1b[2K)"
