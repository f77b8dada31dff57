"""Sizes and numbers as people type and read them: the one place that parses and formats them.

Parsing is strict (a size that does not parse, is not finite or is absurdly large is a
`UsageError`, never an OverflowError deep inside), and formatting is shared by the CLI,
bench, slowdisk, the report and every new command, so "1.5 GiB" and "3.20×" look the same
everywhere.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from typing import Protocol

from .errors import UsageError

KiB, MiB, GiB, TiB = 1 << 10, 1 << 20, 1 << 30, 1 << 40
#: Larger than any block device or file Linux supports (8 EiB is the ext4/xfs limit).
MAX_SIZE = 1 << 62
_SIZE_RE = re.compile(r"(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?", re.I)
_SCALE = {"": 1, "K": KiB, "M": MiB, "G": GiB, "T": TiB}
DASH = "\u2013"
INFINITY = "\u221e"
MINUS = "\u2212"
TIMES = "\u00d7"


def one_line(text: str) -> str:
    """Text anyone else chose (a process's name or command line, a newline typed into an
    option, an escape sequence stored in a database) made safe to print or log: control
    characters (C0, DEL, C1), characters that reorder or hide text (bidirectional
    overrides, zero-width marks) and any other that `str.isprintable` refuses are shown as
    Python escapes (\\n, \\x1b, \\u202e), and a byte that was not UTF-8 (decoded with
    surrogateescape, as paths are) as \\xNN. A message or a table cell stays one line,
    cannot drive the terminal or forge a line of its own, and never fails to encode."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else _escaped(ch) for ch in text)


def _escaped(ch: str) -> str:
    code = ord(ch)
    if 0xDC80 <= code <= 0xDCFF:  # surrogateescape's stand-in for the byte code - 0xDC00
        return f"\\x{code - 0xDC00:02x}"
    return repr(ch)[1:-1]


def slug(text: str, length: int = 60) -> str:
    """A file- or cgroup-name-safe form of a label: letters, digits, '.', '-' and '_'."""
    return re.sub(r"[^A-Za-z0-9.-]+", "_", text).strip("_.")[:length] or "x"


def parse_size(text: str, *, what: str = "size", minimum: int = 1) -> int:
    """'512M', '8G', '1.5GiB', '4096' -> bytes (binary multiples). UsageError otherwise."""
    m = _SIZE_RE.fullmatch(str(text).strip())
    if not m:
        raise UsageError(f"{what} {text!r} does not parse", "use e.g. 512M, 8G, 4096")
    value = float(m.group(1)) * _SCALE[m.group(2).upper()]
    if not math.isfinite(value) or value > MAX_SIZE:
        raise UsageError(f"{what} {text!r} is too large", f"at most {human_size(MAX_SIZE)}")
    size = int(value)
    if size < minimum:
        raise UsageError(f"{what} {text!r} is too small",
                         f"give at least {size_text(minimum)}" if minimum > 1
                         else "it must be above 0")
    return size


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(h|m|s)?", re.I)
_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, None: 1.0}
#: A week: longer than any bench run is meant to take.
MAX_DURATION_S = 7 * 24 * 3600.0


def parse_duration(text: str | float, *, what: str = "duration") -> float:
    """'90', '90s', '5m', '1h30m', '2.5m' -> seconds (a plain number is seconds).
    UsageError when it does not parse, is zero or longer than a week."""
    raw = str(text).strip().replace(" ", "")
    parts = list(_DURATION_PART.finditer(raw))
    if not raw or "".join(m.group() for m in parts) != raw \
            or (len(parts) > 1 and any(m.group(2) is None for m in parts)):
        raise UsageError(f"{what} {text!r} does not parse", "use e.g. 90s, 5m, 1h30m")
    seconds = sum(float(m.group(1)) * _SECONDS[(m.group(2) or "s").lower()] for m in parts)
    if not 0.0 < seconds <= MAX_DURATION_S:
        raise UsageError(f"{what} {text!r} out of range", "give more than 0 and at most 7 days")
    return seconds


def fmt_duration(seconds: float) -> str:
    """Seconds for reading: 45 -> '45s', 150 -> '2m30s', 5400 -> '1h30m'."""
    s = round(seconds)
    if s < 60:
        return f"{seconds:g}s"
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    return "".join(f"{v}{u}" for v, u in ((h, "h"), (m, "m"), (sec, "s")) if v)


def human_size(n: float) -> str:
    """Bytes in binary units for reading: 1536 -> '1.5 KiB', 8 GiB -> '8 GiB'."""
    for unit, scale in (("TiB", TiB), ("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if abs(n) >= scale:
            return f"{n / scale:.1f} {unit}".replace(".0 ", " ")
    return f"{int(n)} B"


def size_text(n: int) -> str:
    """Bytes as a size option would be typed, exactly: 4 GiB -> '4G', 1000 -> '1000'."""
    for unit, scale in (("T", TiB), ("G", GiB), ("M", MiB), ("K", KiB)):
        if n and n % scale == 0:
            return f"{n // scale}{unit}"
    return str(n)


def fmt_s(x: float | None) -> str:
    """Seconds with about three significant digits; a dash when there is no value."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return DASH
    ax = abs(x)
    if ax >= 100:
        return f"{x:.0f}"
    if ax >= 10:
        return f"{x:.1f}"
    if ax >= 1:
        return f"{x:.2f}"
    return f"{x:.3f}"


def fmt_ms(seconds: float) -> str:
    """Seconds shown as milliseconds with three significant digits."""
    ms = seconds * 1e3
    return f"{ms:.0f} ms" if abs(ms) >= 100 else f"{ms:.3g} ms"


def fmt_range(lo: float | None, hi: float | None) -> str:
    """'1.20\u20131.45'; an unbounded upper end (timeouts reach it) is '\u221e'."""
    if lo is None or hi is None:
        return DASH
    return f"{fmt_s(lo)}{DASH}{INFINITY if hi == math.inf else fmt_s(hi)}"


def fmt_mbps(x: float | None) -> str:
    """A rate in MB/s (10^6 bytes), whole above 10."""
    if x is None or not math.isfinite(x):
        return DASH
    return f"{x:.0f}" if abs(x) >= 10 else f"{x:.1f}"


def fmt_factor(x: float) -> str:
    """Two decimals below 10× (enough to see a ±10% band), fewer above; never 1e+03."""
    if not math.isfinite(x):
        return INFINITY if x > 0 else DASH
    if abs(x) >= 100:
        return f"{x:.0f}"
    return f"{x:.1f}" if abs(x) >= 10 else f"{x:.2f}"


def fmt_pct(fraction: float) -> str:
    """0.1 -> '10%'."""
    return f"{fraction * 100:g}%"


def fmt_ratio(ratio: float | None) -> str:
    """A ratio B / A: "from 0" and "to 0" at the ends, 1/N below 1% (0.00\u00d7 would hide
    how much)."""
    if ratio is None:
        return DASH
    if math.isinf(ratio):
        return "from 0"
    if ratio == 0:
        return "to 0"
    if ratio < 0.01:
        return f"1/{fmt_factor(1 / ratio)}{TIMES}"
    return f"{fmt_factor(ratio)}{TIMES}"


class RatioInterval(Protocol):
    """A ratio with its interval (`stats.RatioCI` is one): what `fmt_ratio_ci` shows."""

    @property
    def ratio(self) -> float: ...
    @property
    def lo(self) -> float: ...
    @property
    def hi(self) -> float: ...


def fmt_ratio_ci(r: RatioInterval | None) -> str:
    """'3.20\u00d7 [2.90\u20133.50]': a ratio and its interval; an unbounded end is '\u221e'."""
    if r is None:
        return DASH
    return f"{fmt_factor(r.ratio)}{TIMES} [{fmt_factor(r.lo)}{DASH}{fmt_factor(r.hi)}]"


def fmt_count(x: float) -> str:
    """A count with thousands separators; a median of an even number of runs keeps .5."""
    if not math.isfinite(x):
        return DASH
    return f"{x:,.0f}" if float(x).is_integer() else f"{x:,.1f}"


def fmt_value(x: float, unit: str) -> str:
    """A value in its unit: seconds as ms below 1 s, KiB as a size, anything else a count."""
    if unit == "s":
        return fmt_ms(x) if abs(x) < 1 else f"{fmt_s(x)} s"
    if unit == "KiB":
        return human_size(x * 1024)
    return fmt_count(x)


def fmt_signed(x: float, unit: str) -> str:
    """A difference with its sign (a true minus sign), '0' unsigned."""
    text = fmt_value(abs(x), unit)
    return ("+" if x > 0 else MINUS if x < 0 else "") + text


def _median(values: Iterable[float]) -> float:
    """The median, NaN for no values (shown as a dash)."""
    xs = sorted(values)
    if not xs:
        return math.nan
    mid = len(xs) // 2
    return xs[mid] if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2


def fmt_spread(values: Sequence[float], unit: str) -> str:
    """median, and [min\u2013max] when there is more than one value."""
    mid = fmt_value(_median(values), unit)
    if len(values) < 2 or min(values) == max(values):
        return mid
    return f"{mid} [{fmt_value(min(values), unit)}{DASH}{fmt_value(max(values), unit)}]"


def fmt_p(p: float) -> str:
    """A p-value: two significant digits, scientific below 0.001."""
    return f"{p:.2g}" if p >= 0.001 else f"{p:.1e}"


def fmt_bytes(n: object) -> str:
    """A byte count from stored data (may be anything): binary units, or the value as text."""
    try:
        x = float(n)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return str(n)
    if not math.isfinite(x):
        return str(n)
    return human_size(x)


def plural(n: int, word: str, many: str | None = None) -> str:
    """'1 trial', '3 trials'."""
    return f"{n} {word if n == 1 else (many or word + 's')}"
