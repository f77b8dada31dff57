"""The background replay's lean entry point reads back exactly what `background_argv`
writes, refuses anything else with 64, and starts without argparse, shutil or OpenSSL."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from backburner.errors import UsageError
from backburner.readahead import __main__ as lean
from backburner.readahead import replay

SRC = str(Path(__file__).parents[2] / "src")


@pytest.mark.parametrize("opts", [
    replay.ReplayOptions(),
    replay.ReplayOptions(budget=12345, deadline_s=2.5, order="physical", io="be:4",
                         rebase=("/old dir", "/new\ndir")),
])
def test_what_background_argv_writes_is_read_back(opts: replay.ReplayOptions) -> None:
    argv = replay.background_argv("/some/app.pack", opts)
    assert argv[1:4] == ["-S", "-m", "backburner.readahead"]
    assert lean.parse(argv[4:]) == ("/some/app.pack", opts)


@pytest.mark.parametrize("argv", [[], ["--", "a", "b"], ["--deadline"], ["--deadline", "x",
                                  "--", "p"], ["--order", "sideways", "--", "p"],
                                  ["--bogus", "--", "p"], ["p"]])
def test_anything_else_is_a_usage_error(argv: list[str]) -> None:
    with pytest.raises(UsageError):
        lean.parse(argv)


def test_it_starts_without_argparse_shutil_or_openssl(tmp_path: Path) -> None:
    code = ("import sys, runpy; sys.argv = ['x', '--', '/nonexistent.pack']\n"
            "try:\n    runpy.run_module('backburner.readahead', run_name='__main__')\n"
            "except SystemExit as e:\n    code = e.code\n"
            "print(code, sorted(m for m in ('argparse', 'shutil', 'hashlib', 'tempfile', "
            "'lzma') if m in sys.modules))")
    res = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": SRC}, timeout=60)
    assert res.stdout.split(" ", 1)[1].strip() == "[]", res.stdout + res.stderr
    assert res.stdout.split(" ", 1)[0] == "66", res.stdout  # the pack does not exist
