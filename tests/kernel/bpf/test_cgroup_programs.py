"""kernel.bpf.cgroup_programs, by what they do on this kernel: the priority a packet
leaves with (the egress programs, run once on packets of chosen lengths), the priority a
socket made in the group gets, and the window clamp and congestion control of the TCP
sockets of a process in the group (the sock_ops program and its map)."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from helpers import TIMEOUT

from backburner.kernel.bpf import calls as bpf
from backburner.kernel.bpf import cgroup_programs as progs

SK_BUFF_SIZE = 256  # at least sizeof(struct __sk_buff) (192 on 6.x)


def _run_on_packet(prog: int, length: int, priority: int = 0) -> tuple[int, int]:
    """(return value, skb->priority after) of an egress program run once on an IPv4
    packet of `length` bytes from the network header on."""
    frame = bytes(12) + b"\x08\x00" + bytes(length)  # Ethernet, EtherType IPv4
    ctx = bytearray(36)
    struct.pack_into("=I", ctx, progs.SKB_PRIORITY, priority)
    ret, out = bpf.run_once(prog, frame, bytes(ctx), SK_BUFF_SIZE)
    return ret, struct.unpack_from("=I", out, progs.SKB_PRIORITY)[0]


@pytest.mark.root
def test_the_priority_program_sets_every_packets_priority() -> None:
    prog = progs.load_priority_program(0x10010, "bb_test_prio")
    try:
        for length in (40, 1500):
            assert _run_on_packet(prog, length, priority=7) == (1, 0x10010)
    finally:
        os.close(prog)


@pytest.mark.root
def test_the_ack_data_program_tells_acks_from_data_by_length() -> None:
    prog = progs.load_priority_program(0x10010, "bb_test_ackdata", data_priority=0x10030)
    try:
        assert _run_on_packet(prog, 40) == (1, 0x10010)  # an ACK: IPv4 and TCP headers
        assert _run_on_packet(prog, progs.ACK_MAX_LEN) == (1, 0x10010)
        assert _run_on_packet(prog, progs.ACK_MAX_LEN + 1) == (1, 0x10030)
        assert _run_on_packet(prog, 1500) == (1, 0x10030)
    finally:
        os.close(prog)
    acks_only = progs.load_priority_program(0x10010, "bb_test_acks", data_priority=0)
    try:  # 0: data packets keep the priority they had
        assert _run_on_packet(acks_only, 1500, priority=7) == (1, 7)
        assert _run_on_packet(acks_only, 40, priority=7) == (1, 0x10010)
    finally:
        os.close(acks_only)


def test_out_of_range_priorities_are_refused() -> None:
    for bad in (lambda: progs.priority_program(-1), lambda: progs.ack_data_program(0, 2**31),
                lambda: progs.socket_priority_program(0),
                lambda: progs.sock_ops_program(3, "a name far too long")):
        with pytest.raises(ValueError):
            bad()


@contextmanager
def _attached(group: Path, prog: int, kind: int) -> Iterator[None]:
    fd = os.open(group, os.O_RDONLY | os.O_DIRECTORY)
    try:
        bpf.attach(fd, prog, kind)
        try:
            yield
        finally:
            bpf.detach(fd, prog, kind)
    finally:
        os.close(fd)


def _in_group(group: Path, code: str) -> object:
    """What a Python child prints (JSON) after joining `group`."""
    script = ("import json, os, socket, sys\n"
              "open(sys.argv[1], 'w').write(str(os.getpid()))\n" + code)
    done = subprocess.run([sys.executable, "-I", "-c", script, str(group / "cgroup.procs")],
                          capture_output=True, text=True, timeout=TIMEOUT, cwd="/")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


SOCKET_PRIORITIES = """
tcp, udp = socket.socket(), socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
print(json.dumps([s.getsockopt(socket.SOL_SOCKET, socket.SO_PRIORITY) for s in (tcp, udp)]))
"""


@pytest.mark.root
def test_sockets_made_in_the_group_get_the_jobs_priority(cgroup2_group: Path) -> None:
    prog = progs.load_socket_priority_program(0x62620000, "bb_test_sockprio")
    try:
        with _attached(cgroup2_group, prog, bpf.BPF_CGROUP_INET_SOCK_CREATE):
            assert _in_group(cgroup2_group, SOCKET_PRIORITIES) == [0x62620000] * 2
    finally:
        os.close(prog)
    assert _in_group(cgroup2_group, SOCKET_PRIORITIES) == [0, 0]  # detached: the default


CONNECTION = """
srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen()
cli = socket.create_connection(srv.getsockname())
acc, _ = srv.accept()
cli.sendall(b"x" * 1000)  # a segment each way once established: the clamp is set then
acc.recv(1000)
acc.sendall(b"y")
cli.recv(1)
print(json.dumps({name: [s.getsockopt(socket.IPPROTO_TCP, socket.TCP_WINDOW_CLAMP),
                         s.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16)
                         .split(b"\\0")[0].decode()]
                  for name, s in (("active", cli), ("passive", acc))}))
"""


def _other_congestion_control() -> tuple[str, str]:
    """(this machine's default congestion control, another one it has)."""
    default = Path("/proc/sys/net/ipv4/tcp_congestion_control").read_text().strip()
    available = Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text()
    other = next((cc for cc in available.split() if cc != default), None)
    assert other is not None, f"only {default} here (reno is always built in)"
    return default, other


@pytest.mark.root
def test_the_jobs_tcp_sockets_get_the_maps_clamp_and_the_congestion_control(
        cgroup2_group: Path) -> None:
    default, other = _other_congestion_control()
    window = progs.create_window_map("bb_test_window")
    try:
        assert progs.window(window) == (0, 0)
        progs.set_window(window, 60_000, 0)
        assert progs.window(window) == (60_000, 0)
        prog = progs.load_sock_ops_program(window, other, "bb_test_window")
        try:
            assert bpf.program_maps(prog) == [bpf.map_id(window)]
            with _attached(cgroup2_group, prog, bpf.BPF_CGROUP_SOCK_OPS):
                got = _in_group(cgroup2_group, CONNECTION)
                assert got == {"active": [60_000, other], "passive": [60_000, other]}
                progs.set_window(window, 0, 0)  # 0: the window is left alone
                got = _in_group(cgroup2_group, CONNECTION)
                assert all(clamp != 60_000 for clamp, _cc in got.values()), got
        finally:
            os.close(prog)
    finally:
        os.close(window)
    got = _in_group(cgroup2_group, CONNECTION)  # detached: the kernel's own
    assert [cc for _clamp, cc in got.values()] == [default, default]


@pytest.mark.root
def test_the_policy_programs_on_a_group_are_found(cgroup2_group: Path) -> None:
    prog = progs.load_priority_program(0x10010, "bb_test_found")
    try:
        with _attached(cgroup2_group, prog, bpf.BPF_CGROUP_INET_EGRESS):
            assert progs.policy_programs_on(str(cgroup2_group)) == {bpf.program_id(prog)}
        assert progs.policy_programs_on(str(cgroup2_group)) == set()
    finally:
        os.close(prog)
    assert progs.policy_programs_on(str(cgroup2_group / "gone")) == set()
