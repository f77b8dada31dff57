"""What a network study is (`bench --net-link RATE:DELAY[:BUFFER]`): its options, its
cells and its one validated plan, before anything on the machine is touched. Pure.

A network study is a bench run like any other — the same seeded order, warm-ups,
sequential stopping, store and report — over the namespace testbed's slow link instead of
a disk. Its cells fill the same dimensions, each with its network meaning:

* the device is the link (``link:1mbit:0ms:300ms``: rate, one-way delay, queue), so the
  report's headline says where it was measured, and a loaded cell is judged against the
  unloaded cell of the same link;
* the scheduler is the bottleneck's queue discipline: ``fifo``, the token bucket's
  drop-tail queue of the link's buffer, as a consumer modem has (the one this testbed
  builds; a fair queue at the bottleneck would be a second value);
* the probe is one of the built-in network probes, given in `--probe`'s own grammar so
  that probes stay a labelled, repeatable dimension: ``net:page`` (a small page fetched on
  a new connection, as a browser's first request: handshake, request and the whole reply)
  and ``net:handshake`` (a TCP handshake's round trip: the kernel's own request/response);
* the loads are ``download:N`` (N endless bulk downloads at once) beside the unloaded
  ``none``; the policy is ``default`` (unprotected) or ``background`` (`net.policy`).

Options that only mean something for a disk (an IO scheduler, a device, the probe's file
layout or root, cache drops, readiness of a command, --trace, the commands run around a
trial, which are told the device under test) are refused with one line when combined with
--net-link, before anything changes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ..base.errors import UsageError
from ..net import link as netlink
from ..store.cell import LINK_PREFIX, NO_PREPARE, UNLOADED, Cell
from . import matrix

#: The bottleneck's queue discipline: the "scheduler" of a network cell.
QUEUE = "fifo"
#: probe kind -> the client's figure it is timed by (`net.client probe`)
PROBES = {"net:page": "fetch_s", "net:handshake": "connect_s"}
POLICIES = ("default", "background")
#: What the testbed's veth pairs and tc's token bucket take: its queue is a 32-bit count.
MAX_RATE_BIT = 10**10
MAX_QUEUE_BYTES = 1 << 30
#: Each download is a process of its own (a few MB of memory each).
MAX_DOWNLOADS = 32
#: Client commands of the load kinds (`python -m backburner.net.client KIND ...`), each
#: reporting its own bytes and time as one JSON line when stopped: downloads of the
#: server's endless file, uploads into its sink (the bytes it acknowledged).
LOAD_KINDS = ("download", "upload")
_LOAD = re.compile(r"(?P<kind>[a-z]+):(?P<count>\d+)")
_GRAMMAR = f"use none, download:N or upload:N (N from 1 to {MAX_DOWNLOADS})"


def defaults() -> dict[str, Any]:
    """A network study's defaults where they differ from a disk study's: no cache to drop,
    the link's queue as the one "scheduler", a settle long enough for the downloads to
    fill the link's buffer, and a trial given up at --timeout alone (20 s), not at a
    multiple of the unloaded time: a dropped SYN costs the handshake a whole second (then
    3, 7) against its unloaded millisecond, and those stalls are what is measured."""
    return dict(probes=["net:page"], loads=[UNLOADED], policies=["default"],
                schedulers=[QUEUE], cold=False, settle_s=3.0, timeout_s=20.0,
                abort_factor=NO_ABORT_FACTOR)


#: An abort factor so high that a trial's limit is --timeout (`config.MAX_ABORT_FACTOR`).
NO_ABORT_FACTOR = 1e6

#: disk options (configuration fields) and their flags, refused in a network study
DISK_OPTIONS = {"schedulers": "--scheduler", "device": "--device",
                "probe_layout": "--probe-layout", "probe_root": "--probe-root",
                "rotational": "--rotational", "trace": "--trace",
                "ready_line": "--ready-line", "ready_file": "--ready-file",
                "ready_window": "--ready", "prepares": "--setup-variant",
                "prepare_commands": "--prepare", "shell": "--shell"}


_RATE_UNITS = (("gbit", 10**9), ("mbit", 10**6), ("kbit", 10**3), ("bit", 1))


def device_label(spec: netlink.LinkSpec) -> str:
    """``link:1mbit:0ms:300ms``: the link as its cells name it, in the units it was given."""
    unit, scale = next((u, n) for u, n in _RATE_UNITS if spec.rate_bit % n == 0)
    return (f"{LINK_PREFIX}{spec.rate_bit // scale}{unit}:{spec.delay_ms:g}ms:"
            f"{spec.buffer_ms:g}ms")


def check_options(options: dict[str, Any], disk_preset: str | None = None) -> None:
    """A network study's options: no disk option given (None: not given; cold=False is
    --warm, which a network study is anyway), and no disk preset to build on."""
    if disk_preset is not None:
        raise UsageError(f"--preset {disk_preset} is a disk study; --net-link makes a "
                         "network study", "drop one of them")
    given = [flag for key, flag in DISK_OPTIONS.items() if options.get(key) is not None]
    if options.get("cold"):
        given.append("--cold")
    if given:
        raise UsageError(f"{given[0]} is for a disk study, not a network study (--net-link)",
                         f"drop {', '.join(given)}")


def refuse_without_link(probes: list[tuple[str, str]], loads: list[str]) -> None:
    """A network probe or load in a disk study: one line saying what it needs."""
    for label, command in probes:
        if command in PROBES:
            raise UsageError(f"probe {label!r} is a network probe: it needs --net-link",
                             "e.g. --net-link 1mbit:0ms")
    for text in loads:
        if _LOAD.fullmatch(text.strip()) and text.split(":")[0] in LOAD_KINDS:
            raise UsageError(f"load {text!r} is a network load: it needs --net-link",
                             "e.g. --net-link 1mbit:0ms")


@dataclass(frozen=True)
class NetProbe:
    label: str
    kind: str  # a key of PROBES

    @property
    def figure(self) -> str:
        """The client's figure this probe is timed by."""
        return PROBES[self.kind]


@dataclass(frozen=True)
class NetLoad:
    text: str
    kind: str  # none | download | upload
    count: int = 0

    @property
    def is_none(self) -> bool:
        return self.kind == UNLOADED


def parse_load(text: str) -> NetLoad:
    text = text.strip()
    if text == UNLOADED:
        return NetLoad(text, UNLOADED)
    m = _LOAD.fullmatch(text)
    if not m or m["kind"] not in LOAD_KINDS:
        raise UsageError(f"unknown network load {text!r}", _GRAMMAR)
    count = int(m["count"])
    if not 1 <= count <= MAX_DOWNLOADS:
        raise UsageError(f"load {text!r}: {count} {m['kind']}s out of range", _GRAMMAR)
    return NetLoad(text, m["kind"], count)


@dataclass(frozen=True)
class NetPlan:
    """A validated network study: what `netstudy.NetExecutor` and the runner use."""

    config: Any  # config.BenchConfig (not imported: config imports this module)
    link: netlink.LinkSpec
    probes: dict[str, NetProbe]
    loads: dict[str, NetLoad]
    policies: tuple[str, ...]
    cells: tuple[Cell, ...] = field(default=())

    @property
    def device(self) -> str:
        return device_label(self.link)

    def slots(self) -> list[matrix.Slot]:
        return matrix.plan_order(list(self.cells), self.config)


def plan(cfg: Any, probes: list[tuple[str, str]]) -> NetPlan:
    """`cfg` (a BenchConfig with net_link) and its probes as (label, text): checked and
    typed, or UsageError (64) naming what is wrong."""
    link = netlink.parse(cfg.net_link)
    if link.rate_bit > MAX_RATE_BIT or link.buffer_bytes > MAX_QUEUE_BYTES:
        raise UsageError(f"link {cfg.net_link!r} is beyond the testbed: at most 10gbit, and "
                         f"a queue of at most {MAX_QUEUE_BYTES >> 20} MiB at that rate",
                         "a slow line is what the study is for, e.g. 1mbit:0ms:300ms")
    if cfg.cold:
        raise UsageError("a network study drops no caches: it runs warm",
                         "drop --cold (or cold = true in the study file)")
    if list(cfg.schedulers) != [QUEUE]:
        raise UsageError(f"a network study's only queue is {QUEUE!r}, not "
                         f"{', '.join(cfg.schedulers)}", "drop --scheduler")
    for key in ("probe_root", "ready_line", "ready_file", "ready_window", "trace",
                "prepares", "prepare_commands"):
        if getattr(cfg, key):
            raise UsageError(f"{DISK_OPTIONS[key]} is for a disk study, not a network study "
                             "(--net-link)", f"drop {DISK_OPTIONS[key]}")
    out: dict[str, NetProbe] = {}
    for label, text in probes:
        if text not in PROBES:
            raise UsageError(f"unknown network probe {text!r}",
                             f"use {' or '.join(PROBES)} (NAME=net:page labels one)")
        if label in out:
            raise UsageError(f"two probes are labelled {label!r}",
                             "label them apart: --probe NAME=net:page")
        out[label] = NetProbe(label, text)
    if not out:
        raise UsageError("a network study needs a probe", f"use {' or '.join(PROBES)}")
    loads = {t: parse_load(t) for t in dict.fromkeys(cfg.loads)}
    policies = tuple(dict.fromkeys(cfg.policies))
    for name in policies:
        if name not in POLICIES:
            raise UsageError(f"unknown network policy {name!r}",
                             "use default (unprotected) or background")
    if not policies:
        raise UsageError("no policy given")
    cells = tuple(matrix.build_cells(list(out), device_label(link), [QUEUE], list(loads),
                                     list(policies), [NO_PREPARE]))
    return NetPlan(cfg, link, out, loads, policies, cells)
