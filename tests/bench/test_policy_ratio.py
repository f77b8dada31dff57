"""benchmarks/policy_ratio.py (the governed-vs-background figures of
docs/measurements/govern.md): one line per cell that has both policies, with the ratio of the
medians the stored trials give."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from helpers import make_db

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "policy_ratio.py"


def test_ratios_of_the_two_policies_per_cell(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    make_db(db, medians={("bfq", "none", "-"): 1.0, ("bfq", "install-loop", "govern"): 2.2,
                         ("bfq", "install-loop", "background"): 2.0,
                         ("mq-deadline", "install-loop", "govern"): 3.0,
                         ("mq-deadline", "readers:1:seq", "background"): 1.5},
            spread=0.001)
    res = subprocess.run([sys.executable, str(SCRIPT), str(db)], capture_output=True,
                         text=True, check=True)
    lines = res.stdout.splitlines()
    assert len(lines) == 1, res.stdout  # only bfq · install-loop has both
    assert lines[0].startswith(f"{db}: bfq · install-loop: govern / background = 1.10 [")


def test_a_missing_or_foreign_file_is_one_line(tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_text("not a database")
    for path, status in ((tmp_path / "none.db", 66), (junk, 65)):
        res = subprocess.run([sys.executable, str(SCRIPT), str(path)], capture_output=True,
                             text=True)
        assert res.returncode == status, res.stderr
        assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr, res.stderr
