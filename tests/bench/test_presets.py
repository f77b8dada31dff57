"""bench.presets: the office preset picks the most faithful probe the machine can run, and
says which in the probe's name."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from backburner.base.errors import UnavailableError, UsageError
from backburner.bench import config, display, loads, presets


@pytest.fixture
def office(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A LibreOffice program directory with a launcher found on PATH."""
    program = tmp_path / "program"
    program.mkdir()
    (program / "soffice").write_text("#!/bin/sh\n")
    (program / "soffice").chmod(0o755)
    monkeypatch.setenv("PATH", f"{program}:/usr/bin:/bin")
    monkeypatch.setattr(display, "require_tools", lambda: None)
    return program


def test_writer_window_when_libreoffice_has_a_gui(office: Path) -> None:
    (office / "libvclplug_gen.so").write_text("")
    values = presets.office_hdd()
    (probe,) = values["probes"]
    assert probe.startswith("writer=") and "--writer" in shlex.split(probe.split("=", 1)[1])
    assert values["ready_window"] == presets.WRITER_WINDOW
    cfg = config.preset("office-hdd")  # a valid configuration, as the command line gets it
    assert cfg.ready_window == presets.WRITER_WINDOW and cfg.max_runs == 15


def test_terminate_after_init_without_a_gui(office: Path) -> None:
    values = presets.office_hdd()  # -nogui packages: no VCL plug-in
    assert values["probes"][0].startswith("office=")
    assert "--terminate_after_init" in values["probes"][0]
    assert values["ready_window"] is None


def test_no_window_probe_without_xvfb(office: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (office / "libvclplug_gen.so").write_text("")

    def missing() -> None:
        raise UnavailableError("--ready window needs Xvfb, which is not installed")

    monkeypatch.setattr(display, "require_tools", missing)
    assert presets.office_hdd()["probes"][0].startswith("office=")


def test_stand_in_without_libreoffice(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    values = presets.office_hdd()
    assert values["probes"][0].startswith("office-standin=")
    assert values["ready_window"] is None
    assert values["loads"] == ["none", "flatpak-loop", "flatpak-api"]
    assert values["policies"] == ["default", "io=idle,throttle"]


def test_s_startup_is_the_s_suites_scenario() -> None:
    """One flag selects S's values: its readers' fio settings, one run of them per cell
    through all its trials, and the probe's files all on the device."""
    cfg = config.preset("s-startup")
    assert cfg.loads == ["none", "readers:10:seq:s-suite"]
    (part,) = loads.parse(cfg.loads[1]).fio
    assert (part.jobs, part.mode, part.bs, part.passes) == (10, "buffered", "4096", True)
    assert (cfg.load_lifetime, cfg.block, cfg.trials) == ("cell", 8, 8)
    assert cfg.probe_layout == "directories" and cfg.schedulers == ["mq-deadline", "bfq"]
    (probe,) = cfg.probes
    assert shlex.split(probe.partition("=")[2])[-1] == "import json, email, http.client"


def test_slow_link_is_a_network_study_the_options_refine() -> None:
    plan = config.plan(config.from_options(preset_name="slow-link", seed=1))
    assert {c.device for c in plan.cells} == {"link:1mbit:0ms:300ms"}
    assert len(plan.cells) == 2 * (1 + 2 * 2) and plan.config.sequential
    # another line, as an option; a disk option is refused as without the preset
    other = config.from_options(preset_name="slow-link", seed=1, net_link="4mbit:0ms:100ms")
    assert other.device == "link:4mbit:0ms:100ms" and config.plan(other).link.rate_bit == 4e6
    with pytest.raises(UsageError, match="--device is for a disk study"):
        config.from_options(preset_name="slow-link", device="testbed:1G")


def test_the_ssd_preset_is_a_non_rotational_testbed_under_every_scheduler() -> None:
    cfg = config.preset("ssd")
    assert cfg.rotational == 0 and cfg.device.startswith("testbed:")
    assert cfg.schedulers == ["none", "mq-deadline", "kyber", "bfq"]
    assert cfg.loads == ["none", "readers:10:seq", "writers:2:seq:buffered", "dpkg-loop"]
    assert cfg.max_time_s is not None and cfg.max_time_s <= 15 * 60  # under 20 minutes here
    plan = config.plan(cfg, resolve=False)
    assert len(plan.cells) == 4 * (1 + len(cfg.policies) * 3)


@pytest.mark.parametrize("here", [False, True])
def test_io_cost_is_compared_only_where_bench_can_switch_it(
        monkeypatch: pytest.MonkeyPatch, here: bool) -> None:
    monkeypatch.setattr(presets, "_iocost_here", lambda: here)
    policies = presets.ssd()["policies"]
    assert policies == ["default", "background", *(["iocost"] if here else [])]


def test_this_host_has_no_io_cost_to_switch() -> None:
    """cgroup v1 here, with an empty cgroup2 mount: the preset leaves io.cost out."""
    assert presets._iocost_here() is False


def test_the_docs_say_the_quick_presets_trial_counts() -> None:
    """docs/guide/bench.md said 8–60 trials where the preset runs 8–24: the numbers it states are
    the preset's own."""
    values = presets.quick()
    want = f"{values['min_runs']} to {values['max_runs']} trials"
    text = " ".join((Path(__file__).parents[2] / "docs" / "guide" / "bench.md").read_text().split())
    assert f"The `quick` preset runs until decided ({want}" in text
    assert f"× {values['min_runs']}–{values['max_runs']} trials until decided" in text


def test_the_runs_help_says_which_mode_is_the_default() -> None:
    from backburner.cli import build_parser

    bench = build_parser()._subparsers._group_actions[0].choices["bench"]  # type: ignore[union-attr]
    helps = {a.dest: a.help or "" for a in bench._actions}
    assert "the default mode" in helps["trials"] and "the other mode" in helps["min_runs"]
