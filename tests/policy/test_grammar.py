"""policy.grammar: IO classes, CPU policies and whole policies parsed from what a user
types, turned back into that text, and the built-in policies listed."""

from __future__ import annotations

import re

import pytest
from helpers import bb

from backburner.base.errors import UsageError
from backburner.kernel.priorities import CPUPolicy, IOPrio
from backburner.policy import grammar

# --- parsing (pure) -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, klass, level",
    [("idle", "idle", 0), ("be", "be", 4), ("be:3", "be", 3), ("rt:2", "rt", 2),
     ("best-effort:7", "be", 7), ("realtime", "rt", 4), ("none", "none", 0)],
)
def test_ioprio_parse(text: str, klass: str, level: int) -> None:
    prio = IOPrio.parse(text)
    assert (prio.klass, prio.level) == (klass, level)
    assert IOPrio.from_value(prio.value) == prio


@pytest.mark.parametrize("text", ["", "fast", "be:8", "rt:-1", "idle:1", "none:0", "be:"])
def test_ioprio_parse_rejects(text: str) -> None:
    with pytest.raises(UsageError):
        IOPrio.parse(text)


@pytest.mark.parametrize(
    "text, kind, nice",
    [("idle", "idle", None), ("batch", "batch", None), ("batch:5", "batch", 5),
     ("nice:15", "normal", 15), ("nice:-20", "normal", -20), ("normal", "normal", None)],
)
def test_cpu_parse(text: str, kind: str, nice: int | None) -> None:
    cpu = CPUPolicy.parse(text)
    assert (cpu.kind, cpu.nice) == (kind, nice)
    assert CPUPolicy.parse(str(cpu)) == cpu


@pytest.mark.parametrize("text", ["nice", "nice:20", "nice:-21", "idle:3", "fifo", "batch:x"])
def test_cpu_parse_rejects(text: str) -> None:
    with pytest.raises(UsageError):
        CPUPolicy.parse(text)


@pytest.mark.parametrize("spec", ["background", "gentle", "default", "group-idle",
                                  "low-weight", "latency-target", "iocost",
                                  "io=be:2,cpu=nice:10,io-weight=50,cpu-weight=20",
                                  "io=idle,group-io=idle,io-latency=500us,io-cost=on,"
                                  "io-weight=20"])
def test_policy_spec_round_trip(spec: str) -> None:
    policy = grammar.parse_policy(spec)
    assert grammar.parse_policy(policy.spec()) == policy


def test_the_group_knobs_parse_to_what_the_kernel_files_take() -> None:
    pol = grammar.parse_policy("group-io=be,io-latency=25,io-cost=yes")
    assert (pol.group_io, pol.io_latency_us, pol.io_cost) == ("restrict-to-be", 25_000, True)
    assert pol.group_controls == ["group-io", "io-latency", "io-cost"] and pol.needs_cgroup
    assert pol.settings()["io-latency"] == "25ms"
    assert "group-io" not in grammar.BUILTIN["background"].settings()  # older runs: as they were
    assert grammar.BUILTIN["latency-target"].io_latency_us == 10_000


@pytest.mark.parametrize(("spec", "words"), [
    ("group-io=rt", "unknown group IO class"), ("io-latency=fast", "not a latency"),
    ("io-latency=0ms", "not a latency"), ("io-cost=maybe", "on or off"),
    ("io-limit=5", "group-io, io-latency, io-cost")])
def test_bad_group_knobs_are_one_line(spec: str, words: str) -> None:
    with pytest.raises(UsageError) as info:
        grammar.parse_policy(spec)
    assert words in str(info.value) and "\n" not in str(info.value)


def test_background_policy_is_what_it_says() -> None:
    bg = grammar.BUILTIN["background"]
    assert (bg.io, bg.cpu, bg.io_weight, bg.cpu_weight) == (
        IOPrio("idle"), CPUPolicy("idle"), 10, 10)
    assert bg.needs_cgroup and not grammar.BUILTIN["gentle"].needs_cgroup


def test_policies_command_lists_builtins() -> None:
    r = bb("policies")
    assert r.returncode == 0
    names = [line.split()[0] for line in r.out.splitlines() if line and not line[0].isspace()]
    assert {"background", "gentle", "group-idle", "low-weight", "latency-target",
            "iocost"} <= set(names)
    assert re.search(r"^latency-target\s+.*io-latency=10ms", r.out, re.M)
    assert re.search(r"^background\s+io=idle\s+cpu=idle\s+io-weight=10\s+cpu-weight=10",
                     r.out, re.M)

