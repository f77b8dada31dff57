"""backburner(1) generated from the parser: groff and man render it without a warning, and
its text holds every command and every option; scripts/build-extras writes the page and the
three completion scripts from a source tree."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from helpers import TIMEOUT

from backburner.cli import build_parser, manpage
from backburner.cli import shells as completion

ROOT = Path(__file__).parents[2]


def rendered_text(page: Path) -> str:
    """The page as man shows it, plain (groff warnings on: any is a failure)."""
    done = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-P-cbou", str(page)],
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("man") / "backburner.1"
    assert manpage.main([str(path)]) == 0
    return path


def test_groff_renders_every_command_and_option(page: Path) -> None:
    text = " ".join(rendered_text(page).split())  # words, whatever the line breaks
    for cmd in completion.commands(build_parser()):
        if cmd.path:
            assert f"'backburner {cmd.path}'" in text, cmd.path
        for action in cmd.options:
            for option in action.option_strings:
                assert option in text, (cmd.path, option)
    for section in ("NAME", "SYNOPSIS", "EXIT STATUS", "ENVIRONMENT", "FILES", "SEE ALSO"):
        assert section in text


def test_man_renders_it(page: Path) -> None:
    done = subprocess.run(["man", "-l", str(page)], capture_output=True, text=True,
                          timeout=TIMEOUT, env={**os.environ, "MANPAGER": "cat", "MANWIDTH": "80"})
    assert done.returncode == 0 and "backburner run" in done.stdout


def test_exit_statuses_include_runs_own_and_the_jobs() -> None:
    statuses = dict(manpage.exit_statuses())
    assert {"0", "1", "64", "69", "70", "77", "125", "126", "127"} <= set(statuses)
    assert "run" in statuses["125"]


def test_laid_out_text_keeps_its_lines_and_a_leading_quote_is_text() -> None:
    laid_out = manpage.roff_text("loads:\n  readers:N   fio jobs\n  copy        one file")
    assert laid_out == ".nf\nloads:\n  readers:N   fio jobs\n  copy        one file\n.fi"
    assert manpage.roff_text("'idle' band,\nas a fraction") == r"\&'idle' band, as a fraction"
    assert manpage.roff_text("a\n\nb") == "a\n.sp\nb"
    assert manpage.roff_text("--x") == r"\-\-x"


def test_the_date_is_reproducible(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "0")
    assert r'"1970\-01\-01"' in manpage.render().splitlines()[0]


def test_build_extras_writes_the_page_and_the_completions(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    subprocess.run([str(ROOT / "scripts" / "build-extras"), str(tmp_path)], check=True,
                   timeout=120, cwd="/", env=env, capture_output=True)
    assert "EXIT STATUS" in rendered_text(tmp_path / "man" / "backburner.1")
    made = {p.name: p.read_text() for p in (tmp_path / "completion").iterdir()}
    assert set(made) == {"backburner.bash", "_backburner", "backburner.fish"}
    assert made["_backburner"].startswith("#compdef backburner")
    assert "complete -o bashdefault -F _shtab_backburner backburner" in made["backburner.bash"]
    assert "complete -c backburner" in made["backburner.fish"]
