"""measure and verdict: a start timed cold with and without a replay of its pack, the
bytes the replay read that the start did not use, the verdict beside the pack; a replay
(as the boot unit runs it) skips a pack measured slower, and says why; --force replays it."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest
from helpers import bb, one_line_error

from backburner import system
from backburner.readahead import packfile, verdict
from backburner.readahead.pack import Entry, FileState, Pack
from backburner.trace import pagecache

from .conftest import Bed, resident

# another worker's cache drop (every cold bench trial drops the page cache machine-wide)
# evicts the pages a replay just read before the check sees them: run alone
pytestmark = pytest.mark.alone


def _pack(bed: Bed, rels: list[str], out: Path) -> Path:
    entries = []
    for rel in rels:
        st = os.stat(bed.path(rel))
        size = -(-st.st_size // 4096) * 4096
        entries.append(Entry(bed.path(rel), FileState(st.st_dev, 0, st.st_ino, st.st_size,
                                                      st.st_mtime_ns), ((0, size),)))
    packfile.save(out, Pack(tuple(entries)))
    return out


@pytest.mark.root
@pytest.mark.skipif(pagecache.missing() is not None, reason="needs perf as root")
def test_measure_times_both_ways_and_counts_what_the_start_left_unused(
        bed: Bed, tmp_path: Path) -> None:
    """The pack holds a 1 MiB file the start never reads: the replay's waste is at least
    that; three starts each way; the verdict is written beside the pack, read back the
    same, and shown by `show`."""
    pp = _pack(bed, ["a/one.txt", "lib/mod.py", "big.bin"], tmp_path / "app.pack")
    res = bb("readahead", "measure", "--rounds", "3", str(pp), "--", "sh", "-c",
             "cat a/one.txt lib/mod.py > /dev/null", cwd=bed.mnt, timeout=300)
    assert res.returncode == 0, res.err
    v = verdict.load(str(pp))
    assert v is not None and len(v.with_s) == len(v.without_s) == 3
    assert v.replayed >= (1 << 20) + 30_000 and v.unused >= 1 << 20
    assert v.unused < v.replayed and v.waste is not None and v.waste >= 0.9
    assert v.verdict in (verdict.SLOWER, verdict.FASTER, verdict.SAME)
    assert res.out.strip() == verdict.describe(v)
    assert "unused by the start" in res.out
    shown = bb("readahead", "show", str(pp))
    assert shown.returncode == 0 and f"verdict   {verdict.describe(v)}" in shown.out


@pytest.mark.root
def test_a_pack_measured_slower_is_not_replayed(bed: Bed, tmp_path: Path) -> None:
    pp = _pack(bed, ["big.bin"], tmp_path / "boot.pack")
    slow = verdict.Verdict(1_800_000_000_000_000_000, "startx", "with", (1.0, 1.1, 0.9),
                           (2.0, 2.1, 1.9), 2.0, 1.8, 2.2, verdict.SLOWER, 1 << 20, 1 << 19)
    Path(verdict.path_of(str(pp))).write_text(json.dumps(slow.as_dict()))
    system.drop_caches()
    res = bb("readahead", "replay", "--wait", str(pp))
    assert res.returncode == 0, res.err
    assert res.out.startswith("not replayed: measured 2027-01-15: the start took 2.00 s with "
                              "a replay launched with it and 1.00 s without (3 each: slower, "
                              "2.00x [1.80, 2.20]); the replay read 1 MiB, 50% of it unused")
    assert "--force" in res.out
    assert resident(bed.path("big.bin")) == []
    res = bb("readahead", "replay", "--wait", "--force", str(pp))
    assert res.returncode == 0 and res.out.startswith("replayed 1 file"), res.err
    assert "  measured 2027-01-15" in res.out
    assert resident(bed.path("big.bin")) == [(0, 1 << 20)]
    faster = dataclasses.replace(slow, verdict=verdict.FASTER, ratio=0.5, lo=0.4, hi=0.6)
    Path(verdict.path_of(str(pp))).write_text(json.dumps(faster.as_dict()))
    system.drop_caches()
    res = bb("readahead", "replay", "--wait", str(pp))
    assert res.out.startswith("replayed 1 file") and "faster" in res.out
    Path(verdict.path_of(str(pp))).write_text("{not json")
    res = bb("readahead", "replay", "--wait", str(pp))
    assert res.returncode == 65 and "boot.pack.verdict" in one_line_error(res)
