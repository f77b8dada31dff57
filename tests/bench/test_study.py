"""bench.study: a study file's keys are the options of `bench` (pure parsing)."""

from __future__ import annotations

import pytest

from backburner.base.errors import UsageError
from backburner.bench import study


def test_prepare_setup_variants_and_shell() -> None:
    options, preset, notes = study.parse({
        "preset": "quick", "prepare": "sync", "setup-variant": ["replay=true"],
        "setup-variant-during": "boot=true", "setup-variant-tune": "si0=bfq:slice_idle=0",
        "shell": "none"})
    assert preset == "quick" and notes == ()
    assert options == {"prepare_commands": ["sync"], "shell": "none",
                       "prepares": ["before:replay=true", "during:boot=true",
                                    "tune:si0=bfq:slice_idle=0"]}


def test_the_old_during_key_still_works_with_a_note() -> None:
    options, _, notes = study.parse({"prepare-during": "boot=true"}, "s.toml")
    assert options == {"prepares": ["during:boot=true"]}
    assert notes == ("s.toml: key 'prepare-during' is deprecated; use 'setup-variant-during'",)


def test_an_unknown_key_names_the_keys() -> None:
    with pytest.raises(UsageError, match="unknown key 'prepare-before'") as err:
        study.parse({"prepare-before": "x"}, "s.toml")
    assert "setup-variant" in str(err.value)


def test_until_decided_keys() -> None:
    options, _, _ = study.parse({"min-runs": 8, "max-runs": 40, "max-time": "2m30s",
                                 "tolerance": 0.05})
    assert options == {"min_runs": 8, "max_runs": 40, "max_time_s": 150.0, "tolerance": 0.05}
    assert study.parse({"max-time": 90})[0] == {"max_time_s": 90.0}
    with pytest.raises(UsageError, match="s.toml: key 'max-time' '5 weeks' does not parse"):
        study.parse({"max-time": "5 weeks"}, "s.toml")
    with pytest.raises(UsageError, match="key 'max-time' must be a number of seconds"):
        study.parse({"max-time": True}, "s.toml")
