"""What a modelled drive is: a `Profile` of its timing (command overhead, seek curve,
rotation, zoned rate, cache, writes), an optical disc's geometry (`Optical`), and dm-delay's
flat delay (`FlatProfile`).

Pure values with the closed forms a profile implies (average seek, rotational latency):
`model.Disk` runs requests against one, `profiles` names the built-in ones, and the
geometry they stand for is described in `model`'s docstring.
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass, fields
from typing import ClassVar

#: E[sqrt(|x - y|)] for x, y independent and uniform on [0, 1]: 2 * integral (1-u) sqrt(u) du.
SQRT_SEEK_MEAN_FRACTION = 8.0 / 15.0


@dataclass(frozen=True)
class Optical:
    """Geometry and seek curve of an optical disc (see "Optical geometry" above).

    Radii in millimetres, times in seconds. Frozen and hashable, so the numerical average
    seek is computed once per geometry."""

    r_inner_mm: float  # radius of the first data byte
    r_outer_mm: float  # radius of the last byte of a full disc
    medium_bytes: int  # capacity of a full disc; a smaller image sits on its inner rings
    block_bytes: int  # the drive reads whole blocks of this size (DVD ECC block: 32 KiB)
    short_max_mm: float  # radial distances below this are short seeks
    short_s: float  # short seek: constant ...
    short_s_per_mm: float  # ... plus this per mm of radial distance
    long_s: float  # long seek: constant ...
    long_s_per_mm: float  # ... plus this per mm

    def __post_init__(self) -> None:
        if not 0 < self.r_inner_mm < self.r_outer_mm:
            raise ValueError("optical geometry needs 0 < r_inner_mm < r_outer_mm")
        if self.medium_bytes <= 0 or self.block_bytes <= 0:
            raise ValueError("optical geometry needs medium_bytes > 0 and block_bytes > 0")
        if min(self.short_max_mm, self.short_s, self.short_s_per_mm, self.long_s,
               self.long_s_per_mm) < 0:
            raise ValueError("optical seek constants must be >= 0")

    @property
    def stroke_mm(self) -> float:
        return self.r_outer_mm - self.r_inner_mm

    def radius_mm(self, offset: float, span: int) -> float:
        """Radius of byte ``offset`` on a spiral holding ``span`` bytes from inner to outer."""
        frac = min(max(offset / span, 0.0), 1.0)
        ri, ro = self.r_inner_mm, self.r_outer_mm
        return math.sqrt(frac * (ro * ro - ri * ri) + ri * ri)

    def seek_s(self, radial_mm: float) -> float:
        """Seek time for a radial distance (mm); 0 for no movement."""
        d = abs(radial_mm)
        if d == 0:
            return 0.0
        if d < self.short_max_mm:
            return self.short_s + self.short_s_per_mm * d
        return self.long_s + self.long_s_per_mm * d

    @property
    def full_stroke_s(self) -> float:
        return self.seek_s(self.stroke_mm)

    @property
    def average_seek_s(self) -> float:
        """Seek averaged over uniformly random start/end offsets on a full disc."""
        return _optical_average_seek(self)


@functools.lru_cache(maxsize=16)
def _optical_average_seek(o: Optical, n: int = 400) -> float:
    """Midpoint rule over an n x n grid of offsets (the curve is piecewise linear in the
    radius, the radius a square root of the offset: no closed form worth keeping)."""
    radii = [o.radius_mm((i + 0.5) / n, 1) for i in range(n)]
    return sum(o.seek_s(a - b) for a in radii for b in radii) / (n * n)


@dataclass(frozen=True)
class Profile:
    """Timing parameters of one kind of device. Times in seconds, rates in bytes/s."""

    name: str
    description: str
    rotational: bool
    command_overhead_s: float  # per command that misses the cache
    settle_s: float  # shortest seek (track-to-track incl. settling); flash: random-access cost
    full_stroke_s: float  # seek across the whole image
    rpm: float  # 0 for non-rotating media
    rate_outer: float  # media transfer rate at the outer edge, bytes/s
    rate_inner: float  # media transfer rate at the inner edge, bytes/s
    outer_at_start: bool = True  # HDD: offset 0 is the outer edge; DVD (CAV): the inner one
    cache_bytes: int = 0  # read-ahead / segment cache; 0 = none
    cache_hit_overhead_s: float = 0.0  # command overhead when served from the cache
    interface_rate: float = 0.0  # bytes/s for cache hits (SATA/ATAPI link); 0 = media rate
    write_overhead_s: float = 0.0  # extra per write (write settle / program setup)
    random_write_penalty_s: float = 0.0  # extra per non-sequential write (flash FTL)
    write_rate_factor: float = 1.0  # write media rate = factor * read media rate
    read_only_medium: bool = False  # e.g. a pressed DVD: writes are refused
    command_queueing: bool = True  # False: one command at a time, the host sorts and merges
    optical: Optical | None = None  # disc geometry and radial seek curve (DVD); None: sqrt
    source: str = ""  # where the figures come from

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, float | int) and not isinstance(value, bool) and value < 0:
                raise ValueError(f"profile {self.name!r}: {f.name} must be >= 0, got {value}")
        if self.full_stroke_s < self.settle_s:
            raise ValueError(f"profile {self.name!r}: full_stroke_s < settle_s")
        if self.rate_outer <= 0 or self.rate_inner <= 0:
            raise ValueError(f"profile {self.name!r}: transfer rates must be > 0")
        if self.write_rate_factor <= 0:
            raise ValueError(f"profile {self.name!r}: write_rate_factor must be > 0")
        if self.rotational and self.rpm <= 0:
            raise ValueError(f"profile {self.name!r}: a rotational profile needs rpm > 0")
        o = self.optical
        if o is not None:
            if not self.rotational or self.outer_at_start:
                raise ValueError(f"profile {self.name!r}: an optical disc rotates and starts "
                                 "at the inner edge")
            # settle/full stroke are the curve's two ends, so listings show the real figures
            if not (math.isclose(self.settle_s, o.short_s)
                    and math.isclose(self.full_stroke_s, o.full_stroke_s)):
                raise ValueError(f"profile {self.name!r}: settle_s/full_stroke_s must be the "
                                 f"optical curve's {o.short_s} / {o.full_stroke_s}")

    @property
    def rotational_latency_s(self) -> float:
        """Expected rotational latency of a non-sequential access: half a revolution."""
        return 30.0 / self.rpm if self.rotational and self.rpm > 0 else 0.0

    @property
    def average_seek_s(self) -> float:
        """Seek time averaged over uniformly random start/end pairs (datasheet "average");
        for an optical profile, over a full disc."""
        if self.optical is not None:
            return self.optical.average_seek_s
        return self.settle_s + (self.full_stroke_s - self.settle_s) * SQRT_SEEK_MEAN_FRACTION

    @property
    def average_random_access_s(self) -> float:
        """Overhead + average seek + rotational latency: a random small read, no transfer."""
        return self.command_overhead_s + self.average_seek_s + self.rotational_latency_s

    def as_dict(self) -> dict[str, object]:
        d = asdict(self)
        d["average_seek_s"] = self.average_seek_s
        d["rotational_latency_s"] = self.rotational_latency_s
        return d


@dataclass(frozen=True)
class FlatProfile(Profile):
    """dm-delay style: every request completes ``delay_s`` after arrival, in parallel."""

    delay_s: float = 0.0

    #: Longest delay per request: beyond it, requests would outlast IO timeouts (30 s for
    #: SCSI disks) and no real medium is that slow. 0 is a passthrough: the FUSE path's own
    #: cost, for comparison.
    MAX_MS: ClassVar[float] = 10_000.0

    @classmethod
    def from_ms(cls, ms: float) -> FlatProfile:
        if not math.isfinite(ms) or not 0 <= ms <= cls.MAX_MS:
            raise ValueError(f"flat delay must be 0 to {cls.MAX_MS:g} ms, got {ms}")
        return cls(
            name=f"flat:{ms:g}",
            description=f"constant {ms:g} ms per request, no queueing (like dm-delay)",
            rotational=False,
            command_overhead_s=0.0,
            settle_s=0.0,
            full_stroke_s=0.0,
            rpm=0.0,
            rate_outer=1.0,
            rate_inner=1.0,
            source="dm-delay (Linux device-mapper delay target, three-argument table): "
            "the same fixed delay for reads, writes and flushes",
            delay_s=ms / 1000.0,
        )


__all__ = ["SQRT_SEEK_MEAN_FRACTION", "FlatProfile", "Optical", "Profile"]
