"""report.recommend: ranked by the time a user waits, and every command it prints works."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from helpers import ENV, LOAD, bb, make_db

from backburner import report
from backburner.cli import build_parser
from backburner.govern import rulefile
from backburner.govern.rules import ThrottleSettings
from backburner.policy import flush_behind, grammar
from backburner.policy import throttle as throttlepolicy
from backburner.report import recommend

#: bfq idles at 2.0 s and keeps its start at 1.05x that (2.1 s); mq-deadline idles at 1.0 s
#: and the governed load keeps it at 1.10x (1.1 s): the better start by far is mq-deadline's
CELLS = {("bfq", "none", "-"): 2.0, ("bfq", LOAD, "default"): 2.1,
         ("mq-deadline", "none", "-"): 1.0, ("mq-deadline", LOAD, "govern"): 1.1}


def _recommend(path: Path, medians: dict, **kw: object) -> recommend.Recommendation:
    make_db(path, medians=medians, spread=0.01, **kw)
    (rec,) = recommend.recommend(report.load(str(path)))
    return rec


def test_ranked_by_the_loaded_start_not_by_each_ratio_to_its_own_idle(tmp_path: Path) -> None:
    rec = _recommend(tmp_path / "r.db", CELLS)
    assert (rec.best.cell.scheduler, rec.best.cell.policy) == ("mq-deadline", "govern")
    assert [(r.cell.scheduler, r.cell.policy) for r in rec.pareto][0] == ("mq-deadline",
                                                                         "govern")
    assert re.search(r"start-up 1\.1\d \[[\d.]+\u2013[\d.]+\] s, 1\.1\d\u00d7", rec.evidence)


def _check_command(line: str, root: Path) -> None:
    """A printed line parses with the real CLI parser, and its policy is one `run` and
    `apply` take; an `apply` line runs for real with --dry-run."""
    argv = shlex.split(line.split("   # ")[0])
    assert argv[0] == "backburner"
    args = build_parser().parse_args(argv[1:])
    if getattr(args, "policy", None) is not None:  # run takes flush-behind out first
        grammar.parse_policy(flush_behind.split(args.policy)[0])  # UsageError otherwise
    if args.cmd == "apply":
        for unit in args.unit:  # the placeholder, as the user's real unit would be there
            name = unit if "." in unit else f"{unit}.service"
            (root / "lib/systemd/system").mkdir(parents=True, exist_ok=True)
            (root / "lib/systemd/system" / name).write_text("[Service]\n")
        r = bb(*argv[1:], "--dry-run", "--root", str(root))
        assert r.returncode == 0, r.err


@pytest.mark.parametrize("policy", ["govern", "background", "io=idle,cpu=batch", "throttle",
                                    "io=idle,pause-ms=250,min-duty=0.25",
                                    "io=idle,flush-behind",
                                    "io=idle,flush-behind,pause-ms=500,min-duty=0.1"])
def test_every_printed_command_and_rule_is_accepted(tmp_path: Path, policy: str) -> None:
    cells = {("mq-deadline", "none", "-"): 1.0, ("mq-deadline", LOAD, "default"): 3.0,
             ("mq-deadline", LOAD, policy): 1.05}
    rec = _recommend(tmp_path / "r.db", cells)
    assert rec.best.cell.policy == policy
    text = recommend.render([rec])
    lines = [ln.removeprefix("  $ ") for ln in text.splitlines() if ln.startswith("  $ ")]
    assert lines == list(rec.commands)
    for line in lines:
        _check_command(line, tmp_path)
    rest, throttle = throttlepolicy.split(policy)
    by_daemon = policy == "govern" or throttle is not None  # only govern throttles
    assert any(ln.startswith("backburner run ") for ln in lines) == (not by_daemon)
    parsed = rulefile.parse_file(rec.govern_rule, "bulk-work.toml")
    assert parsed.errors == [] and len(parsed.rules) == 1
    if rec.govern_rule:  # printed as the file it is: its lines, indented, parse the same
        head = "  govern rule, as a file /etc/backburner/rules.d/bulk-work.toml:"
        after = text.split(head + "\n", 1)[1].splitlines()
        printed = "\n".join(ln for ln in after[:len(rec.govern_rule.strip().splitlines())])
        assert all(ln.startswith("    ") for ln in printed.splitlines())
        assert rulefile.parse_file(printed, "bulk-work.toml").rules == parsed.rules
    short = recommend.answer([rec])  # what bench ends with: the rule its commands name
    head = "  govern rule, as a file /etc/backburner/rules.d/bulk-work.toml:"
    assert (head in short.splitlines()) == by_daemon
    if by_daemon:
        printed = short.split(head + "\n", 1)[1]
        assert rulefile.parse_file(printed, "bulk-work.toml").rules == parsed.rules
    rest, flush = flush_behind.split(rest)
    want = "background" if policy == "govern" else rest
    assert parsed.rules[0].policy == grammar.parse_policy(want)
    assert parsed.rules[0].throttle == (throttle is not None)
    assert parsed.rules[0].flush_behind == flush
    assert any(ln.startswith("backburner apply --unit") for ln in lines) == (
        not by_daemon and not flush)  # a unit's drop-in cannot write back its files
    if throttle is not None:
        got = parsed.throttle or ThrottleSettings()  # no table: govern's defaults
        assert (got.pause_ms, got.min_duty, got.stall_ms, got.window_ms) == (
            throttle.pause_ms, throttle.min_duty, throttle.stall_ms, throttle.window_ms)


def test_bfq_low_latency_off_is_a_limit(tmp_path: Path) -> None:
    """bench records each scheduler's queue settings under its name, BFQ's own tunables
    under "bfq" inside them (bench.environment.device_settings)."""
    def device(low_latency: str) -> dict:
        return {"device": {**ENV["device"], "queue": {
            "bfq": {"wbt_lat_usec": "n/a", "bfq": {"low_latency": low_latency,
                                                   "slice_idle": "8"}},
            "mq-deadline": {"wbt_lat_usec": "n/a"}}}}

    cells = {("bfq", "none", "-"): 1.0, ("bfq", LOAD, "default"): 1.5}
    off = _recommend(tmp_path / "off.db", cells, env=device("0"))
    assert any("low_latency is off" in note for note in off.limits)
    on = _recommend(tmp_path / "on.db", cells, env=device("1"))
    assert not any("low_latency" in note for note in on.limits)


def test_leaving_the_load_unprotected_comes_with_no_rule_and_bfq_claims_need_evidence(
        tmp_path: Path) -> None:
    """bfq + default best: no govern rule to put the load on the back burner (that would
    undo the recommendation); BFQ's effect is claimed only when the intervals say so."""
    cells = {("bfq", "none", "-"): 1.0, ("bfq", LOAD, "default"): 1.2,
             ("bfq", LOAD, "background"): 1.9, ("mq-deadline", "none", "-"): 1.0,
             ("mq-deadline", LOAD, "default"): 3.0}
    rec = _recommend(tmp_path / "r.db", cells)
    assert (rec.best.cell.scheduler, rec.best.cell.policy) == ("bfq", "default")
    assert rec.govern_rule == "" and "govern rule" not in recommend.render([rec])
    assert "BFQ alone helps" in rec.evidence
    close = {("bfq", "none", "-"): 1.0, ("bfq", LOAD, "default"): 1.2,
             ("mq-deadline", "none", "-"): 1.0, ("mq-deadline", LOAD, "default"): 1.2}
    rec = _recommend(tmp_path / "close.db", close)
    assert "not shown to differ" in rec.evidence and "does not help" not in rec.evidence


def test_a_network_study_recommends_run_net(tmp_path: Path) -> None:
    """Its queue is the link's, not this machine's to set: no `apply --scheduler`, no
    govern rule (no rule key applies a network policy), and `run --net background`."""
    cells = {("fifo", "none", "-"): 0.075, ("fifo", "download:4", "default"): 2.1,
             ("fifo", "download:4", "background"): 0.085}
    rec = _recommend(tmp_path / "n.db", cells, device="link:1mbit:0ms:300ms", cold=0)
    assert rec.best.cell.policy == "background" and rec.govern_rule == ""
    assert rec.commands == ("backburner run --net background -- YOUR-DOWNLOAD-COMMAND",)
    args = build_parser().parse_args(shlex.split(rec.commands[0])[1:])
    assert (args.cmd, args.net) == ("run", "background")
    rows = report.summary_rows(report.load(str(tmp_path / "n.db")))
    assert recommend.commands(next(r for r in rows if r.cell.policy == "default")) == ()


@pytest.mark.parametrize("rotational, devices", [("0", " --devices non-rotational"),
                                                 ("1", ""), (None, "")])
def test_the_scheduler_rule_is_for_the_class_of_disk_measured(
        tmp_path: Path, rotational: str | None, devices: str) -> None:
    """A run on a non-rotational testbed (the ssd preset) recommends a rule for solid-state
    disks: apply's rule is for rotational ones unless told."""
    env = {"device": {"rotational": rotational}} if rotational else None
    rec = _recommend(tmp_path / "ssd.db", CELLS, env=env)
    line = rec.commands[0]
    assert line.startswith(f"backburner apply --scheduler {rec.best.cell.scheduler}{devices}"
                           "   # "), line
    args = build_parser().parse_args(shlex.split(line.split("   #")[0])[1:])
    assert args.devices == ("non-rotational" if devices else None)


def test_the_headline_is_the_comparison_the_user_came_for(tmp_path: Path) -> None:
    """The slowest unprotected start of the load against the recommended one, as the
    report's medians: what the demo and every bench end with (`answer`)."""
    cells = {("mq-deadline", "none", "-"): 0.27, ("mq-deadline", LOAD, "default"): 4.1,
             ("bfq", "none", "-"): 0.26, ("bfq", LOAD, "default"): 0.9,
             ("bfq", LOAD, "background"): 0.28}
    rec = _recommend(tmp_path / "r.db", cells)
    assert re.fullmatch(rf"under {LOAD} a start of gimp --version takes 4\.\d+ s unprotected "
                        r"on mq-deadline and 0\.2\d+ s on bfq \+ background "
                        r"\(1\.\d\d\u00d7 its unloaded 0\.2\d+ s\)", rec.headline), rec.headline
    text = recommend.answer([rec])
    assert text.splitlines()[0] == f"answer: {rec.headline}"
    assert [ln.removeprefix("  $ ") for ln in text.splitlines()[1:]] == list(rec.commands)
    assert f"  In short: {rec.headline}" in recommend.render([rec])


def test_tunables_are_levers_of_the_same_comparison_taken_only_beyond_the_band(
        tmp_path: Path) -> None:
    """A run with BFQ's slice_idle as a setup variant (`--setup-variant-tune`) gives one
    recommendation, not one per variant: the tuned cell wins only by more than the band a
    person notices, and then its commands set the tunable; the unprotected start it is
    compared with is the scheduler's own."""
    settings = {"prepares": ["tune:si16=bfq:slice_idle=16"]}

    def cells(tuned_start: float) -> dict:
        return {("bfq", "none", "-"): 1.0, ("bfq", LOAD, "default"): 3.0,
                ("bfq", LOAD, "background"): 1.5,
                ("bfq", "none", "-", "si16"): 1.0, ("bfq", LOAD, "default", "si16"): 5.0,
                ("bfq", LOAD, "background", "si16"): tuned_start}

    rec = _recommend(tmp_path / "far.db", cells(1.1), settings=settings)
    assert (rec.best.cell.prepare, rec.best.cell.policy) == ("si16", "background")
    assert "echo 16 > /sys/block/DEV/queue/iosched/slice_idle" in "\n".join(rec.commands)
    assert re.search(r"takes 3\.0\d s unprotected on bfq and 1\.1\d s on "
                     r"bfq \(slice_idle=16\) \+ background", rec.headline), rec.headline
    assert "bfq (slice_idle=16) + background" in recommend.render([rec])
    # the tuned cell within the band keeps a little more of the installs' speed: not enough
    bulk = {("bfq", LOAD, "default"): (12e6, 1), ("bfq", LOAD, "background"): (10e6, 1),
            ("bfq", LOAD, "default", "si16"): (12e6, 1),
            ("bfq", LOAD, "background", "si16"): (11e6, 1)}
    close = _recommend(tmp_path / "close.db", cells(1.45), settings=settings, bulk=bulk)
    assert (close.best.cell.prepare, close.best.cell.policy) == ("none", "background")
    assert not any("iosched" in c for c in close.commands)
