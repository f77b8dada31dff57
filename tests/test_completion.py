"""bash completion generated from the parser: sourced in a real bash, asked what it offers
for a few command lines, and the shipped copy (completion/backburner.bash) kept current."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from helpers import TIMEOUT, bb

from backburner.cli import build_parser
from backburner.cli.completion import TOP_OPTIONS

SHIPPED = Path(__file__).parent.parent / "completion" / "backburner.bash"

ASK = """
source "$1"
read -ra COMP_WORDS <<< "backburner $2"
[[ "$2" == *" " || -z "$2" ]] && COMP_WORDS+=("")
COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
_backburner
printf '%s\\n' "${COMPREPLY[@]}"
"""


@pytest.fixture(scope="module")
def script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    res = bb("completion", "bash")
    assert res.returncode == 0, res.err
    path = tmp_path_factory.mktemp("completion") / "backburner.bash"
    path.write_bytes(res.stdout)
    return path


def offered(script: Path, line: str) -> list[str]:
    done = subprocess.run(["bash", "-c", ASK, "_", str(script), line], capture_output=True,
                          text=True, timeout=TIMEOUT, check=True)
    return [w for w in done.stdout.splitlines() if w]


@pytest.mark.parametrize("line, expected", [
    ("", ["apply", "bench", "compare", "completion", "extents", "govern", "layout",
          "policies", "readahead", "report", "restore", "run", "slowdisk", "store", "trace"]),
    ("ap", ["apply"]),
    ("--v", ["--version"]),
    ("apply --sch", ["--scheduler"]),
    ("apply --devices ", ["all", "non-rotational", "rotational"]),
    ("apply --devices r", ["rotational"]),
    ("slowdisk ", ["create", "list", "profiles", "remove", "stats"]),
    ("slowdisk create --pro", ["--profile"]),
    ("run --io-weight 5 --no-c", ["--no-cgroup"]),
    ("completion ", ["bash"]),
    ("--debug apply --dry", ["--dry-run"]),
])
def test_bash_completes_commands_options_and_choices(script: Path, line: str,
                                                     expected: list[str]) -> None:
    assert offered(script, line) == expected


def test_after_run_dashdash_the_job_is_any_command(script: Path) -> None:
    assert "bash" in offered(script, "run --policy background -- ba")
    assert "--no-cgroup" not in offered(script, "run -- tar --no")  # the job's own options


def test_top_level_options_are_the_parsers() -> None:
    parser = build_parser()
    real = sorted(o for a in parser._actions for o in a.option_strings)
    assert sorted(o for a in TOP_OPTIONS for o in a.option_strings) == real


def test_the_shipped_script_is_current() -> None:
    """completion/backburner.bash is what distributions install; regenerate it with
    `backburner completion bash > completion/backburner.bash` when the CLI changes."""
    assert SHIPPED.read_bytes() == bb("completion", "bash").stdout
