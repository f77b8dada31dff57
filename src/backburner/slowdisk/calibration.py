"""Published drive figures the built-in profiles are calibrated against, and the model's value
for each.

One list, three readers: the test that keeps every point within :data:`TOLERANCE` of its
source, the script that plots the seek curves against them
(``benchmarks/slowdisk_calibration.py``), and the table in docs/measurements/slowdisk.md (which that
script prints). A point's ``model`` computes the figure the way its source defines it (an
"average seek" is the mean over uniformly random start/end pairs, a "track-to-track" seek is
one track's distance), on a full medium: a 4.7 GB single-layer DVD, a 500 GB laptop disk.
Pure arithmetic on :mod:`.model`, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .drive import Profile
from .model import Disk
from .profiles import DVD, DVD_GEOMETRY, HDD_5400

#: Largest relative distance allowed between the model and a sourced figure (or range).
TOLERANCE = 0.10
#: The laptop disk the hdd-5400 points are computed on (the Travelstar 5K320 goes to 320 GB,
#: MQ01ABD and Scorpio Blue to 1 TB).
HDD_BYTES = 500 * 10**9

MiB = 1 << 20

DOLPHIN_MATH = "Dolphin DVDMath.cpp (Wii drive, measured)"
DOLPHIN_DI = "Dolphin DVDInterface.cpp"
TRAVELSTAR = "Travelstar 5K160 / 5K320 spec."


@dataclass(frozen=True)
class Point:
    """One calibrated figure: what the source says (a value, or a range lo..hi) and what
    the model gives for it, in the unit given."""

    profile: str
    what: str
    source: str
    lo: float
    hi: float
    unit: str
    model: Callable[[], float]

    def model_value(self) -> float:
        return self.model()

    def error(self) -> float:
        """Relative distance of the model value from the sourced range (0 inside it)."""
        m = self.model_value()
        if m < self.lo:
            return (m - self.lo) / self.lo
        if m > self.hi:
            return (m - self.hi) / self.hi
        return 0.0

    def sourced(self) -> str:
        return f"{self.lo:g}" if self.lo == self.hi else f"{self.lo:g}-{self.hi:g}"


def dvd_disk() -> Disk:
    return Disk(DVD, DVD_GEOMETRY.medium_bytes)


def hdd_disk() -> Disk:
    return Disk(HDD_5400, HDD_BYTES)


def offset_at_radius(disk: Disk, radius_mm: float) -> int:
    """The byte offset at ``radius_mm`` of an optical disk (inverse of the spiral)."""
    o = disk.profile.optical
    if o is None:
        raise ValueError(f"profile {disk.profile.name!r} has no optical geometry")
    ri, ro = o.r_inner_mm, o.r_outer_mm
    return int((radius_mm**2 - ri**2) / (ro**2 - ri**2) * disk.span)


def _ms(x: float) -> float:
    return x * 1000.0


def _dvd_seek_mm(start_mm: float, distance_mm: float) -> Callable[[], float]:
    """Seek between two radii, through the byte offsets the model actually sees."""
    def f() -> float:
        d = dvd_disk()
        a = offset_at_radius(d, start_mm)
        b = offset_at_radius(d, start_mm + distance_mm)
        return _ms(d.seek_time(b - a, a))
    return f


def _dvd_rate_ratio(radius_mm: float) -> Callable[[], float]:
    def f() -> float:
        d = dvd_disk()
        return d.rate_at(offset_at_radius(d, radius_mm)) / DVD.rate_outer
    return f


def _hdd_track_seek() -> float:
    d = hdd_disk()
    track = int(d.rate_at(0) / (HDD_5400.rpm / 60))  # one revolution at the outer edge
    return _ms(d.seek_time(track))


def _hdd_write_average() -> float:
    return _ms(HDD_5400.average_seek_s + HDD_5400.write_overhead_s)


def _hdd_write_full() -> float:
    return _ms(hdd_disk().seek_time(HDD_BYTES) + HDD_5400.write_overhead_s)


def _profile_ms(p: Profile, attr: str) -> Callable[[], float]:
    return lambda: _ms(getattr(p, attr))


POINTS: list[Point] = [
    # -- dvd: the seek curve ---------------------------------------------------------------
    Point("dvd", "shortest seek (one ECC block, inner edge)", DOLPHIN_MATH,
          35.0, 35.0, "ms", _dvd_seek_mm(24.0, 0.0004)),
    Point("dvd", "shortest seek, PS2 DVD drive", "PCSX2 CDVD.cpp (estimate)",
          30.0, 37.0, "ms", _dvd_seek_mm(40.0, 0.0004)),
    Point("dvd", "seek 0.5 mm radial (~40 MB at the inner edge)", DOLPHIN_MATH,
          60.0, 60.0, "ms", _dvd_seek_mm(24.0, 0.5)),
    Point("dvd", "seek 0.99 mm radial (longest short seek)", DOLPHIN_MATH,
          84.5, 84.5, "ms", _dvd_seek_mm(24.0, 0.99)),
    Point("dvd", "seek 1.01 mm radial (long-seek mode)", DOLPHIN_MATH,
          79.545, 79.545, "ms", _dvd_seek_mm(24.0, 1.01)),
    Point("dvd", "seek 10 mm radial", DOLPHIN_MATH,
          120.0, 120.0, "ms", _dvd_seek_mm(30.0, 10.0)),
    Point("dvd", "full-stroke seek (24 to 58 mm)", DOLPHIN_MATH,
          228.0, 228.0, "ms", _dvd_seek_mm(24.0, 34.0)),
    Point("dvd", "average seek, Wii drive (random start/end)", DOLPHIN_MATH,
          123.0, 123.0, "ms", _profile_ms(DVD, "average_seek_s")),
    Point("dvd", "average seek, 12x PC drive", "Toshiba SD-R1312 review",
          120.0, 120.0, "ms", _profile_ms(DVD, "average_seek_s")),
    Point("dvd", "average random access, PC drives", "halolinux; SD-R1312; IBM 48x CD-RW",
          100.0, 130.0, "ms", _profile_ms(DVD, "average_random_access_s")),
    # -- dvd: rate, command, buffer --------------------------------------------------------
    Point("dvd", "rate at the inner edge / outer edge (CAV)", "ECMA-267; " + DOLPHIN_MATH,
          3.48 / 8.41, 3.48 / 8.41, "ratio", _dvd_rate_ratio(24.0)),
    Point("dvd", "rate at 41 mm (mid radius) / outer edge", DOLPHIN_MATH,
          5.945 / 8.41, 5.945 / 8.41, "ratio", _dvd_rate_ratio(41.0)),
    Point("dvd", "read command overhead", DOLPHIN_DI + ", PR 8935",
          0.6, 0.6, "ms", _profile_ms(DVD, "command_overhead_s")),
    Point("dvd", "read command served from the buffer", DOLPHIN_DI + ", PR 8935",
          0.6, 0.6, "ms", _profile_ms(DVD, "cache_hit_overhead_s")),
    Point("dvd", "read-ahead past the last read, while idle", DOLPHIN_DI,
          1.0, 1.0, "MiB", lambda: DVD.cache_bytes / MiB),
    # -- hdd-5400 --------------------------------------------------------------------------
    Point("hdd-5400", "single-track seek (read)", TRAVELSTAR,
          1.0, 1.0, "ms", _hdd_track_seek),
    Point("hdd-5400", "average read seek, Travelstar 5K160", TRAVELSTAR,
          11.0, 11.0, "ms", _profile_ms(HDD_5400, "average_seek_s")),
    Point("hdd-5400", "average read seek, 5K320 / MQ01ABD / Scorpio Blue",
          TRAVELSTAR + "; MQ01ABD; Scorpio Blue",
          12.0, 12.0, "ms", _profile_ms(HDD_5400, "average_seek_s")),
    Point("hdd-5400", "full-stroke seek (read)", TRAVELSTAR,
          20.0, 20.0, "ms", lambda: _ms(hdd_disk().seek_time(HDD_BYTES))),
    Point("hdd-5400", "average write seek", TRAVELSTAR,
          13.0, 13.0, "ms", _hdd_write_average),
    Point("hdd-5400", "full-stroke seek (write)", TRAVELSTAR,
          21.0, 21.0, "ms", _hdd_write_full),
    Point("hdd-5400", "average rotational latency", TRAVELSTAR,
          5.5, 5.5, "ms", _profile_ms(HDD_5400, "rotational_latency_s")),
]


def table() -> str:
    """The calibration table of docs/measurements/slowdisk.md, as Markdown."""
    rows = ["| profile | point | source | sourced | model | error |",
            "| --- | --- | --- | --: | --: | --: |"]
    for p in POINTS:
        m = p.model_value()
        rows.append(f"| {p.profile} | {p.what} | {p.source} | {p.sourced()} {p.unit} | "
                    f"{m:.4g} {p.unit} | {p.error():+.1%} |")
    return "\n".join(rows)


__all__ = ["HDD_BYTES", "POINTS", "TOLERANCE", "Point", "dvd_disk", "hdd_disk",
           "offset_at_radius", "table"]
