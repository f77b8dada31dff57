"""A sysfs value: what it reads of a selected scheduler.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from backburner import system

pytestmark = pytest.mark.timeout(60)  # a hang fails fast instead of at 300 s


@pytest.mark.root
def test_sysfs_value_reads_the_selected_scheduler(loop_queue: Path) -> None:
    text = (loop_queue / "scheduler").read_text()
    assert system.SysfsValue(str(loop_queue / "scheduler"), "bfq").read() == \
        text.split("[")[1].split("]")[0]
