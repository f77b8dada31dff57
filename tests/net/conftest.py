"""The testbed the network tests share: a fresh 1 Mbit/s bed with its server, removed
after the test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from backburner import system
from backburner.net import link, testbed

SPEC = "1mbit:0ms:300ms"


@pytest.fixture
def bed(state_dir: Path) -> Iterator[testbed.Testbed]:
    with system.Transaction("net-test") as tx:
        b = testbed.build(tx, link.parse(SPEC))
        testbed.start_server(b)
        yield b
