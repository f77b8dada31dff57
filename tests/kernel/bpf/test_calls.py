"""kernel.bpf.calls on this kernel: a program loaded, attached to a real cgroup v2 group,
found by query and by id, detached and gone once nothing holds it; an array map written and
read back in the host's byte order; our programs and maps told apart by name; a program the
kernel refuses named in one line."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from backburner.base.errors import UnavailableError
from backburner.kernel.bpf import asm
from backburner.kernel.bpf import calls as bpf


def _exit_program(value: int = 1) -> bytes:
    a = asm.Asm()
    a.op(asm.MOV_IMM, dst=asm.R0, imm=value)
    a.op(asm.EXIT)
    return a.assemble()


def _load(name: str = "bb_test_calls") -> int:
    return bpf.load_program(bpf.BPF_PROG_TYPE_CGROUP_SKB, bpf.BPF_CGROUP_INET_EGRESS,
                            _exit_program(), name, "cgroup-skb")


@pytest.mark.root
def test_attach_query_detach(cgroup2_group: Path) -> None:
    fd = os.open(cgroup2_group, os.O_RDONLY | os.O_DIRECTORY)
    prog = _load()
    try:
        pid = bpf.program_id(prog)
        assert pid in bpf.program_ids()
        assert bpf.attached(fd) == []
        bpf.attach(fd, prog)
        assert bpf.attached(fd) == [pid]
        assert bpf.attached(fd, bpf.BPF_CGROUP_SOCK_OPS) == []  # another kind
        again = bpf.program_fd(pid)
        assert again is not None
        bpf.detach(fd, again)
        os.close(again)
        assert bpf.attached(fd) == []
    finally:
        os.close(prog)
        os.close(fd)
    assert bpf.program_fd(pid) is None  # unloaded once nothing holds it


@pytest.mark.root
def test_an_array_map_holds_what_was_written_in_the_hosts_order() -> None:
    fd = bpf.create_array_map(8, 2, "bb_test_map")
    try:
        assert bpf.array_lookup(fd, 1, 8) == bytes(8)
        bpf.array_update(fd, 1, struct.pack("=II", 3000, 2))
        assert struct.unpack("=II", bpf.array_lookup(fd, 1, 8)) == (3000, 2)
        assert bpf.array_lookup(fd, 0, 8) == bytes(8)
        ident = bpf.map_id(fd)
        assert ident in bpf.map_ids()
        other = bpf.map_fd(ident)
        assert other is not None
        os.close(other)
        with pytest.raises(OSError):
            bpf.array_lookup(fd, 2, 8)  # beyond its entries
    finally:
        os.close(fd)
    assert bpf.map_fd(ident) is None


@pytest.mark.root
def test_ours_are_known_by_name() -> None:
    mine, theirs = _load("bb_test_ours"), _load("test_not_ours")
    try:
        programs, _maps = bpf.ours()
        assert bpf.program_id(mine) in programs
        assert bpf.program_id(theirs) not in programs
    finally:
        os.close(mine)
        os.close(theirs)


@pytest.mark.root
def test_a_program_run_once_returns_its_value() -> None:
    prog = bpf.load_program(bpf.BPF_PROG_TYPE_SCHED_CLS, 0, _exit_program(0x10030),
                            "bb_test_run", "tc classifier")
    try:
        assert bpf.run_once(prog, bytes(12) + b"\x08\x00" + bytes(40))[0] == 0x10030
    finally:
        os.close(prog)


@pytest.mark.root
def test_a_refused_program_is_one_line_and_69() -> None:
    broken = _exit_program()[:8]  # r0 = 1 and no exit: the verifier refuses it
    with pytest.raises(UnavailableError) as err:
        bpf.load_program(bpf.BPF_PROG_TYPE_CGROUP_SKB, bpf.BPF_CGROUP_INET_EGRESS, broken,
                         "bb_test_broken", "cgroup-skb")
    assert err.value.exit_status == 69 and "\n" not in str(err.value)
    assert "refused a cgroup-skb BPF program" in str(err.value)


def test_a_path_not_on_bpffs_is_not_taken_for_one(tmp_path: Path) -> None:
    assert not bpf.bpffs_mounted(str(tmp_path))
