"""The README stays a user's guide that works: every `backburner` command in its shell blocks
parses with the CLI's own parser (so a renamed option or command fails here, not for a
reader), every command of the CLI has an example, the README stays short and holds CI's
command verbatim, and no README or docs page names a commit. The documentation holds
together: every relative link of the README and of every docs page reaches a file (and a
heading, for `#anchor`), and docs/README.md lists every page."""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from backburner.base.errors import UsageError
from backburner.cli import build_parser

ROOT = Path(__file__).parents[1]
README = ROOT / "README.md"
LIMIT_BYTES = 15_000  # a guide a newcomer reads, not a lab notebook; figures live in docs/

FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.M | re.S)
#: Shell blocks hold commands; text blocks hold output and layouts; toml blocks, rule files.
SHELL, KNOWN = {"sh", "bash"}, {"sh", "bash", "text", "toml"}
SEPARATORS = {"|", "||", "&&", ";", "&", "(", ")"}
REDIRECTIONS = {">", ">>", "<", "<<", ">&", "<&", "&>"}

#: Words of 7+ hex digits that are really not commit hashes, each with where and what it is.
NOT_HASHES = {
    "1884802575": "README: the seed the demo's bench drew and printed",
    "1550577": "README: the demo's run cgroup, named by its PID and start time",
    "3d1219c7c4c5404aaa1f6d2a48adfda4":
        "docs/reference/extents-map.md: the example map's machine id",
    "fa47d28d": "docs/reference/extents-map.md: the example map's filesystem UUID, first group",
    "12a23725da7a": "docs/reference/extents-map.md: the example map's filesystem UUID, last group",
    "8589934592": "docs/reference/extents-map.md: the example file's size in bytes (8 GiB)",
    "1714564800000000000": "docs/reference/extents-map.md: the example file's mtime in ns",
    "1048576":
        "docs/reference/extents-map.md: the example partition's start and a hole's length (1 MiB)",
    "500107862016": "docs/reference/extents-map.md: the example partition's size in bytes",
    "134217728": "docs/reference/extents-map.md: the example segment's length (128 MiB)",
    "34603008": "docs/reference/extents-map.md: the example segment's device offset",
    "1700000000": "docs/reference/trace-file.md: the example trace's Unix time",
    "4a6f45e3ced8c4b5df094d959072b315":
        "docs/measurements/slowdisk.md: a cited gist's address (a source)",
    "168843977": "docs/measurements/ssd.md: the seed the ssd preset's first run drew and printed",
    "32846223": "docs/measurements/ssd.md: the seed the ssd preset's second run drew and printed",
}
HEXWORD = re.compile(r"\b[0-9a-f]{7,40}\b")


def _blocks(text: str) -> list[tuple[str, str]]:
    return [(m.group(1).strip(), m.group(2)) for m in FENCE.finditer(text)]


def _logical_lines(block: str) -> list[str]:
    """A block's lines with backslash continuations joined."""
    lines, current = [], ""
    for raw in block.splitlines():
        if raw.rstrip().endswith("\\"):
            current += raw.rstrip()[:-1] + " "
            continue
        lines.append(current + raw)
        current = ""
    if current:
        lines.append(current)
    return lines


def _simple_commands(line: str) -> list[list[str]]:
    """The simple commands of one shell line: split at pipes and lists, redirections
    dropped, command substitutions inside words taken as commands of their own."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    commands: list[list[str]] = [[]]
    substituted: list[list[str]] = []
    skip_next = False
    for token in lexer:
        if skip_next:
            skip_next = False
        elif token in SEPARATORS:
            commands.append([])
        elif token in REDIRECTIONS:
            skip_next = True
        else:
            for inner in re.findall(r"\$\(([^()]*)\)", token):
                substituted.extend(_simple_commands(inner))
            commands[-1].append(token)
    return [c for c in commands + substituted if c]


def _backburner_argv(command: list[str]) -> list[str] | None:
    """The arguments of a backburner invocation, however the README spells the program."""
    words = list(command)
    while words and (words[0] == "sudo" or re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0])):
        words.pop(0)
    if words and Path(words[0]).name == "backburner":
        return words[1:]
    return None


def readme_commands(text: str) -> list[tuple[str, list[str]]]:
    """(the README's line, its argv) for every backburner command in a shell block."""
    found = []
    for lang, body in _blocks(text):
        if lang not in SHELL:
            continue
        for line in _logical_lines(body):
            try:
                commands = _simple_commands(line)
            except ValueError as error:  # shlex: an unclosed quote
                pytest.fail(f"not a shell line: {line.strip()} ({error})")
            for command in commands:
                argv = _backburner_argv(command)
                if argv is not None:
                    found.append((" ".join(line.split()), argv))
    return found


def _parses(argv: list[str]) -> str | None:
    """None when the CLI's parser takes argv (nothing is run), else why not."""
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            build_parser().parse_args(argv)
    except UsageError as error:
        return str(error)
    except SystemExit as done:  # --help and --version print and exit 0
        return None if done.code in (0, None) else f"exit {done.code}"
    return None


def test_every_block_says_what_it_holds() -> None:
    """Commands are found in sh blocks only, so a block must say whether it is one."""
    langs = [lang for lang, _ in _blocks(README.read_text())]
    assert langs and all(lang in KNOWN for lang in langs), langs


def test_every_readme_command_parses() -> None:
    commands = readme_commands(README.read_text())
    bad = [f"{line}\n    -> {why}" for line, argv in commands if (why := _parses(argv))]
    assert not bad, "README commands the CLI does not take:\n" + "\n".join(bad)


def test_every_command_of_the_cli_has_an_example() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "cmd")
    shown = {argv[0] for _, argv in readme_commands(README.read_text()) if argv}
    assert set(sub.choices) - shown == set()


def test_a_command_that_does_not_parse_is_caught() -> None:
    """The check itself: a misspelt option, a made-up command and a bad choice fail."""
    text = ("```sh\nbackburner run --policy background -- tar xf a.tar\n"
            "backburner bench --preset quick \\\n    --no-such-option\n"
            "x=$(backburner frobnicate) && echo $x\n"
            "/opt/backburner/bin/backburner report r.db --export xml > out\n```\n")
    commands = readme_commands(text)
    assert [argv[0] for _, argv in commands] == ["run", "bench", "frobnicate", "report"]
    assert [bool(_parses(argv)) for _, argv in commands] == [False, True, True, True]
    assert commands[1][0] == "backburner bench --preset quick --no-such-option"


def test_the_readme_is_short() -> None:
    assert len(README.read_bytes()) <= LIMIT_BYTES


def test_the_readme_holds_cis_command_verbatim() -> None:
    """.ci/run runs the README's test command: its last command line is in a shell block,
    near the top and again under Development."""
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    last = [line for line in ci if line and not line.startswith("#")][-1]
    text = README.read_text()
    shell_lines = [line.strip() for lang, body in _blocks(text) if lang in SHELL
                   for line in body.splitlines()]
    assert shell_lines.count(last) >= 2, last
    development = text[text.index("\n## Development"):]
    assert re.search(rf"^{re.escape(last)}$", development, re.M), last


def _documents() -> list[Path]:
    return sorted([*ROOT.glob("*.md"), *(ROOT / "docs").rglob("*.md")])


@pytest.mark.parametrize("path", _documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_commit_hashes_in_the_documentation(path: Path) -> None:
    words = set(HEXWORD.findall(path.read_text()))
    assert words - set(NOT_HASHES) == set(), f"{path.relative_to(ROOT)}: commit hashes?"


def test_the_hash_check_finds_hashes() -> None:
    text = "as before commit 4d4f9cd (and c995e42f01), at 0.1.0, in run-26492.432997"
    assert set(HEXWORD.findall(text)) == {"4d4f9cd", "c995e42f01"}


#: Inline links and images, `[text](target)` and `![alt](target)`; reference-style links
#: are not used in these documents.
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")
INLINE_CODE = re.compile(r"(`+).*?\1", re.S)
DOCS = ROOT / "docs"


def _prose(text: str) -> str:
    """The text without its fenced blocks and inline code, where a link is not a link."""
    text = re.sub(r"^(```|~~~)[^\n]*\n.*?^\1[ \t]*$", "", text, flags=re.M | re.S)
    return INLINE_CODE.sub("", text)


def slug(heading: str) -> str:
    """The anchor GitHub (and most Markdown renderers) give a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every heading's anchor, a repeated heading's with -1, -2, ... as GitHub numbers them."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for heading in re.findall(r"^#{1,6} +(.+?) *#*$", re.sub(
            r"^(```|~~~)[^\n]*\n.*?^\1[ \t]*$", "", text, flags=re.M | re.S), re.M):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def dead_links(path: Path) -> list[str]:
    """The relative links of one Markdown file that reach no file, or no heading in it."""
    dead = []
    for target in LINK.findall(_prose(path.read_text())):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # https:, mailto:
            continue
        name, _, anchor = target.partition("#")
        goal = (path.parent / name).resolve() if name else path
        if not goal.exists():
            dead.append(f"{target}: no such file")
        elif anchor and goal.suffix == ".md" and anchor not in anchors(goal.read_text()):
            dead.append(f"{target}: no heading #{anchor}")
    return dead


@pytest.mark.parametrize("path", _documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_reaches_a_file_and_a_heading(path: Path) -> None:
    assert dead_links(path) == [], f"{path.relative_to(ROOT)}: dead links"


def test_the_link_check_finds_dead_links(tmp_path: Path) -> None:
    """The check itself: a missing file, a missing heading and a missing image are dead; a
    link in code, an address and a heading that is there are not."""
    (tmp_path / "other.md").write_text("# Other\n\n## What it holds, `exactly`\n\n"
                                       "## Twice\n\n## Twice\n")
    page = tmp_path / "page.md"
    page.write_text("# Page\n\n[ok](other.md#what-it-holds-exactly) [ok](other.md#twice-1)\n"
                    "[ok](#page) [ok](https://example.org/x.md) `[no](code.md)`\n"
                    "```text\n[no](fenced.md)\n```\n"
                    "[gone](missing.md) [gone](other.md#not-there) ![gone](img/x.png)\n")
    assert dead_links(page) == ["missing.md: no such file", "other.md#not-there: no heading "
                                "#not-there", "img/x.png: no such file"]


def test_the_index_lists_every_page_and_every_file_is_used() -> None:
    """docs/README.md names every page of docs/ (one line each: who it is for, what it
    answers); every other file there (a figure's image) is shown by some page."""
    index = DOCS / "README.md"
    listed = {(DOCS / target.partition("#")[0]).resolve()
              for target in LINK.findall(_prose(index.read_text()))}
    pages = {p.resolve() for p in DOCS.rglob("*.md")} - {index.resolve()}
    assert sorted(str(p.relative_to(DOCS)) for p in pages - listed) == []
    used = {(doc.parent / target.partition("#")[0]).resolve()
            for doc in _documents() for target in LINK.findall(_prose(doc.read_text()))}
    others = {p.resolve() for p in DOCS.rglob("*") if p.is_file() and p.suffix != ".md"}
    assert sorted(str(p.relative_to(DOCS)) for p in others - used) == []


@pytest.mark.parametrize(("var", "value"), [("BACKBURNER_TEST_GUESTS", "abc"),
                                            ("BACKBURNER_TEST_WORKERS", "0")])
def test_the_suite_refuses_a_worker_count_that_is_not_one_in_one_line(var: str,
                                                                      value: str) -> None:
    """Before anything is installed or run (the check exits ahead of scripts/setup)."""
    done = subprocess.run([str(ROOT / "scripts" / "test")], env={**os.environ, var: value},
                          capture_output=True, text=True, timeout=60, cwd="/")
    assert done.returncode == 64
    assert done.stdout == ""
    assert done.stderr == f"scripts/test: {var}={value} is not a number of workers (1 or more)\n"
