"""bench.prepare: --prepare and setup-variant commands as real processes, in a private
directory, with and without a shell; a failure keeps its last lines of stderr."""

from __future__ import annotations

from pathlib import Path

from backburner.bench import prepare
from backburner.bench.commands import Prepare
from backburner.bench.devices import Device


def _device(tmp_path: Path) -> Device:
    return Device("testbed:1G", "loop99", "/sys/block/loop99/queue", str(tmp_path / "loads"),
                  None, str(tmp_path))


def test_a_prepare_that_succeeds(tmp_path: Path) -> None:
    out = tmp_path / "marker"
    done = prepare.before_trial(f"echo \"$BACKBURNER_DEVICE\" > {out}; echo noise",
                                _device(tmp_path), 10)
    assert (done.status, done.exit_code, done.tail) == ("ok", 0, ())
    assert out.read_text() == "/dev/loop99\n"


def test_a_prepare_that_fails_keeps_its_stderr(tmp_path: Path) -> None:
    done = prepare.before_trial("echo out; for i in 1 2 3 4 5 6 7; do echo line$i >&2; done;"
                                " exit 3", _device(tmp_path), 10)
    assert (done.status, done.exit_code) == ("failed", 3)
    assert done.tail == ("line3", "line4", "line5", "line6", "line7")  # no stdout
    assert done.said == "line7"


def test_a_prepare_that_outlives_the_timeout_is_stopped(tmp_path: Path) -> None:
    done = prepare.before_trial("echo started >&2; sleep 30", _device(tmp_path), 0.3)
    assert done.status == "timeout" and done.seconds < 10 and done.tail == ("started",)


def test_without_a_shell_the_command_is_split_into_words(tmp_path: Path) -> None:
    """-N: `;` and `$VAR` are plain words, as they are for the probe."""
    done = prepare.before_trial("sh -c 'echo $0 >&2; exit 4' 'a;b'", _device(tmp_path), 10,
                                shell="none")
    assert (done.status, done.tail) == ("failed", ("a;b",))
    step = prepare.prepare_step(Prepare("v", "echo '$HOME'", during=False), _device(tmp_path),
                                10, shell="none")
    assert (step.status, step.said) == ("ok", "$HOME")
