"""Shell completion generated from the argparse parser, so it cannot drift from the CLI.

`walk` turns the parser into plain data (per command path: its sub-commands, options, the
options that take a value and their choices, whether the rest of the line is a job's own
command line); `bash` renders that data as a bash completion script. Both are pure.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

ANY = "__any__"  # an option's value that is not from a fixed list: complete file names


@dataclass
class Node:
    """One command path (``""``, ``"run"``, ``"slowdisk create"``)."""

    subcommands: list[str] = field(default_factory=list)  # and a positional's choices
    options: list[str] = field(default_factory=list)
    values: dict[str, list[str]] = field(default_factory=dict)  # option -> choices ([] = any)
    job: bool = False  # a REMAINDER positional: the rest is another program's command line


def walk(commands: Mapping[str, argparse.ArgumentParser],
         top_options: Sequence[argparse.Action]) -> dict[str, Node]:
    """The completion data of the program: top-level options and each command's parser."""
    root = Node(subcommands=sorted(commands))
    _add_options(root, top_options)
    nodes = {"": root}
    for name, parser in sorted(commands.items()):
        _walk_parser(parser, name, nodes)
    return nodes


def _walk_parser(parser: argparse.ArgumentParser, path: str, nodes: dict[str, Node]) -> None:
    node = Node()
    nodes[path] = node
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            node.subcommands = sorted(action._name_parser_map)
            for name, sub in sorted(action._name_parser_map.items()):
                _walk_parser(sub, f"{path} {name}", nodes)
        elif not action.option_strings and action.nargs == argparse.REMAINDER:
            node.job = True
        elif not action.option_strings and action.choices:  # a positional from a fixed list
            node.subcommands += sorted(str(c) for c in action.choices)
    _add_options(node, [a for a in parser._actions if a.option_strings])


def _add_options(node: Node, actions: Sequence[argparse.Action]) -> None:
    for action in actions:
        node.options += action.option_strings
        if action.nargs != 0:
            choices = sorted(str(c) for c in action.choices) if action.choices else []
            for opt in action.option_strings:
                node.values[opt] = choices


def _quote(words: Sequence[str]) -> str:
    return '"' + " ".join(words) + '"'


def bash(nodes: Mapping[str, Node], prog: str = "backburner") -> str:
    """A bash completion script: ``source`` it, or put it where bash-completion looks
    (``/usr/share/bash-completion/completions/backburner``)."""
    fn = f"_{prog}"
    node_cases = "\n".join(
        f'        "{path}") _bb_subs={_quote(n.subcommands)}; _bb_opts={_quote(n.options)}; '
        f"_bb_job={int(n.job)};;" for path, n in nodes.items())
    value_cases = "\n".join(
        f'        "{path}|{opt}") echo {_quote(choices or [ANY])};;'
        for path, n in nodes.items() for opt, choices in n.values.items())
    return _TEMPLATE.format(prog=prog, fn=fn, node_cases=node_cases, value_cases=value_cases)


_TEMPLATE = """\
# bash completion for {prog}; generated from its parser by `{prog} completion bash`.
{fn}_node() {{  # $1: command path -> _bb_subs, _bb_opts, _bb_job
    case "$1" in
{node_cases}
        *) _bb_subs=""; _bb_opts=""; _bb_job=0;;
    esac
}}

{fn}_values() {{  # $1: command path, $2: option -> its choices; fails if it takes no value
    case "$1|$2" in
{value_cases}
        *) return 1;;
    esac
}}

{fn}() {{
    local cur="${{COMP_WORDS[COMP_CWORD]}}" path="" word values i=1 job=-1
    COMPREPLY=()
    while (( i < COMP_CWORD )); do
        word="${{COMP_WORDS[i]}}"
        {fn}_node "$path"
        if (( _bb_job )) && [[ $word == -- || $word != -* ]]; then
            job=$i
            [[ $word == -- ]] && job=$((i + 1))
            break
        fi
        if [[ $word == -* ]]; then
            if [[ $word != *=* ]] && {fn}_values "$path" "$word" >/dev/null; then
                i=$((i + 1))
            fi
        elif [[ " $_bb_subs " == *" $word "* ]]; then
            path="${{path:+$path }}$word"
        fi
        i=$((i + 1))
    done
    if (( job >= 0 )); then  # the job's own command line
        if (( COMP_CWORD == job )); then
            COMPREPLY=( $(compgen -c -- "$cur") )
        else
            compopt -o default 2>/dev/null
        fi
        return 0
    fi
    {fn}_node "$path"
    if (( COMP_CWORD > 1 )) && values=$({fn}_values "$path" "${{COMP_WORDS[COMP_CWORD-1]}}"); then
        if [[ $values == {any} ]]; then
            compopt -o default 2>/dev/null
        else
            COMPREPLY=( $(compgen -W "$values" -- "$cur") )
        fi
        return 0
    fi
    if [[ $cur == -* ]]; then
        COMPREPLY=( $(compgen -W "$_bb_opts" -- "$cur") )
    elif [[ -n $_bb_subs ]]; then
        COMPREPLY=( $(compgen -W "$_bb_subs" -- "$cur") )
    else
        compopt -o default 2>/dev/null
    fi
    return 0
}}
complete -F {fn} {prog}
""".replace("{any}", ANY)
