"""Extent maps that device-mapper really loads: for a fragmented file on ext4, xfs and
btrfs, `extents map --dm-table`'s table is loaded with `dmsetup create --readonly` and
the mapped device is the file, byte for byte; unwritten space read through
`--zero-unwritten`'s zero targets reads as zeros; a file moved by e4defrag after `save`
makes `check` say so. (guest/dm_tables.py does the work in the guest.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .rig import Guest

pytestmark = [pytest.mark.root, pytest.mark.timeout(900)]

SCRIPT = Path(__file__).parent / "guest" / "dm_tables.py"


@pytest.mark.parametrize("fs", ["ext4", "xfs", "btrfs"])
def test_the_dm_table_maps_the_file_byte_for_byte(guest: Guest, fs: str) -> None:
    guest.put("/root/dm_tables.py", SCRIPT.read_text())
    r = guest.run(["python3", "/root/dm_tables.py", fs, "/var/tmp/bbdm"], timeout=300,
                  check=True)
    got = json.loads(r.out.strip().splitlines()[-1])
    assert got["runs"] > 1 and got["lines"] > 1, got  # really fragmented
    assert got["target"]["same"], got
    assert got["target"]["dev_size"] >= got["size"], got
    if fs == "ext4":
        assert got["sparse"]["same"], got
        assert got["check"]["before"] == 0, got
        assert got["check"]["after"] == 1 and "moved" in got["check"]["said"], got
