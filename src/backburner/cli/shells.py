"""Shell completion for bash, zsh and fish, generated from the argparse parser so that it
cannot drift from the CLI.

bash and zsh come from shtab, the maintained generator (python3-shtab in Debian). shtab
gained fish only in releases no Debian ships (Debian 12 has 1.5.5, Debian 13 has 1.7.1),
so the fish script is rendered here, from the same reading of the parser: `value_kind`
says once what an argument's value is (a file, a directory, one of fixed choices, the job's
own command line after `run --`, or something to type), `mark` tells shtab, and `fish`
uses it directly. Everything here is pure: parser in, text out.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from dataclasses import dataclass, field

#: shtab's completion hints (its documented ``action.complete`` dictionaries)
FILE = {"bash": "_shtab_compgen_files", "zsh": "_files"}
DIR = {"bash": "_shtab_compgen_dirs", "zsh": "_files -/"}
#: the job's command line (`run -- COMMAND ARGS`): a command name, then that command's own
#: completion (zsh's _normal, as for nice or sudo); bash offers its arguments as file names
JOB = {"bash": "_backburner_job_or_file", "zsh": "_backburner_job"}

#: metavars of values that are typed, not picked from the file system
TYPED = {"N", "S", "X", "PCT", "SECONDS", "SIZE", "CLASS", "POLICY", "NAME", "REGEX", "SPEC",
         "GLOBS", "UNIT", "DEVICE", "[NAME=]COMMAND", "NAME=COMMAND", "COMMAND", "CMD", "FMT",
         "SHELL", "URL", "RATE:DELAY[:BUFFER]"}

BASH_PREAMBLE = """\
# the job's command line: its command name first, then file names. shtab's completer sets
# current_action_args_start_index to the first word of the job (or of the -- before it); the
# word itself is read from COMP_WORDS, as shtab passes "" for a word that starts with "-".
_backburner_job_or_file() {
  local start=${current_action_args_start_index:-0} cur=${COMP_WORDS[COMP_CWORD]}
  [[ ${COMP_WORDS[start]} == -- ]] && start=$((start + 1))
  if (( COMP_CWORD == start )); then compgen -c -- "$cur"; else compgen -f -- "$cur"; fi
}
"""

ZSH_PREAMBLE = """\
# the job's command line, completed as its own (as for nice or sudo), past a leading --
_backburner_job() {
  if [[ ${words[1]} == -- ]]; then
    shift words
    (( CURRENT-- ))
  fi
  _normal
}
"""

PREAMBLE = {"bash": BASH_PREAMBLE, "zsh": ZSH_PREAMBLE}


def value_kind(action: argparse.Action) -> str:
    """subcommands, job, choices, dir, file or typed (nothing to offer); none for a flag."""
    if isinstance(action, argparse._SubParsersAction):
        return "subcommands"
    if not action.option_strings and action.nargs == argparse.REMAINDER:
        return "job"
    if action.choices is not None:
        return "choices"
    if action.nargs == 0:
        return "none"
    if action.type in (int, float):
        return "typed"
    metavar = action.metavar if isinstance(action.metavar, str) else None
    if metavar is not None and metavar in TYPED:
        return "typed"
    if metavar is not None and metavar.split("|")[0] == "DIR" and "|" not in metavar:
        return "dir"
    return "file"


def _parsers(parser: argparse.ArgumentParser, path: str = "") -> Iterator[
        tuple[str, argparse.ArgumentParser]]:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action._name_parser_map.items():
                yield from _parsers(sub, f"{path} {name}".strip())


def mark(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Give every argument whose value is a path or a command line shtab's hint for it."""
    hints = {"file": FILE, "dir": DIR, "job": JOB}
    for _path, sub in _parsers(parser):
        for action in sub._actions:
            hint = hints.get(value_kind(action))
            if hint is not None and not hasattr(action, "complete"):
                action.complete = hint  # type: ignore[attr-defined]
    return parser


def script(parser: argparse.ArgumentParser, shell: str) -> str:
    """The completion script for `shell` (one of `completion.SHELLS`)."""
    if shell == "fish":
        return fish(parser)
    import shtab

    text = shtab.complete(mark(parser), shell=shell, preamble=PREAMBLE[shell])
    return text if text.endswith("\n") else text + "\n"


# --- fish ---------------------------------------------------------------------------------


@dataclass
class Command:
    """One command path of the program ("" is the program itself) as fish completes it."""

    path: str
    subcommands: list[tuple[str, str]] = field(default_factory=list)  # (name, help)
    options: list[argparse.Action] = field(default_factory=list)
    positionals: list[argparse.Action] = field(default_factory=list)
    job: bool = False


def commands(parser: argparse.ArgumentParser) -> list[Command]:
    """Every command path with what can follow it; hidden arguments (help SUPPRESS) left out."""
    found = []
    for path, sub in _parsers(parser):
        cmd = Command(path)
        for action in sub._actions:
            if action.help == argparse.SUPPRESS:
                continue
            if isinstance(action, argparse._SubParsersAction):
                helps = {a.dest: a.help or "" for a in action._choices_actions}
                cmd.subcommands = [(n, helps.get(n, "")) for n in action._name_parser_map]
            elif action.option_strings:
                cmd.options.append(action)
            elif value_kind(action) == "job":
                cmd.job = True
            else:
                cmd.positionals.append(action)
        found.append(cmd)
    return found


def _q(text: str) -> str:
    """A fish single-quoted string."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _short_help(action_help: str | None) -> str:
    text = " ".join((action_help or "").split())
    return text if len(text) <= 90 else text[:87].rstrip() + "..."


def _value_spec(action: argparse.Action) -> str:
    kind = value_kind(action)
    if kind == "choices":
        return "-x -a " + _q(" ".join(str(c) for c in action.choices or ()))
    if kind == "file":
        return "-r -F"
    if kind == "dir":
        return "-x -a '(__fish_complete_directories (commandline -ct))'"
    return "-x" if kind == "typed" else ""


def _option_line(prog: str, cmd: Command, action: argparse.Action) -> str:
    names = []
    for opt in action.option_strings:
        names.append(f"-l {opt[2:]}" if opt.startswith("--") else f"-s {opt[1:]}")
    parts = [f"complete -c {prog} -n {_q(f'__{prog}_at {_q(cmd.path)}')}", *names,
             _value_spec(action), f"-d {_q(_short_help(action.help))}"]
    return " ".join(p for p in parts if p)


def fish(parser: argparse.ArgumentParser, prog: str | None = None) -> str:
    """A fish completion script (for /usr/share/fish/vendor_completions.d/PROG.fish)."""
    prog = prog or parser.prog
    cmds = commands(parser)
    valued = [f"{c.path}|{opt}" for c in cmds for a in c.options if a.nargs != 0
              for opt in a.option_strings]
    lines = [_FISH_HEAD.format(prog=prog,
                               paths=" ".join(_q(c.path) for c in cmds if c.path),
                               valued=" ".join(_q(v) for v in valued),
                               jobs=" ".join(_q(c.path) for c in cmds if c.job))]
    for cmd in cmds:
        at = _q(f"__{prog}_at {_q(cmd.path)}")
        for name, text in cmd.subcommands:
            lines.append(f"complete -c {prog} -n {at} -f -a {_q(name)} "
                         f"-d {_q(_short_help(text))}")
        for action in cmd.options:
            lines.append(_option_line(prog, cmd, action))
        for action in cmd.positionals:
            spec = _value_spec(action)
            if spec:
                lines.append(f"complete -c {prog} -n {at} {spec}")
        if cmd.job:
            lines.append(f"complete -c {prog} -n __{prog}_in_job -x "
                         f"-a '(__{prog}_complete_job)'")
    return "\n".join(lines) + "\n"


_FISH_HEAD = """\
# fish completion for {prog}; generated from its parser by `{prog} completion fish`.
# Install as /usr/share/fish/vendor_completions.d/{prog}.fish (or ~/.config/fish/completions/).

set -g __{prog}_paths {paths}
set -g __{prog}_valued {valued}
set -g __{prog}_jobs {jobs}

function __{prog}_scan --description 'the command path before the cursor, and the job in it'
    # __{prog}_path: the (sub)command typed so far; __{prog}_job: the index of the job's
    # first word (`run [OPTIONS] [--] COMMAND ...`), 0 before it; __{prog}_value: 1 when
    # the word at the cursor is the value of an option
    set -g __{prog}_path ''
    set -g __{prog}_job 0
    set -g __{prog}_value 0
    set -l tokens (commandline -opc)
    set -e tokens[1]
    set -l i 0
    for t in $tokens
        set i (math $i + 1)
        if test $__{prog}_value -eq 1
            set -g __{prog}_value 0
            continue
        end
        if contains -- "$__{prog}_path" $__{prog}_jobs
            if test "$t" = --
                set -g __{prog}_job (math $i + 1)
                return
            else if not string match -q -- '-*' "$t"
                set -g __{prog}_job $i
                return
            end
        end
        switch "$t"
            case '--*=*'
            case '-*'
                if contains -- "$__{prog}_path|$t" $__{prog}_valued
                    set -g __{prog}_value 1
                end
            case '*'
                set -l next (string trim -- "$__{prog}_path $t")
                if contains -- "$next" $__{prog}_paths
                    set -g __{prog}_path "$next"
                end
        end
    end
end

function __{prog}_at --description 'the command path before the cursor is $argv[1]'
    __{prog}_scan
    test $__{prog}_job -eq 0 -a "$__{prog}_path" = "$argv[1]"
end

function __{prog}_in_job --description 'the cursor is in the job command line'
    __{prog}_scan
    test $__{prog}_value -eq 0; or return 1
    test $__{prog}_job -gt 0; and return 0
    contains -- "$__{prog}_path" $__{prog}_jobs
    and not string match -q -- '-*' (commandline -ct)
end

function __{prog}_complete_job --description 'complete the job command line as its own'
    __{prog}_scan
    set -l tokens (commandline -opc)
    set -e tokens[1]
    set -l job
    if test $__{prog}_job -gt 0
        for j in (seq $__{prog}_job (count $tokens))
            set -a job $tokens[$j]
        end
    end
    __fish_complete_subcommand --commandline $job (commandline -ct)
end

complete -c {prog} -e
complete -c {prog} -f"""
