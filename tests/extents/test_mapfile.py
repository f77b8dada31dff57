"""extents.mapfile: the saved map's format, its validation, and what moved (pure)."""

from __future__ import annotations

import hashlib
import json

import pytest

from backburner.base.errors import DataError
from backburner.extents import mapfile as M
from backburner.extents import runs as R
from backburner.extents.runs import Run

B = 4096
SHA = hashlib.sha256(b"x").hexdigest()


def make(runs: list[Run], size: int) -> M.MapFile:
    segs = R.segments(runs, size)
    return M.MapFile(
        created="2025-01-01T00:00:00+00:00", host="h", machine_id="m" * 32, path="/x/f.img",
        inode=12, size=size, mtime_ns=1, segments=M.saved_segments(segs, [SHA] * len(segs)),
        device=M.SavedDevice("/dev/sdz1", "8:1", "/dev/sdz", 1 << 20, 1 << 30, "ext4", "u-1"))


RUNS = [Run(0, 100 * B, 2 * B), Run(3 * B, 50 * B, B, R.UNWRITTEN | R.SHARED)]
SAVED = make(RUNS, 5 * B)


def test_round_trip() -> None:
    text = M.dumps(SAVED)
    assert M.loads(text, "f.map") == SAVED
    doc = json.loads(text)
    assert doc["format"] == M.FORMAT and doc["version"] == M.VERSION
    assert [s["kind"] for s in doc["segments"]] == ["data", "hole", "unwritten", "hole"]
    assert doc["segments"][2]["flags"] == ["unwritten", "shared"]


def _edited(edit) -> str:
    doc = json.loads(M.dumps(SAVED))
    edit(doc)
    return json.dumps(doc)


def _resealed(edit) -> str:
    """An edit with the checksum made to fit: only the validation can catch it."""
    doc = json.loads(M.dumps(SAVED))
    doc.pop("map_sha256")
    edit(doc)
    return json.dumps({**doc, "map_sha256": M._self_digest(doc)})


@pytest.mark.parametrize(("text", "match"), [
    ("", "not a map file"),
    ("[1, 2]", "not a backburner extents map"),
    ('{"format": "something"}', "not a backburner extents map"),
    (_edited(lambda d: d["segments"][0].update(physical=100 * B + 512)), "corrupted"),
    (_edited(lambda d: d.update(version=2)), "version 2"),
    (_resealed(lambda d: d["segments"][1].update(logical=B)), "starts at file byte 4096"),
    (_resealed(lambda d: d["file"].update(size=6 * B)), "cover 20480 bytes of 24576"),
    (_resealed(lambda d: d["segments"][0].update(sha256="zz")), "not a SHA-256"),
    (_resealed(lambda d: d["segments"][0].update(kind="lava")), "unknown segment kind"),
    (_resealed(lambda d: d["segments"][0].update(physical=-1)), "malformed"),
    (_resealed(lambda d: d["segments"][0].update(length=True)), "malformed"),
    (_resealed(lambda d: d.pop("device")), "malformed: KeyError"),
    (_resealed(lambda d: d["segments"][0].update(flags=["sparkly"])), "unknown extent flag"),
])
def test_bad_map_files_are_refused(text: str, match: str) -> None:
    with pytest.raises(DataError, match=match) as err:
        M.loads(text, "f.map")
    assert "\n" not in str(err.value)


def test_nothing_moved() -> None:
    now = R.segments(RUNS, 5 * B)
    assert M.moved(SAVED.segments, now) == []
    # the same places, merged differently (a neighbour joined), are not a move
    joined = [Run(0, 100 * B, B), Run(B, 101 * B, B), RUNS[1]]
    assert M.moved(SAVED.segments, R.segments(joined, 5 * B)) == []


def test_moves_are_named() -> None:
    now = [Run(0, 100 * B, B), Run(B, 900 * B, B), Run(3 * B, 50 * B, B, R.SHARED),
           Run(4 * B, 60 * B, B)]
    got = M.moved(SAVED.segments, R.segments(now, 5 * B))
    assert [(m.saved.logical, m.now) for m in got] == [
        (0, ((0, B, "data", 100 * B), (B, B, "data", 900 * B))),
        (3 * B, ((3 * B, B, "data", 50 * B),)),  # written since: kind changed, same place
        (4 * B, ((4 * B, B, "data", 60 * B),)),  # a hole filled
    ]
    assert got[0].describe() == ("file bytes 0+8192: was data at device byte 409600, now data "
                                 "at device byte 409600, data at device byte 3686400")
