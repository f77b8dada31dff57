"""The testbed the network tests share: a fresh 1 Mbit/s bed with its server, removed
after the test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from backburner import system
from backburner.kernel import cgroups
from backburner.net import link, testbed

SPEC = "1mbit:0ms:300ms"


@pytest.fixture
def bed(state_dir: Path) -> Iterator[testbed.Testbed]:
    with system.Transaction("net-test") as tx:
        b = testbed.build(tx, link.parse(SPEC))
        testbed.start_server(b)
        yield b


#: The groups `run --net` and `govern net` make at the cgroup v2 root (the job's group, the
#: window clamp's check); scripts/test runs tests/net/ and test_fuzz (which makes them too)
#: on one worker, so only these tests make them while they run, and other tests' groups
#: there (a run's shared `backburner` parent, whose removal test_run checks) do not count.
NET_GROUPS = ("backburner-net-", "bbcheck-")


def net_groups() -> list[str]:
    root = cgroups.unified_root()
    assert root is not None
    return sorted(p.name for p in Path(root).iterdir()
                  if p.is_dir() and p.name.startswith(NET_GROUPS))


def bed_state(bed: testbed.Testbed) -> tuple[object, ...]:
    """What an undo must put back: the client link's qdiscs and classes, and the network
    policy's groups at the cgroup v2 root. Not the classes' byte and packet counters: the
    link's own traffic moves them (an IPv6 neighbour message of 90 bytes between two
    readings failed a check in the whole suite)."""
    classes = [{k: v for k, v in c.items() if k not in ("bytes", "packets")}
               for c in system.tc_classes(bed.client_ns, bed.client_dev)]
    return (system.qdiscs(bed.client_ns, bed.client_dev), classes, net_groups())


@pytest.fixture
def bpffs(state_dir: Path) -> Iterator[str]:
    """A bpffs of our own, mounted on a private directory (both journaled): this host
    mounts none at /sys/fs/bpf (systemd is not PID 1 here)."""
    with system.Transaction("bpffs-test") as tx:
        where = tx.apply(system.PrivateDir(str(system.work_root()), "bpffs-"))
        tx.apply(system.Mount("bpf", where, "bpf", "mode=0700"))
        yield where
