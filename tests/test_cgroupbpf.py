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


def _ops(insns: bytes) -> list[tuple[int, int, int, int]]:
    return [struct.unpack("<BBhi", insns[i:i + 8]) for i in range(0, len(insns), 8)]


def test_ack_data_program_splits_by_length() -> None:
    ops = _ops(cgroupbpf.ack_data_program(0x10010, 0x10030))
    assert ops == [
        (0x61, 0x12, 0, 0),                          # r2 = skb->len
        (0x25, 2, 3, cgroupbpf.ACK_MAX_LEN),         # if r2 > max: to the data's priority
        (0xB7, 3, 0, 0x10010), (0x63, 0x31, 32, 0),  # skb->priority = the ACKs'
        (0x05, 0, 2, 0),                             # to the end
        (0xB7, 3, 0, 0x10030), (0x63, 0x31, 32, 0),  # skb->priority = the data's
        (0xB7, 0, 0, 1), (0x95, 0, 0, 0),            # return 1
    ]
    # 0: that kind keeps its own priority
    assert len(_ops(cgroupbpf.ack_data_program(0x10010, 0))) == 7


def test_sock_ops_program_answers_its_events_and_jumps_stay_inside() -> None:
    for cc in (None, "lp"):
        ops = _ops(cgroupbpf.sock_ops_program(7, cc))
        checked = {imm for code, regs, _off, imm in ops if code == 0x15 and regs == 7}
        assert checked == {2, 4, 5, 14} | ({3} if cc else set())
        for i, (code, _regs, off, _imm) in enumerate(ops):
            if code in (0x05, 0x15, 0x1D, 0x25):
                assert 0 <= i + 1 + off < len(ops)
        calls = [imm for code, _r, _o, imm in ops if code == 0x85]
        assert calls.count(49) == 1 + (2 if cc else 0)  # the clamp; cc at connect, passive
        assert calls.count(57) == 1  # the clamp is read first, set only when it differs
        maps = [i for i, (code, regs, _o, imm) in enumerate(ops) if code == 0x18 and regs >> 4]
        assert len(maps) == 2 and all(ops[i][3] == 7 for i in maps)  # the map's descriptor
        assert ops[-2:] == [(0xB7, 0, 0, 1), (0x95, 0, 0, 0)]
    with pytest.raises(ValueError):
        cgroupbpf.sock_ops_program(7, "a name far too long")


@pytest.mark.root
def test_sock_ops_program_loads_with_its_map(cgroup2_group: Path) -> None:
    window = cgroupbpf.create_window_map()
    fd = os.open(cgroup2_group, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert cgroupbpf.window(window) == (0, 0)
        cgroupbpf.set_window(window, 3000, 2)
        assert cgroupbpf.window(window) == (3000, 2)
        prog = cgroupbpf.load_sock_ops_program(window, "cubic")
        try:
            assert cgroupbpf.program_maps(prog) == [cgroupbpf.map_id(window)]
            cgroupbpf.attach(fd, prog, cgroupbpf.BPF_CGROUP_SOCK_OPS)
            pid = cgroupbpf.program_id(prog)
            assert cgroupbpf.attached(fd, cgroupbpf.BPF_CGROUP_SOCK_OPS) == [pid]
            assert cgroupbpf.attached(fd) == []  # not an egress program
            cgroupbpf.detach(fd, prog, cgroupbpf.BPF_CGROUP_SOCK_OPS)
            assert cgroupbpf.attached(fd, cgroupbpf.BPF_CGROUP_SOCK_OPS) == []
        finally:
            os.close(prog)
    finally:
        os.close(window)
        os.close(fd)
