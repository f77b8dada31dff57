"""extents.tables: dm tables and losetup arguments, and every refusal (pure, exact)."""

from __future__ import annotations

import random

import pytest

from backburner.base.errors import DataError
from backburner.extents import runs as R
from backburner.extents import tables as T
from backburner.extents.runs import Run

B = 4096
DEV = "/dev/sdz1"


def test_dm_table_lines() -> None:
    runs = [Run(0, 1 << 20, 2 * B), Run(2 * B, 8 << 20, B)]
    assert T.dm_table(runs, 3 * B, DEV) == (
        "0 16 linear /dev/sdz1 2048\n"
        "16 8 linear /dev/sdz1 16384\n")


def test_adjacent_lines_are_joined() -> None:
    """Shared next to unshared at the next device sector is one line; a hole followed by
    unwritten space is one zero line."""
    runs = [Run(0, 1 << 20, B), Run(B, (1 << 20) + B, B, R.SHARED),
            Run(3 * B, 1 << 22, B, R.UNWRITTEN)]
    assert T.dm_table(runs, 5 * B, DEV, zero_unwritten=True, allow_shared=True) == (
        "0 16 linear /dev/sdz1 2048\n"
        "16 24 zero\n")


@pytest.mark.parametrize(("run", "kind", "overridable"), [
    (Run(0, 0, B, R.UNWRITTEN), "unwritten", True),
    (Run(0, 0, B, R.SHARED), "shared", True),
    (Run(0, 0, B, R.DELALLOC | R.UNKNOWN), "not-allocated", False),
    (Run(0, 0, B, R.ENCODED), "encoded", False),
    (Run(0, 0, B, R.ENCRYPTED), "encrypted", False),
    (Run(0, 0, B, R.INLINE | R.NOT_ALIGNED), "not-aligned", False),
    (Run(0, 100, B), "not-aligned", False),  # no flag, but not on a sector boundary
])
def test_each_kind_is_refused_by_name(run: Run, kind: str, overridable: bool) -> None:
    found = T.problems(R.segments([run], B))
    assert [(p.kind, p.logical, p.length, p.overridable) for p in found] == \
        [(kind, 0, B, overridable)]
    with pytest.raises(DataError, match=f"file bytes 0\\+4096 \\({kind}\\)"):
        T.dm_targets([run], B)


def test_overrides_allow_only_what_they_name() -> None:
    runs = [Run(0, 1 << 20, B, R.UNWRITTEN), Run(B, 1 << 21, B, R.SHARED)]
    size = 3 * B  # and a hole at the end
    kinds = [p.kind for p in T.problems(R.segments(runs, size))]
    assert kinds == ["unwritten", "shared", "hole"]
    assert [p.kind for p in T.problems(R.segments(runs, size), zero_unwritten=True)] == \
        ["shared"]
    assert T.problems(R.segments(runs, size), zero_unwritten=True, allow_shared=True) == []
    with pytest.raises(DataError) as err:
        T.dm_targets(runs, size, allow_shared=True)
    assert "--zero-unwritten" in str(err.value) and "--allow-shared" not in str(err.value)
    encoded = [Run(0, 1 << 20, B, R.ENCODED)]
    with pytest.raises(DataError, match="compressed"):
        T.dm_targets(encoded, B, zero_unwritten=True, allow_shared=True)


def test_refusal_names_the_first_ranges_and_counts_the_rest() -> None:
    runs = [Run(i * 2 * B, (100 + i) * B, B, R.UNWRITTEN) for i in range(6)]
    with pytest.raises(DataError) as err:
        T.dm_targets(runs, 12 * B)
    msg = str(err.value)
    assert "file bytes 0+4096 (unwritten), file bytes 4096+4096 (hole), file bytes " \
        "8192+4096 (unwritten) and 9 more" in msg
    assert "\n" not in msg


def test_sizes_a_block_device_cannot_have() -> None:
    with pytest.raises(DataError, match="empty"):
        T.dm_targets([], 0)
    with pytest.raises(DataError, match="not a whole number of 512-byte sectors"):
        T.dm_targets([Run(0, 1 << 20, B)], 1000)


def test_loop_args() -> None:
    la = T.loop_args([Run(0, 5 << 20, 3 * B)], 3 * B, DEV)
    assert la.argv() == ["--offset", str(5 << 20), "--sizelimit", str(3 * B), DEV]
    with pytest.raises(DataError, match="2 runs on the device, not one"):
        T.loop_args([Run(0, 5 << 20, B), Run(B, 9 << 20, B)], 2 * B, DEV)
    with pytest.raises(DataError, match="unwritten"):
        T.loop_args([Run(0, 5 << 20, B, R.UNWRITTEN)], B, DEV)
    with pytest.raises(DataError, match="hole"):
        T.loop_args([Run(0, 5 << 20, B)], 2 * B, DEV)
    assert T.loop_args([Run(0, 5 << 20, B, R.SHARED)], B, DEV, allow_shared=True).offset == \
        5 << 20


@pytest.mark.parametrize("seed", range(100))
def test_table_reads_back_the_layout(seed: int) -> None:
    """Every sector of the file, read through the table, comes from where the runs say
    (or is zero where they have no device bytes); nothing twice, nothing left out."""
    rng = random.Random(seed)
    runs, pos = [], 0
    for _ in range(rng.randint(1, 12)):
        pos += rng.choice([0, 0, B])  # sometimes a hole
        n = rng.randint(1, 5) * B
        flags = rng.choice([0, 0, R.UNWRITTEN, R.SHARED])
        runs.append(Run(pos, rng.randrange(0, 1 << 20, 8) * 512, n, flags))
        pos += n
    size = pos + rng.choice([0, B])
    targets = T.dm_targets(runs, size, zero_unwritten=True, allow_shared=True)
    got: dict[int, int | None] = {}
    for t in targets:
        for k in range(t.sectors):
            assert t.start + k not in got
            got[t.start + k] = None if t.kind == "zero" else t.device_sector + k
    assert sorted(got) == list(range(size // 512))
    for s in range(size // 512):
        run = next((r for r in runs if r.logical <= s * 512 < r.end), None)
        want = None if run is None or run.kind == "unwritten" else \
            (run.physical + s * 512 - run.logical) // 512
        assert got[s] == want
