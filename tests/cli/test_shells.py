"""Completion for bash, zsh and fish, generated from the parser: each script loaded in the
real shell (installed by scripts/setup --test) and asked what it offers for a few command
lines: commands, options, fixed choices, file names, and after `run --` the job's own."""

from __future__ import annotations

import argparse
import os
import subprocess
from pathlib import Path

import pytest
from helpers import TIMEOUT, bb, one_line_error

from backburner.cli import build_parser
from backburner.cli import shells as completion
from backburner.cli.completion import SHELLS

COMMANDS = ["apply", "bench", "compare", "completion", "doctor", "extents", "govern", "layout",
            "policies", "readahead", "report", "restore", "run", "slowdisk", "status", "store",
            "trace"]


@pytest.fixture(scope="module")
def scripts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each shell's script where that shell looks for it (zsh: an fpath directory)."""
    where = tmp_path_factory.mktemp("completion")
    paths = {"bash": where / "backburner.bash", "zsh": where / "zsh" / "_backburner",
             "fish": where / "backburner.fish"}
    for shell, path in paths.items():
        res = bb("completion", shell)
        assert res.returncode == 0 and res.stderr == b"", res.err
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(res.stdout)
    return paths


def _sh(argv: list[str], **kw: object) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT, **kw)
    assert done.returncode == 0 and not done.stderr, done.stderr
    return done.stdout


# --- bash ---------------------------------------------------------------------------------

BASH_ASK = """
source "$1"
read -ra COMP_WORDS <<< "backburner $2"
[[ "$2" == *" " || -z "$2" ]] && COMP_WORDS+=("")
COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
_shtab_backburner
printf '%s\\n' "${COMPREPLY[@]}"
"""


def bash_offers(script: Path, line: str) -> list[str]:
    return sorted(w for w in _sh(["bash", "-c", BASH_ASK, "_", str(script), line]).splitlines()
                  if w)


def test_bash_registers_the_completion(scripts: dict[str, Path]) -> None:
    out = _sh(["bash", "-c", 'source "$1" && complete -p backburner', "_", str(scripts["bash"])])
    assert out.split()[-1] == "backburner" and "-F _shtab_backburner" in out


@pytest.mark.parametrize("line, expected", [
    ("", COMMANDS),
    ("ap", ["apply"]),
    ("--v", ["--version"]),
    ("apply --sch", ["--scheduler"]),
    ("apply --devices ", ["all", "non-rotational", "nvme", "rotational"]),
    ("apply --devices r", ["rotational"]),
    ("slowdisk ", ["create", "list", "profiles", "remove", "stats"]),
    ("slowdisk create --pro", ["--profile"]),
    ("run --io-weight 5 --no-c", ["--no-cgroup"]),
    ("completion ", ["bash", "fish", "zsh"]),
    ("--debug apply --dry", ["--dry-run"]),
])
def test_bash_completes_commands_options_and_choices(scripts: dict[str, Path], line: str,
                                                     expected: list[str]) -> None:
    assert bash_offers(scripts["bash"], line) == expected


def test_bash_after_run_the_job_is_any_command_then_its_files(scripts: dict[str, Path],
                                                             tmp_path: Path) -> None:
    (tmp_path / "archive.tar").write_bytes(b"")
    script = scripts["bash"]
    assert "bash" in bash_offers(script, "run --policy background -- ba")
    assert "bash" in bash_offers(script, "run --io idle ba")  # no -- needed
    assert bash_offers(script, f"run -- tar xf {tmp_path}/arc") == [f"{tmp_path}/archive.tar"]
    assert bash_offers(script, "run -- tar --no") == []  # the job's options are not ours


def test_bash_completes_file_names_for_paths(scripts: dict[str, Path], tmp_path: Path) -> None:
    (tmp_path / "results.db").write_bytes(b"")
    assert bash_offers(scripts["bash"], f"report {tmp_path}/res") == [f"{tmp_path}/results.db"]


# --- zsh ----------------------------------------------------------------------------------

#: An interactive zsh in a pseudo-terminal (zpty) with compinit and the script on its fpath,
#: compadd wrapped to print what it is given; each line is typed with a TAB after it.
ZSH_ASK = r"""
zmodload zsh/zpty
zpty z zsh -f -i
zpty -w z "PROMPT= RPROMPT=; fpath=(${(q)1} \$fpath); autoload -U compinit && compinit -u -D"
zpty -w z 'compadd () { if [[ ${@[1,(i)(-|--)]} == *-(O|A|D)\ * ]]; then builtin compadd "$@"; return $?; fi; local -a hits; builtin compadd -A hits "$@"; (( $#hits )) && print -rl -- "<""m>"${^hits}; builtin compadd "$@" }'
zpty -w z 'zstyle ":completion:*" list-prompt ""; zstyle ":completion:*" menu no; finish() { print "<e""nd>" }'
for line in "${@[2,-1]}"; do
  zpty -w z 'comppostfuncs=(finish)'
  zpty -w -n z "$line"$'\t'
  zpty -r z out '*<end>*'
  print -r -- "<line>"
  print -r -- "$out" | tr -d '\r' | grep -ao '<m>[^<]*' | sed 's/^<m>//; s/\x1b.*//' | sort -u
  zpty -w -n z $'\x15'
done
zpty -d z
"""  # noqa: E501 - shell


def zsh_offers(script: Path, *lines: str) -> list[list[str]]:
    out = _sh(["zsh", "-f", "-c", ZSH_ASK, "_", str(script.parent),
               *(f"backburner {line}" for line in lines)])
    return [[w for w in block.splitlines() if w] for block in out.split("<line>\n")[1:]]


def test_zsh_loads_the_function_with_compinit(scripts: dict[str, Path]) -> None:
    check = ('fpath=("$1" $fpath); autoload -U compinit && compinit -u -D; '
             'print -r -- $_comps[backburner]; autoload +X _backburner; whence -w _backburner')
    out = _sh(["zsh", "-f", "-c", check, "_", str(scripts["zsh"].parent)])
    assert out.splitlines() == ["_backburner", "_backburner: function"]


def test_zsh_completes_commands_options_choices_and_the_job(scripts: dict[str, Path],
                                                           tmp_path: Path) -> None:
    (tmp_path / "results.db").write_bytes(b"")
    offered = zsh_offers(scripts["zsh"], "sl", "slowdisk ", "apply --devices ", "apply --dr",
                         "run -- ba", "run --io idle tar --ver", f"report {tmp_path}/res")
    assert offered[:4] == [["slowdisk"], ["create", "list", "profiles", "remove", "stats"],
                           ["all", "non-rotational", "nvme", "rotational"], ["--dry-run"]]
    assert "bash" in offered[4]
    assert "--version" in offered[5]  # tar's own options
    assert offered[6] == ["results.db"]


# --- fish ---------------------------------------------------------------------------------


def fish_offers(script: Path, line: str) -> list[str]:
    """fish with its own completions (tar's, for a job) but no user configuration, and
    nothing written to the home directory (fish makes its config and data directories)."""
    env = {**os.environ, **{f"XDG_{d}_HOME": str(script.parent / "home" / d.lower())
                            for d in ("CONFIG", "DATA", "CACHE", "STATE")}}
    out = _sh(["fish", "-c", 'source $argv[1]; complete -C "backburner $argv[2]"',
               str(script), line], env=env)
    return sorted(w.split("\t")[0] for w in out.splitlines() if w)


@pytest.mark.parametrize("line, expected", [
    ("sl", ["slowdisk"]),
    ("", COMMANDS),
    ("slowdisk ", ["create", "list", "profiles", "remove", "stats"]),
    ("slowdisk create --pro", ["--profile"]),
    ("apply --devices ", ["all", "non-rotational", "nvme", "rotational"]),
    ("--debug apply --dry", ["--dry-run"]),
    ("completion ", ["bash", "fish", "zsh"]),
    ("run --slice ", []),  # a value to type: no file names, no commands
])
def test_fish_completes_commands_options_and_choices(scripts: dict[str, Path], line: str,
                                                     expected: list[str]) -> None:
    assert fish_offers(scripts["fish"], line) == expected


def test_fish_after_run_the_job_completes_as_its_own(scripts: dict[str, Path],
                                                    tmp_path: Path) -> None:
    (tmp_path / "results.db").write_bytes(b"")
    script = scripts["fish"]
    assert "bash" in fish_offers(script, "run -- ba")
    assert "bash" in fish_offers(script, "run --io idle ba")
    assert "--no-cgroup" in fish_offers(script, "run --no")
    assert "--version" in fish_offers(script, "run -- tar --vers")  # tar's own options
    assert fish_offers(script, f"report {tmp_path}/res") == [f"{tmp_path}/results.db"]


# --- all three ----------------------------------------------------------------------------


def _visible(parser: argparse.ArgumentParser) -> tuple[set[str], set[str]]:
    names, options = set(), set()
    for cmd in completion.commands(parser):
        names.update(name for name, _ in cmd.subcommands)
        options.update(o for a in cmd.options for o in a.option_strings)
    return names, options


def _spelled(shell: str, option: str) -> str:
    """How the script names an option: fish's complete takes -l NAME and -s X."""
    if shell != "fish":
        return option
    return f"-l {option[2:]}" if option.startswith("--") else f"-s {option[1:]}"


@pytest.mark.parametrize("shell", SHELLS)
def test_every_command_and_option_is_in_the_script(scripts: dict[str, Path],
                                                   shell: str) -> None:
    text = scripts[shell].read_text()
    names, options = _visible(build_parser())
    assert set(COMMANDS) <= names
    missing = {n for n in names if n not in text}
    missing |= {o for o in options if _spelled(shell, o) not in text}
    assert not missing


def test_hidden_options_are_not_offered() -> None:
    parser = argparse.ArgumentParser(prog="x")
    parser.add_argument("--old", help=argparse.SUPPRESS)
    parser.add_argument("--new", help="the new one")
    assert "--new" in completion.fish(parser) and "old" not in completion.fish(parser)


def test_value_kinds() -> None:
    p = argparse.ArgumentParser()
    kinds = {a.dest: completion.value_kind(a) for a in (
        p.add_argument("--out", metavar="FILE"), p.add_argument("--plot", metavar="DIR"),
        p.add_argument("--n", type=int), p.add_argument("--io", metavar="CLASS"),
        p.add_argument("--fmt", choices=["a", "b"]), p.add_argument("--flag", action="store_true"),
        p.add_argument("cmd", nargs=argparse.REMAINDER))}
    assert kinds == {"out": "file", "plot": "dir", "n": "typed", "io": "typed", "fmt": "choices",
                     "flag": "none", "cmd": "job"}


def test_an_unknown_shell_is_one_line_and_64() -> None:
    res = bb("completion", "tcsh")
    assert res.returncode == 64 and res.stdout == b""
    assert "invalid choice: 'tcsh'" in one_line_error(res)
