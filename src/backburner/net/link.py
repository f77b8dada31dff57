"""The slow link's spec, ``RATE:DELAY[:BUFFER]`` (``1mbit:0ms:300ms``): its rate, its
one-way delay, and how much queue its bottleneck holds, as a time at its rate (a consumer
line's modem holds a few hundred milliseconds). Parsed once, before anything changes, and
held to what tc takes: a value tc would wrap around (2**64 bit/s reads back as 0bit) or
refuse after the first changes is one line (64) here."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..base.errors import UsageError

_RATE_UNITS = {"bit": 1, "kbit": 1_000, "mbit": 1_000_000, "gbit": 1_000_000_000}
_RATE = re.compile(r"(\d+(?:\.\d+)?)(bit|kbit|mbit|gbit)", re.IGNORECASE)
_TIME = re.compile(r"(\d+(?:\.\d+)?)ms", re.IGNORECASE)
DEFAULT_BUFFER_MS = 300.0
MTU_BYTES = 1514  # a full frame on the wire, as the qdiscs count it
#: The rates a link may have: from a modem's to a fast LAN's (the policy's root class
#: and the pacer's ceiling are 10gbit; past ~32gbit tbf's burst no longer fits its fields)
MIN_RATE_BIT = 8_000
MAX_RATE_BIT = 10_000_000_000
#: The longest delay and buffer a link may have (netem's delay and tbf's queue take more,
#: up to their fields' limits, but no line has seconds of either)
MAX_TIME_MS = 10_000.0
#: tbf's limit (the buffer, in bytes) is a 32-bit field
MAX_BUFFER_BYTES = (1 << 32) - 1


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
    rate = _RATE.fullmatch(text)
    if not rate or float(rate.group(1)) <= 0:
        raise UsageError(f"unknown link rate {text!r}{where}: "
                         "a number with bit, kbit, mbit or gbit")
    value = float(rate.group(1)) * _RATE_UNITS[rate.group(2).lower()]
    if value > MAX_RATE_BIT:  # before int(): a long row of digits is infinite here
        raise UsageError(f"link rate {text!r}{where} is above 10gbit")
    rate_bit = int(value)
    if rate_bit < MIN_RATE_BIT:
        raise UsageError(f"link rate {text!r}{where} is below 8kbit")
    return rate_bit


def parse(text: str) -> LinkSpec:
    """'1mbit:40ms[:300ms]' -> LinkSpec; UsageError (64) naming the part that is wrong."""
    parts = text.split(":")
    if len(parts) not in (2, 3):
        raise UsageError(f"unknown link spec {text!r}: expected RATE:DELAY[:BUFFER], "
                         "e.g. 1mbit:40ms:300ms")
    rate_bit = parse_rate(parts[0], f" in {text!r}")
    times = []
    for part, what in zip(parts[1:], ("delay", "buffer"), strict=False):
        m = _TIME.fullmatch(part)
        if not m:
            raise UsageError(f"unknown link {what} {part!r} in {text!r}: milliseconds, "
                             "e.g. 40ms")
        if float(m.group(1)) > MAX_TIME_MS:
            raise UsageError(f"link {what} {part!r} in {text!r} is above 10000ms")
        times.append(float(m.group(1)))
    if len(times) == 2 and times[1] <= 0:
        raise UsageError(f"link buffer must be above 0ms in {text!r}")
    spec = LinkSpec(rate_bit, times[0], times[1] if len(times) == 2 else DEFAULT_BUFFER_MS)
    if spec.buffer_bytes > MAX_BUFFER_BYTES:
        raise UsageError(f"link buffer in {text!r} is {spec.buffer_bytes} bytes at that "
                         "rate: tc's queue holds at most 4 GiB", "give a shorter buffer")
    return spec
