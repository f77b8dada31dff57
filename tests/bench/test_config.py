"""bench.config: options become one configuration, presets, and `plan()` refuses every bad
option before anything is touched (it needs no root and starts nothing)."""

from __future__ import annotations

import math
import os
import shutil
from pathlib import Path

import pytest

from backburner.base.errors import CommandNotFound, DataError, UsageError
from backburner.bench import config
from backburner.bench.config import BenchConfig
from backburner.policy import grammar


def _cfg(**kw: object) -> BenchConfig:
    base: dict = dict(probes=["/bin/true"], loads=["none", "readers:1:seq"],
                      policies=["default"], schedulers=["bfq"], device="testbed:1G", seed=3)
    base.update(kw)
    return BenchConfig(**base)  # type: ignore[arg-type]


def test_from_options_adds_the_baseline_and_draws_a_seed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import secrets

    drawn = iter([123456, 654321])
    monkeypatch.setattr(secrets, "randbelow", lambda n: next(drawn) % n)
    cfg = config.from_options(probes=["/bin/true"], loads=["readers:1:seq"])
    assert cfg.loads == ["none", "readers:1:seq"] and cfg.seed == 123456 and cfg.cold
    quick = config.from_options(preset_name="quick")  # a preset's seed is random too
    assert quick.seed == 654321 and quick.preset == "quick"
    assert quick.loads == config.preset("quick").loads
    fixed = config.from_options(preset_name="quick", seed=7, cold=False, trials=3)
    assert (fixed.seed, fixed.cold, fixed.trials) == (7, False, 3)


def test_the_seed_is_really_random() -> None:
    seeds = {config.from_options(probes=["/bin/true"]).seed for _ in range(5)}
    assert len(seeds) > 1 and all(0 <= s < 2**31 for s in seeds)


def test_no_probe_and_unknown_preset() -> None:
    with pytest.raises(UsageError, match="--probe"):
        config.from_options()
    with pytest.raises(UsageError, match="unknown preset 'slow'"):
        config.from_options(preset_name="slow")


def test_plan_types_every_part() -> None:
    p = config.plan(_cfg(probes=["/bin/true", "sh=sh -c true"], policies=["default", "gentle"],
                         schedulers=["mq-deadline", "bfq"]))
    assert list(p.probes) == ["/bin/true", "sh"]
    assert p.probes["sh"].argv == (os.path.realpath(shutil.which("sh") or ""), "-c", "true")
    assert p.probes["sh"].label == "sh" and p.probes["/bin/true"].label == "/bin/true"
    assert [s.kind for s in p.loads.values()] == ["none", "fio"]
    assert list(p.policies) == ["default", "gentle"]
    assert p.schedulers == ("mq-deadline", "bfq") and p.device.kind == "testbed"
    # 2 probes x 2 schedulers x (none + 1 load x 2 policies)
    assert len(p.cells) == 12 and len({c.key for c in p.cells}) == 12
    assert {c.probe for c in p.cells} == {"/bin/true", "sh"}
    assert p.needs_fio


@pytest.mark.parametrize(("change", "message"), [
    ({"trials": 0}, "--trials 0 out of range"),
    ({"trials": 10_001}, "--trials"),
    ({"settle_s": -1.0}, "--settle"),
    ({"settle_s": math.inf}, "--settle"),
    ({"timeout_s": 0.0}, "--timeout"),
    ({"timeout_s": math.inf}, "--timeout"),
    ({"timeout_s": math.nan}, "--timeout"),
    ({"abort_factor": math.inf}, "--abort-factor"),
    ({"abort_factor": 0.5}, "--abort-factor"),
    ({"rotational": 2}, "--rotational"),
    ({"probes": []}, "--probe"),
    ({"probes": ["a=/bin/true", "a=/bin/false"]}, "two probes are labelled 'a'"),
    ({"probes": ["'unclosed"]}, "does not parse"),
    ({"loads": ["readers:x:seq"]}, "does not parse"),
    ({"loads": ["readers:65:seq"]}, "65 fio jobs"),
    ({"loads": ["readers:40:seq+writers:40:rand"]}, "80 fio jobs"),
    ({"loads": []}, "no load"),
    ({"policies": ["fast"]}, "unknown policy"),
    ({"policies": []}, "no policy"),
    ({"schedulers": ["bqf"]}, "unknown IO scheduler 'bqf'"),
    ({"schedulers": ["cfq"]}, "unknown IO scheduler 'cfq'"),
    ({"schedulers": []}, "no scheduler"),
    ({"device": "testbed:1M"}, "too small"),
    ({"device": "testbed:1e99999G"}, "does not parse"),
    ({"device": "slowdisk:warp:1G"}, "profile"),
    ({"device": "/nonexistent/place"}, "no such path"),
    ({"ready_line": "(unclosed"}, "not a regex"),
])
def test_every_bad_option_is_refused_by_the_plan(change: dict, message: str) -> None:
    with pytest.raises(UsageError, match=message.replace("(", r"\(")):
        config.plan(_cfg(**change))


def test_a_typo_of_a_scheduler_gets_a_suggestion() -> None:
    with pytest.raises(UsageError) as err:
        config.plan(_cfg(schedulers=["mqdeadline"]))
    assert "did you mean mq-deadline" in str(err.value)


def test_a_missing_probe_is_127_unless_only_planned() -> None:
    cfg = _cfg(probes=["/nonexistent/probe-xyz"])
    with pytest.raises(CommandNotFound):
        config.plan(cfg)
    assert len(config.plan(cfg, resolve=False).cells) == 2


def test_documented_devices_are_accepted() -> None:
    assert config.plan(_cfg(device="slowdisk:flat:5:1G")).device.profile == "flat:5"


def test_stored_configurations(tmp_path: object) -> None:
    cfg = _cfg()
    assert BenchConfig.from_dict(cfg.to_dict()) == cfg
    legacy = {k: v for k, v in cfg.to_dict().items() if k != "probes"} | {"probe": "/bin/true"}
    assert BenchConfig.from_dict(legacy) == cfg  # runs stored before probes were a list
    with pytest.raises(DataError, match="warp_factor"):
        BenchConfig.from_dict({**cfg.to_dict(), "warp_factor": 9})
    with pytest.raises(DataError, match="incomplete"):
        BenchConfig.from_dict({"loads": []})


@pytest.mark.parametrize("field, value, shown", [
    ("trials", "8", '"8", not int'),
    ("trials", True, "true, not int"),
    ("loads", [1], "[1], not list[str]"),
    ("probes", "python3", '"python3", not list[str]'),  # not 7 one-letter probes
    ("policies", None, "null, not list[str]"),
    ("ready_line", 5, "5, not str | None"),
    ("cold", "yes", '"yes", not bool'),
    ("timeout_s", "60", '"60", not float'),
    ("device", {"kind": "testbed"}, '{"kind": "testbed"}, not str'),
])
def test_a_stored_configuration_of_the_wrong_type_is_damage(field: str, value: object,
                                                             shown: str) -> None:
    """Every field is checked against its declared type: a damaged database is a one-line
    DataError naming the field, never a TypeError (or a string iterated letter by letter)."""
    data = {**_cfg().to_dict(), field: value}
    with pytest.raises(DataError) as err:
        BenchConfig.from_dict(data, "r.db: the stored configuration of run 1")
    assert str(err.value) == f"r.db: the stored configuration of run 1 is damaged: {field} is " \
        + shown


def test_every_field_type_of_a_stored_configuration_is_checked() -> None:
    """The check follows the dataclass's annotations, so no field is left out: a value of
    another JSON type is refused for each, and a real configuration's stored form passes."""
    good = _cfg(ready_line="ready", prepares=["before:x=true"]).to_dict()
    assert BenchConfig.from_dict(good).to_dict() == good
    assert BenchConfig.from_dict({**good, "settle_s": 2}).settle_s == 2  # a whole float
    for name, value in good.items():
        wrong = "text" if isinstance(value, list | bool | int | float) else [value]
        with pytest.raises(DataError, match=f"damaged: {name} is "):
            BenchConfig.from_dict({**good, name: wrong})


# --- --prepare (hyperfine's), --setup-variant, --shell ---------------------------------------


def test_one_prepare_for_every_probe_or_one_per_probe() -> None:
    two = ["a=/bin/true", "b=/bin/echo"]
    assert config.plan(_cfg(prepare_commands=["sync"]), resolve=False).trial_prepares == {
        "/bin/true": "sync"}
    assert config.plan(_cfg(probes=two, prepare_commands=["sync"]),
                       resolve=False).trial_prepares == {"a": "sync", "b": "sync"}
    assert config.plan(_cfg(probes=two, prepare_commands=["x 1", "x 2"]),
                       resolve=False).trial_prepares == {"a": "x 1", "b": "x 2"}
    assert config.plan(_cfg(), resolve=False).trial_prepares == {}
    with pytest.raises(UsageError, match="3 --prepare commands for 2 probes"):
        config.plan(_cfg(probes=two, prepare_commands=["1", "2", "3"]), resolve=False)


@pytest.mark.parametrize("command", ["replay=backburner readahead replay x.pack", "warm=true"])
def test_the_old_matrix_spelling_of_prepare_is_refused_with_a_hint(command: str) -> None:
    with pytest.raises(UsageError) as err:
        config.plan(_cfg(prepare_commands=[command]), resolve=False)
    assert "--setup-variant NAME=COMMAND" in str(err.value)
    assert "env NAME=VALUE COMMAND" in str(err.value) and "\n" not in str(err.value)


def test_an_empty_prepare_is_refused() -> None:
    with pytest.raises(UsageError, match="empty"):
        config.plan(_cfg(prepare_commands=["  "]), resolve=False)


def test_programs_are_checked_before_anything_runs() -> None:
    """Without a shell (-N) each command's program must exist; with one, the shell."""
    config.plan(_cfg(prepare_commands=["true"], shell="none"))
    with pytest.raises(CommandNotFound, match="no-such-prog"):
        config.plan(_cfg(prepare_commands=["no-such-prog --x"], shell="none"))
    with pytest.raises(CommandNotFound, match="without a shell"):
        config.plan(_cfg(prepares=["before:v=no-such-prog"], shell="none"))
    with pytest.raises(CommandNotFound, match="no-such-shell"):
        config.plan(_cfg(prepare_commands=["true"], shell="no-such-shell -e"))
    config.plan(_cfg(prepare_commands=["no-such-prog"]))  # sh runs it: its failure, per trial
    with pytest.raises(UsageError, match="--shell is empty"):
        config.plan(_cfg(shell=" "), resolve=False)


def test_until_decided_options_make_a_sequential_run() -> None:
    fixed = config.from_options(probes=["/bin/true"], trials=5)
    assert not fixed.sequential and fixed.rounds == 5
    run = config.from_options(probes=["/bin/true"], max_time_s=60.0)
    rule = run.stopping_rule()
    assert run.sequential and (rule.min_runs, rule.max_runs) == (6, 100)
    assert run.rounds == 100 and config.plan(run, resolve=False).slots()[-1].round == 100
    short = config.from_options(probes=["/bin/true"], max_runs=3).stopping_rule()
    assert (short.min_runs, short.max_runs) == (3, 3)
    quick = config.from_options(preset_name="quick")
    assert quick.sequential and (quick.min_runs, quick.max_runs) == (8, 60)
    assert quick.max_time_s == 180.0 and quick.tolerance is None  # the band a person notices
    counted = config.from_options(preset_name="quick", trials=8)  # a fixed count replaces
    assert not counted.sequential and counted.rounds == 8


@pytest.mark.parametrize(("options", "message"), [
    ({"trials": 5, "max_runs": 9}, "--trials fixes the number of trials; --max-runs"),
    ({"min_runs": 9, "max_runs": 5}, "--min-runs 9 is above --max-runs 5"),
    ({"min_runs": 0}, "--min-runs 0 out of range"),
    ({"max_runs": 10_001}, "--max-runs 10001 out of range"),
    ({"max_time_s": math.inf}, "--max-time infs out of range"),
    ({"min_runs": 3, "tolerance": 1.5}, "--tolerance 1.5 out of range")])
def test_until_decided_options_are_checked(options: dict, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        config.plan(config.from_options(probes=["/bin/true"], **options), resolve=False)


def test_a_stored_configuration_from_before_until_decided_still_loads() -> None:
    old = _cfg().to_dict()
    for key in ("min_runs", "max_runs", "max_time_s", "tolerance"):
        del old[key]
    assert not BenchConfig.from_dict(old).sequential


def test_a_device_too_small_for_the_loads_files_is_refused_by_plan() -> None:
    """Four fio readers lay out 1 GiB: with the probe's files they do not fit a 1G testbed,
    and plan() says so, with a size that would fit, before anything is built."""
    with pytest.raises(UsageError, match=r"the loads' files need 1 GiB but testbed:1G has "
                       r"921.6 MiB for files; use a larger device, e.g. testbed:2G"):
        config.plan(_cfg(device="testbed:1G", loads=["none", "readers:4:seq"]), resolve=False)
    config.plan(_cfg(device="testbed:2G", loads=["none", "readers:4:seq"]), resolve=False)
    config.plan(_cfg(device="testbed:1G", loads=["none", "cmd:'sleep 9'"]), resolve=False)


# --- cgroup v2's group knobs: refused before anything is built --------------------------------

def _v2_tree(tmp_path: Path) -> str:
    root = tmp_path / "cg"
    (root / "system.slice").mkdir(parents=True)
    (root / "cgroup.controllers").write_text("cpu io memory\n")
    (root / "io.cost.qos").write_text("")
    (root / "system.slice" / "cgroup.controllers").write_text("io\n")
    (root / "system.slice" / "io.latency").write_text("")
    return str(root)


def test_group_knobs_name_the_missing_file(tmp_path: Path) -> None:
    from backburner.base.errors import UnavailableError
    from backburner.systemd import Facts

    systemd_pid1 = Facts(True, "0::/init.scope\n")
    root = _v2_tree(tmp_path)
    config.check_group_controls([grammar.BUILTIN["latency-target"]], systemd_pid1, root)
    with pytest.raises(UnavailableError) as info:
        config.check_group_controls([grammar.BUILTIN["group-idle"]], systemd_pid1, root)
    assert info.value.exit_status == 69
    assert f"{root}/system.slice/io.prio.class is missing" in str(info.value)


def test_group_knobs_need_a_systemd_that_owns_the_tree(tmp_path: Path) -> None:
    from backburner.base.errors import UnavailableError
    from backburner.systemd import Facts

    with pytest.raises(UnavailableError, match="systemd does not own"):
        config.check_group_controls([grammar.BUILTIN["iocost"]], Facts(False, ""),
                                    _v2_tree(tmp_path))
    config.check_group_controls([grammar.BUILTIN["low-weight"]], Facts(False, ""), None)


def test_the_office_preset_s_stand_in_starts_here(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its probe runs as bench will run it (the program resolved to the real interpreter):
    the packages it imports are found, not only where the system's python has them. Taken
    on a machine without LibreOffice (here: one where it is hidden from the preset)."""
    import shutil as _shutil
    import subprocess as _subprocess

    from backburner.bench import presets

    real = _shutil.which
    monkeypatch.setattr(presets.shutil, "which",
                        lambda name, *a, **k: None if name == "soffice" else real(name, *a, **k))
    plan = config.plan(config.preset("office-hdd"))
    (probe,) = plan.probes.values()
    assert probe.label == "office-standin"
    done = _subprocess.run(list(probe.argv), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-500:]


# --- the throttle policy and a scheduler's tunables as setup variants -----------------------


def test_a_throttled_policy_is_its_policy_and_its_throttle() -> None:
    p = config.plan(_cfg(policies=["default", "throttle", "background,pause-ms=250,min-duty=0.25"]))
    assert p.policies["throttle"] == grammar.BUILTIN["default"]
    assert p.policies["background,pause-ms=250,min-duty=0.25"] == grammar.BUILTIN["background"]
    assert set(p.throttles) == {"throttle", "background,pause-ms=250,min-duty=0.25"}
    spec = p.throttles["background,pause-ms=250,min-duty=0.25"]
    assert (spec.pause_ms, spec.min_duty) == (250, 0.25)
    assert {c.policy for c in p.cells if not c.unloaded} == set(p.policies)


@pytest.mark.parametrize("policy, message", [
    ("throttle,pause-ms=5", "pause-ms='5'.*out of range"),
    ("throttle,min-duty=1", "min-duty='1'.*out of range"),
    ("min-duty=x", "min-duty='x'"),
    ("throttle=maybe", "use on or off"),
    ("throttle,stall-ms=600,window-ms=500", "not below window-ms"),
    ("throttle,io=loud", "unknown IO class"),
])
def test_a_bad_throttle_is_refused_by_the_plan(policy: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        config.plan(_cfg(policies=[policy]), resolve=False)


def test_flush_behind_is_an_item_of_a_policy_with_an_io_class() -> None:
    text = "io=idle,flush-behind,pause-ms=500"
    p = config.plan(_cfg(policies=["io=idle", text]), resolve=False)
    assert p.flush_behind == {text} and set(p.throttles) == {text}
    assert p.policies[text] == p.policies["io=idle"]
    with pytest.raises(UsageError, match="flush-behind writes the load's files at its IO "
                       "class, and the policy sets none"):
        config.plan(_cfg(policies=["flush-behind"]), resolve=False)
    with pytest.raises(UsageError, match="use on or off"):
        config.plan(_cfg(policies=["io=idle,flush-behind=1"]), resolve=False)


def test_the_throttle_needs_cgroup2_psi_and_a_freezer(monkeypatch: pytest.MonkeyPatch) -> None:
    from backburner.base.errors import UnavailableError
    from backburner.bench import throttled

    monkeypatch.setattr(throttled.cgroups, "unified_root", lambda: None)
    with pytest.raises(UnavailableError, match="no cgroup2 hierarchy is mounted") as err:
        config.plan(_cfg(policies=["throttle"]))
    assert err.value.exit_status == 69 and "\n" not in str(err.value)
    config.plan(_cfg(policies=["throttle"]), resolve=False)  # a stored run's cells: no check


def test_tunables_are_a_setup_variant_of_their_scheduler_only() -> None:
    p = config.plan(_cfg(schedulers=["mq-deadline", "bfq"],
                         prepares=["tune:si0=bfq:slice_idle=0",
                                   "tune:strict=bfq:strict_guarantees=1,low_latency=0"]))
    step = p.prepares["strict"]
    assert step is not None and step.scheduler == "bfq" and not step.runs_command
    assert step.tunables == (("strict_guarantees", "1"), ("low_latency", "0"))
    by = {(c.scheduler, c.prepare) for c in p.cells}
    assert by == {("mq-deadline", "none"), ("bfq", "none"), ("bfq", "si0"), ("bfq", "strict")}
    # every variant has its own unloaded cell to be judged against
    assert {(c.scheduler, c.prepare) for c in p.cells if c.unloaded} == by


@pytest.mark.parametrize("variant, message", [
    ("tune:x=bfq", "does not parse"),
    ("tune:x=bfq:slice idle=0", "does not parse"),
    ("tune:x=bqf:slice_idle=0", "unknown IO scheduler"),
    ("tune:x=bfq:slice_idle=0,slice_idle=8", "twice"),
    ("tune:x=kyber:read_lat_nsec=1", "not among the schedulers"),
])
def test_a_bad_tunables_variant_is_refused(variant: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        config.plan(_cfg(prepares=[variant]), resolve=False)
