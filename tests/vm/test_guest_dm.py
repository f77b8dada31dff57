"""Extent maps that device-mapper really loads: for a fragmented file on ext4, xfs and
btrfs, and on ext4 in a partition, `extents map --dm-table`'s table is loaded with
`dmsetup create --readonly` and the mapped device is the file, byte for byte. While the
filesystem is mounted the kernel refuses the table, and the hint says so before anyone
tries; unmounted, the saved map's table (`map --saved`) is the same and the hint says it
can be loaded. Unwritten space read through `--zero-unwritten`'s zero targets reads as
zeros; a file moved by e4defrag after `save` makes `check` say so and the old map's table
refused. (guest/dm_tables.py does the work in the guest.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .rig import Guest

pytestmark = [pytest.mark.root, pytest.mark.timeout(900)]

SCRIPT = Path(__file__).parent / "guest" / "dm_tables.py"


@pytest.mark.parametrize("case", ["ext4", "xfs", "btrfs", "ext4-partition"])
def test_the_dm_table_maps_the_file_byte_for_byte(guest: Guest, case: str) -> None:
    guest.put("/root/dm_tables.py", SCRIPT.read_text())
    r = guest.run(["python3", "/root/dm_tables.py", case, "/var/tmp/bbdm"], timeout=300,
                  check=True)
    got = json.loads(r.out.strip().splitlines()[-1])
    assert got["runs"] > 1 and got["lines"] > 1, got  # really fragmented
    assert got["target"]["same"], got
    assert got["target"]["dev_size"] >= got["size"], got
    # mounted: the kernel refuses the table, and the hint said it would
    assert got["mounted_load"]["status"] != 0, got
    assert "busy" in got["mounted_load"]["said"].lower(), got
    assert got["mounted_hint"].startswith("not loadable now:"), got
    assert "is mounted at" in got["mounted_hint"], got
    # unmounted: the saved map's table, proven by the device's bytes, is the same one
    assert got["saved_same"], got
    assert got["unmounted_hint"].startswith("load it with: dmsetup create"), got
    if case == "ext4-partition":
        dev = got["device"]
        assert dev["path"].endswith("p1") and dev["disk"] == dev["path"][:-2], got
        assert dev["start"] == 2048 * 512, got
        assert got["table_devices"] == [dev["path"]], got  # relative to the partition
        assert got["whole_disk_same"], got
    if case == "ext4":
        assert got["sparse"]["same"], got
        assert got["check"]["before"] == 0, got
        assert got["check"]["after"] == 1 and "moved" in got["check"]["said"], got
        assert got["old_map"]["status"] == 65 and got["old_map"]["out"] == "", got
        assert "moved since the map was saved" in got["old_map"]["said"], got
