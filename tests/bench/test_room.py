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


def test_a_layout_too_big_for_the_testbed_is_refused_with_the_size_that_fits() -> None:
    spec = DeviceSpec.parse("testbed:1G")
    room.check_probe_room(spec, "aged", 900 << 20, free=950 << 20)  # fits: nothing said
    with pytest.raises(UsageError) as err:
        room.check_probe_room(spec, "aged", 1300 << 20, free=950 << 20)
    assert "laid out as 'aged' need about" in str(err.value)
    assert "testbed:2G" in (err.value.hint or "") and "--probe-layout touched" in err.value.hint
