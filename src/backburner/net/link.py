"""The slow link's spec, ``RATE:DELAY[:BUFFER]`` (``1mbit:0ms:300ms``): its rate, its
one-way delay, and how much queue its bottleneck holds, as a time at its rate (a consumer
line's modem holds a few hundred milliseconds). Parsed once, before anything changes."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import UsageError

_RATE_UNITS = {"bit": 1, "kbit": 1_000, "mbit": 1_000_000, "gbit": 1_000_000_000}
_RATE = re.compile(r"^(\d+(?:\.\d+)?)(bit|kbit|mbit|gbit)$", re.IGNORECASE)
_TIME = re.compile(r"^(\d+(?:\.\d+)?)ms$", re.IGNORECASE)
DEFAULT_BUFFER_MS = 300.0
MTU_BYTES = 1514  # a full frame on the wire, as the qdiscs count it


@dataclass(frozen=True)
class LinkSpec:
    rate_bit: int
    delay_ms: float
    buffer_ms: float = DEFAULT_BUFFER_MS

    @property
    def buffer_bytes(self) -> int:
        """The bottleneck queue's size: `buffer_ms` at the link's rate, at least 2 frames."""
        return max(2 * MTU_BYTES, int(self.rate_bit * self.buffer_ms / 8000))

    def spec(self) -> str:
        return f"{self.rate_bit}bit:{self.delay_ms:g}ms:{self.buffer_ms:g}ms"


def parse_rate(text: str, where: str = "") -> int:
    """'1mbit' -> 1000000 (bit/s); UsageError (64) otherwise. `where`: the spec it is
    part of, for the message."""
    rate = _RATE.match(text)
    if not rate or float(rate.group(1)) <= 0:
        raise UsageError(f"unknown link rate {text!r}{where}: "
                         "a number with bit, kbit, mbit or gbit")
    rate_bit = int(float(rate.group(1)) * _RATE_UNITS[rate.group(2).lower()])
    if rate_bit < 8000:
        raise UsageError(f"link rate {text!r} is below 8kbit")
    return rate_bit


def parse(text: str) -> LinkSpec:
    """'1mbit:40ms[:300ms]' -> LinkSpec; UsageError (64) naming the part that is wrong."""
    parts = text.strip().split(":")
    if len(parts) not in (2, 3):
        raise UsageError(f"unknown link spec {text!r}: expected RATE:DELAY[:BUFFER], "
                         "e.g. 1mbit:40ms:300ms")
    rate_bit = parse_rate(parts[0], f" in {text!r}")
    times = []
    for part, what in zip(parts[1:], ("delay", "buffer"), strict=False):
        m = _TIME.match(part)
        if not m:
            raise UsageError(f"unknown link {what} {part!r} in {text!r}: milliseconds, "
                             "e.g. 40ms")
        times.append(float(m.group(1)))
    if len(times) == 2 and times[1] <= 0:
        raise UsageError(f"link buffer must be above 0ms in {text!r}")
    return LinkSpec(rate_bit, times[0], times[1] if len(times) == 2 else DEFAULT_BUFFER_MS)
