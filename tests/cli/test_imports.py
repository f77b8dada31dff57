"""What the command line imports before a command runs: the parser is built from the named
command's module (from every command module for the program's own help), and parsing any
command line loads none of the commands' work (the system layer, the bench, the reports,
the store, numpy, SQLite...). Every invocation pays for what it imports, thousands of
times in the suite and in the QEMU guest, where the interpreter runs under emulation; a
command imports its work when it runs.

Each case is a fresh interpreter (`-I`, from /), as the program itself starts."""

from __future__ import annotations

import subprocess
import sys

import pytest
from helpers import TIMEOUT

#: Packages holding the commands' work, and the libraries they use: none of it is needed
#: to build the parser or to parse a command line.
HEAVY = ("backburner.apply", "backburner.bench", "backburner.doctor", "backburner.extents",
         "backburner.govern", "backburner.kernel", "backburner.net", "backburner.policy",
         "backburner.readahead", "backburner.report", "backburner.run", "backburner.slowdisk",
         "backburner.spawn", "backburner.status", "backburner.store", "backburner.system",
         "backburner.systemd", "backburner.trace", "numpy", "scipy", "matplotlib", "rich",
         "sqlite3", "psycopg", "mfusepy", "shtab", "dataclasses", "subprocess")
#: What the parser takes from those packages: the words its options offer (choices,
#: defaults), in modules that import nothing heavy themselves; and their packages' faces.
VOCABULARY = ("backburner.apply.names", "backburner.bench.names", "backburner.bench.presets",
              "backburner.kernel.disk_names", "backburner.report.names")
FACES = ("backburner.apply", "backburner.bench", "backburner.kernel", "backburner.report")

#: Parse a command line (as `main` does, without running its command) and say what was
#: imported; --version and --help print and exit in the parser, as they do for a user.
PROBE = """\
import sys
from backburner.cli import parser_for
try:
    parser_for(sys.argv[1:]).parse_args(sys.argv[1:])
except SystemExit:
    pass
print("\\n" + " ".join(sorted(sys.modules)))
"""


def imported(*argv: str) -> set[str]:
    done = subprocess.run([sys.executable, "-I", "-c", PROBE, *argv], cwd="/",
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr
    return set(done.stdout.splitlines()[-1].split())


def heavy(modules: set[str]) -> list[str]:
    allowed = set(VOCABULARY) | set(FACES)
    return sorted(m for m in modules - allowed
                  if any(m == h or m.startswith(h + ".") for h in HEAVY))


@pytest.mark.parametrize("argv", [
    [], ["--version"], ["--help"], ["run", "--", "true"], ["--debug", "run", "-v", "--", "true"],
    ["run", "--pid", "1", "--io", "idle"], ["status", "--json"], ["policies"], ["restore"],
    ["bench", "--preset", "quick", "--load-lifetime", "cell"], ["report", "r.db", "--json"],
    ["compare", "a.db", "b.db", "--by", "machine"], ["store", "copy", "a.db", "b.db"],
    ["slowdisk", "list"], ["govern", "status"], ["readahead", "show", "p"],
    ["layout", "check", "--pack", "p", "i"], ["extents", "show", "f"], ["trace", "show", "t"],
    ["apply", "--status"], ["doctor"], ["completion", "bash"]])
def test_parsing_a_command_line_imports_none_of_the_work(argv: list[str]) -> None:
    modules = imported(*argv)
    assert "backburner.cli" in modules  # (the probe ran)
    assert heavy(modules) == []


def test_the_words_the_parser_offers_import_nothing_heavy() -> None:
    """Each vocabulary module alone: light by what it imports, not only by where it is."""
    code = ("import importlib, sys\n"
            f"for name in {list(VOCABULARY)!r}:\n"
            "    importlib.import_module(name)\n"
            "print(' '.join(sorted(sys.modules)))")
    done = subprocess.run([sys.executable, "-I", "-c", code], cwd="/", capture_output=True,
                          text=True, timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr
    assert heavy(set(done.stdout.split())) == []


def test_the_check_sees_a_heavy_import() -> None:
    """What the cases above rely on: the probe's list is the interpreter's, and the check
    finds a module of the work in it (a parser building on bench's config would)."""
    assert heavy({"backburner.cli", "backburner.bench", "backburner.bench.config",
                  "backburner.report.names", "sqlite3"}) == ["backburner.bench.config",
                                                             "sqlite3"]
    code = PROBE.replace("import sys\n", "import sys, backburner.store\n")
    done = subprocess.run([sys.executable, "-I", "-c", code], cwd="/", capture_output=True,
                          text=True, timeout=TIMEOUT)
    assert "sqlite3" in heavy(set(done.stdout.splitlines()[-1].split()))

