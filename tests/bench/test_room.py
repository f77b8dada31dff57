"""bench/room: a testbed image against the free space that holds it, and the loads' files
against the room left beside the probe's.
"""

from __future__ import annotations

import pytest

from backburner.base.errors import UsageError
from backburner.bench import room
from backburner.bench.devices import DeviceSpec


def test_space_check(tmp_path: object) -> None:
    spec = DeviceSpec.parse("testbed:65536T")
    with pytest.raises(UsageError, match="does not fit"):
        room.check_space(spec, str(tmp_path))
    room.check_space(DeviceSpec.parse("testbed:64M"), str(tmp_path))


def test_the_room_left_beside_the_probes_files_is_checked_at_run_time() -> None:
    spec = DeviceSpec.parse("testbed:2G")
    with pytest.raises(UsageError, match=r"need 1 GiB but testbed:2G has 600 MiB left beside "
                       r"the probe's 700 MiB; use a larger device, e.g. testbed:3G"):
        room.check_room(spec, 1 << 30, 700 << 20, free=600 << 20)
    room.check_room(spec, 1 << 30, 700 << 20, free=1100 << 20)
