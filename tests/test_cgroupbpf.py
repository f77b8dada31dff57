"""cgroupbpf: the four-instruction program, and its load, attach, query and detach on a
real cgroup v2 group."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from backburner import cgroupbpf


def test_program_sets_the_priority_and_lets_the_packet_through() -> None:
    insns = cgroupbpf.priority_program(0x10010)
    ops = [struct.unpack("<BBhi", insns[i:i + 8]) for i in range(0, len(insns), 8)]
    assert ops == [(0xB7, 2, 0, 0x10010), (0x63, 0x21, 32, 0), (0xB7, 0, 0, 1),
                   (0x95, 0, 0, 0)]
    with pytest.raises(ValueError):
        cgroupbpf.priority_program(-1)


@pytest.mark.root
def test_attach_query_detach(cgroup2_group: Path) -> None:
    fd = os.open(cgroup2_group, os.O_RDONLY | os.O_DIRECTORY)
    prog = cgroupbpf.load_priority_program(0x10010)
    try:
        pid = cgroupbpf.program_id(prog)
        assert cgroupbpf.attached(fd) == []
        cgroupbpf.attach(fd, prog)
        assert cgroupbpf.attached(fd) == [pid]
        again = cgroupbpf.program_fd(pid)
        assert again is not None
        cgroupbpf.detach(fd, again)
        os.close(again)
        assert cgroupbpf.attached(fd) == []
    finally:
        os.close(prog)
        os.close(fd)
    assert cgroupbpf.program_fd(pid) is None  # unloaded once nothing holds it
