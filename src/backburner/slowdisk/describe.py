"""What a slowdisk says about itself and its profiles: the live counters of `slowdisk stats`
and the table of `slowdisk profiles`, with the closed-form mean of a random read it shows.

Kept apart from `device` (the lifecycle: set up, find, remove) so that the words a person
reads change without touching the code that attaches and detaches devices.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable
from typing import Any

from ..base.quantities import human_size
from .drive import FlatProfile, Profile
from .model import Disk
from .profiles import BUILTIN


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms"


def format_stats(s: dict[str, Any]) -> str:
    n = s["requests"]
    mode = "read-only" if s["read_only"] else "read-write"
    lines = [
        f"{s['device']}: {s['profile']} slowdisk on {s['image']} "
        f"({human_size(s['size_bytes'])}, {mode}), daemon pid {s['pid']}, "
        f"up {s['uptime_s']:.1f} s, scheduler {s['scheduler']}, rotational {s['rotational']}",
        f"  requests        {n} ({s['reads']} reads, {s['writes']} writes); "
        f"{human_size(s['bytes_read'])} read, {human_size(s['bytes_written'])} written",
        f"  access          {s['seeks']} seeks, {s['sequential']} sequential, "
        f"{s['cache_hits']} drive-cache hits",
        f"  busy (model)    {s['busy_s']:.3f} s = {100 * s['utilisation']:.1f} % of uptime; "
        f"queued {s['queue_s']:.3f} s in all",
    ]
    if s.get("merged"):
        lines[1] += f"; {s['merged']} more merged into them by the host queue"
    received = s.get("received", n)
    if received:
        lines += [
            f"  latency         mean {_ms(s['modelled_latency_s'] / received)} modelled, "
            f"{_ms(s['measured_latency_s'] / received)} measured in the daemon, per request",
            f"  overhead        mean {_ms(s['overhead_mean_s'])}, max "
            f"{_ms(s['overhead_max_s'])} per request (the simulator's own time); "
            f"{s['late_requests']} late by > 1 ms",
        ]
    if s.get("errors"):
        lines.append(f"  errors          {s['errors']} requests failed on the image")
    return "\n".join(lines)


def random_read_s(p: Profile, size: int = 4096) -> float:
    """Closed-form mean of a random read of `size` bytes at a uniformly random offset, on an
    idle disk: overhead + average seek + rotational latency + size * E[1 / rate(offset)]
    (the rate is linear in the offset, so E[1/rate] = ln(outer/inner) / (outer - inner)).
    An optical disc (a full one) reads whole blocks at a rate linear in the radius: the
    mean is taken numerically."""
    if isinstance(p, FlatProfile):
        return p.delay_s
    if p.optical is not None:  # whole ECC blocks, rate linear in the radius: numerically
        disk, n, blk = Disk(p, p.optical.medium_bytes), 1000, p.optical.block_bytes
        media = -(-size // blk) * blk
        inv = sum(1 / disk.rate_at(int((i + 0.5) / n * disk.span)) for i in range(n)) / n
        return p.average_random_access_s + media * inv
    lo, hi = p.rate_inner, p.rate_outer
    inv = 1 / lo if math.isclose(lo, hi) else math.log(hi / lo) / (hi - lo)
    return p.average_random_access_s + size * inv


def _rate(p: Profile, r: float) -> str:
    return f"{r / 1e6:.1f} MB/s"


_ROWS: list[tuple[str, Callable[[Profile], str]]] = [
    ("rotational", lambda p: "yes" if p.rotational else "no"),
    ("rpm", lambda p: f"{p.rpm:g}" if p.rpm else "-"),
    ("command overhead", lambda p: _ms(p.command_overhead_s)),
    ("cache-hit overhead", lambda p: _ms(p.cache_hit_overhead_s)),
    ("settle (min seek)", lambda p: _ms(p.settle_s)),
    ("full-stroke seek", lambda p: _ms(p.full_stroke_s)),
    ("seek curve", lambda p: "radial" if p.optical else "sqrt"),
    ("average seek", lambda p: _ms(p.average_seek_s)),
    ("rotational latency", lambda p: _ms(p.rotational_latency_s)),
    ("random access (avg)", lambda p: _ms(p.average_random_access_s)),
    ("random 4 KiB read (avg)", lambda p: _ms(random_read_s(p))),
    ("rate, outer edge", lambda p: _rate(p, p.rate_outer)),
    ("rate, inner edge", lambda p: _rate(p, p.rate_inner)),
    ("offset 0 is", lambda p: "outer" if p.outer_at_start else "inner"),
    ("drive cache", lambda p: human_size(p.cache_bytes) if p.cache_bytes else "-"),
    ("interface rate", lambda p: _rate(p, p.interface_rate) if p.interface_rate else "-"),
    ("write overhead", lambda p: _ms(p.write_overhead_s)),
    ("random-write penalty", lambda p: _ms(p.random_write_penalty_s)),
    ("write rate factor", lambda p: f"{p.write_rate_factor:g}"),
    ("read-only medium", lambda p: "yes" if p.read_only_medium else "no"),
    ("commands queued by", lambda p: "drive" if p.command_queueing else "host"),
]


def format_profiles() -> str:
    profiles = list(BUILTIN.values())
    width = max(12, *(len(p.name) + 2 for p in profiles))
    head = f"{'parameter':<24}" + "".join(f"{p.name:>{width}}" for p in profiles)
    lines = [head, "-" * len(head)]
    for label, fmt in _ROWS:
        lines.append(f"{label:<24}" + "".join(f"{fmt(p):>{width}}" for p in profiles))
    lines.append(f"{'flat:MS':<24}every request completes MS ms after it arrives, in parallel "
                 "(no seeks, no queueing)")
    wrap = textwrap.TextWrapper(width=98, initial_indent="  ", subsequent_indent="  ")
    flat = FlatProfile.from_ms(1)
    for p in [*profiles, flat]:
        name, what = ("flat:MS", "like dm-delay") if p is flat else (p.name, p.description)
        lines += ["", f"{name}: {what}", *wrap.wrap("source: " + p.source)]
    return "\n".join(lines)


def profiles_json() -> list[dict[str, Any]]:
    return [p.as_dict() for p in BUILTIN.values()]
