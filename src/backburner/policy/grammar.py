"""What a policy says: the IO class, CPU policy and cgroup weights a job runs with, as a
value (`Policy`), the named ones (`BUILTIN`), and the text that names one
(``background``, ``io=idle,cpu=nice:10,io-weight=50``: `parse_policy` and `Policy.spec`).

Pure: nothing here asks the kernel. `policy.live` puts a policy on running threads,
`policy.cgroup_plan` decides the groups and files its weights need.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from ..base.errors import UsageError
from ..kernel.priorities import CPUPolicy, IOPrio


@dataclass(frozen=True)
class Policy:
    """Everything `run` may change about a job. ``None`` means "leave as inherited"."""

    name: str = "custom"
    io: IOPrio | None = None
    cpu: CPUPolicy | None = None
    io_weight: int | None = None  # 1..1000, cgroup IO weight (BFQ honours it)
    cpu_weight: int | None = None  # 1..10000, cgroup v2 scale (100 = default)
    # cgroup v2's own IO controls, set on groups rather than on processes:
    group_io: str | None = None  # io.prio.class of the job's group: also its writeback
    io_latency_us: int | None = None  # io.latency target of the protected (interactive) group
    io_cost: bool = False  # io.cost's QoS on the device under test; weights through io.weight
    description: str = field(default="", compare=False)

    @property
    def needs_cgroup(self) -> bool:
        return (self.io_weight is not None or self.cpu_weight is not None
                or self.group_io is not None or self.io_latency_us is not None
                or self.io_cost)

    @property
    def group_controls(self) -> list[str]:
        """The spec keys of the knobs only cgroup v2's io controller has (empty: none)."""
        return [key for key, on in (("group-io", self.group_io is not None),
                                    ("io-latency", self.io_latency_us is not None),
                                    ("io-cost", self.io_cost)) if on]

    def with_overrides(self, **kw: object) -> Policy:
        """Explicit options override the named policy's parts; the result is 'custom'."""
        changes = {k: v for k, v in kw.items() if v is not None}
        if not changes:
            return self
        name = self.name if self.name == "custom" else f"{self.name}+custom"
        return replace(self, name=name, **changes)

    def settings(self) -> dict[str, str]:
        return {
            "io": str(self.io) if self.io else "inherit",
            "cpu": str(self.cpu) if self.cpu else "inherit",
            "io-weight": str(self.io_weight) if self.io_weight else "-",
            "cpu-weight": str(self.cpu_weight) if self.cpu_weight else "-",
            **self._group_settings(),
        }

    def _group_settings(self) -> dict[str, str]:
        """cgroup v2's group-level knobs, named only when set (older runs have none)."""
        out = {}
        if self.group_io is not None:
            out["group-io"] = self.group_io
        if self.io_latency_us is not None:
            out["io-latency"] = format_latency(self.io_latency_us)
        if self.io_cost:
            out["io-cost"] = "on"
        return out

    def spec(self) -> str:
        """A string that `parse_policy` turns back into this policy."""
        if self.name in BUILTIN:
            return self.name
        parts = []
        if self.io:
            parts.append(f"io={self.io}")
        if self.cpu:
            parts.append(f"cpu={self.cpu}")
        if self.io_weight:
            parts.append(f"io-weight={self.io_weight}")
        if self.cpu_weight:
            parts.append(f"cpu-weight={self.cpu_weight}")
        parts += [f"{k}={v}" for k, v in self._group_settings().items()]
        return ",".join(parts) or "default"


BUILTIN: dict[str, Policy] = {
    p.name: p
    for p in (
        Policy("default", description="change nothing: the job runs as the shell started it"),
        Policy(
            "background",
            IOPrio("idle"),
            CPUPolicy("idle"),
            io_weight=10,
            cpu_weight=10,
            description="idle IO class, SCHED_IDLE, cgroup IO and CPU weight 10 "
            "(1/10 of a default group): runs only when nothing else wants the disk/CPU",
        ),
        Policy(
            "gentle",
            IOPrio("be", 7),
            CPUPolicy("normal", 19),
            description="best-effort IO at the lowest level 7, nice 19: still makes progress "
            "under sustained load, yields most of the time",
        ),
        Policy(
            "group-idle",
            group_io="idle",
            description="cgroup v2 io.prio.class idle on the job's group: its IO and the "
            "writeback of the pages it dirtied in the idle class (a process's class misses "
            "the writeback)",
        ),
        Policy(
            "low-weight",
            io_weight=10,
            description="cgroup IO weight 10 alone (io.weight and io.bfq.weight): no IO class, "
            "no CPU policy",
        ),
        Policy(
            "latency-target",
            io_latency_us=10_000,
            description="bench: cgroup v2 io.latency target of 10 ms on the probe's group on "
            "the device under test; the kernel throttles the load's group when it is missed",
        ),
        Policy(
            "iocost",
            io_weight=10,
            io_cost=True,
            description="bench: cgroup v2 io.cost enabled on the device under test (the "
            "kernel's device model, its QoS on) with the job's group at io.weight 10",
        ),
    )
}


def parse_weight(text: str | int, what: str, top: int) -> int:
    try:
        value = int(text)
    except (TypeError, ValueError):
        raise UsageError(f"{what} must be a whole number, not {text!r}") from None
    if not 1 <= value <= top:
        raise UsageError(f"{what} {value} out of range", f"use 1..{top} (100 is the default)")
    return value


#: io.prio.class values a job's group may take: a bulk job is only ever lowered.
GROUP_IO_CLASSES = ("idle", "restrict-to-be", "no-change")
_FIELDS = "io, cpu, io-weight, cpu-weight, group-io, io-latency, io-cost"


def parse_group_io(text: str) -> str:
    value = {"be": "restrict-to-be"}.get(text.strip(), text.strip())
    if value not in GROUP_IO_CLASSES:
        raise UsageError(f"unknown group IO class {text!r}",
                         f"use one of {', '.join(GROUP_IO_CLASSES)} (cgroup v2 io.prio.class)")
    return value


def parse_latency(text: str | int) -> int:
    """An io.latency target: ``10ms``, ``500us``, or a bare number of milliseconds; in µs."""
    m = re.fullmatch(r"(\d+)(ms|us)?", str(text).strip())
    value = int(m.group(1)) * (1 if m.group(2) == "us" else 1000) if m else 0
    if not m or not 1 <= value <= 10_000_000:
        raise UsageError(f"io.latency target {text!r} is not a latency",
                         "give e.g. 10ms or 500us (1 us .. 10 s)")
    return value


def format_latency(us: int) -> str:
    return f"{us // 1000}ms" if us % 1000 == 0 else f"{us}us"


def parse_switch(text: str, what: str) -> bool:
    if text.strip() in ("on", "yes", "1", "true"):
        return True
    if text.strip() in ("off", "no", "0", "false"):
        return False
    raise UsageError(f"{what} takes on or off, not {text!r}")


#: Policy items that only a running backburner carries out, and where each is taken
#: (`policy.throttle`, `policy.flush_behind` read them before the grammar does).
_THROTTLED = "bench --policy, or a govern rule's throttle = true"
_CARRIED_OUT = {"flush-behind": "run --policy, bench --policy, or a govern rule's "
                "flush_behind = true", "throttle": _THROTTLED, "pause-ms": _THROTTLED,
                "min-duty": _THROTTLED, "stall-ms": _THROTTLED, "window-ms": _THROTTLED}


def parse_policy(spec: str) -> Policy:
    """A built-in name, or ``io=idle,cpu=nice:10,io-weight=50,cpu-weight=20`` (and cgroup
    v2's ``group-io=idle``, ``io-latency=10ms``, ``io-cost=on``)."""
    spec = spec.strip()
    if spec in BUILTIN:
        return BUILTIN[spec]
    if "=" not in spec:
        raise UsageError(
            f"unknown policy {spec!r}",
            f"use one of {', '.join(BUILTIN)} or {_FIELDS.replace(',', '=…,')}=…",
        )
    base = spec.split(",")[0]
    policy = BUILTIN[base] if base in BUILTIN else Policy("custom")
    kw: dict[str, object] = {}
    for item in spec.split(",")[1 if base in BUILTIN else 0 :]:
        key, _, val = item.partition("=")
        key = key.strip()
        if key == "io":
            kw["io"] = IOPrio.parse(val)
        elif key == "cpu":
            kw["cpu"] = CPUPolicy.parse(val)
        elif key == "io-weight":
            kw["io_weight"] = parse_weight(val, "IO weight", 1000)
        elif key == "cpu-weight":
            kw["cpu_weight"] = parse_weight(val, "CPU weight", 10000)
        elif key == "group-io":
            kw["group_io"] = parse_group_io(val)
        elif key == "io-latency":
            kw["io_latency_us"] = parse_latency(val)
        elif key == "io-cost":
            kw["io_cost"] = parse_switch(val, "io-cost")
        elif key in _CARRIED_OUT:
            raise UsageError(f"{key!r} in {spec!r} is not kept by a process or unit: a "
                             "running backburner carries it out", f"use {_CARRIED_OUT[key]}")
        else:
            raise UsageError(f"unknown policy field {key!r} in {spec!r}",
                             f"fields are {_FIELDS}")
    return policy.with_overrides(**kw)
