"""Built-in slowdisk profiles and the ``flat:MS`` pseudo-profile.

Every built-in profile carries a ``source`` string saying where its figures come from. The
seek curves are calibrated so that :attr:`Profile.average_seek_s` (the average over all
start/end pairs, which is how datasheets define "average seek") matches the quoted average;
see :mod:`backburner.slowdisk.model` for the curve. Figures marked "assumed" are round values
of the right order, not taken from a particular datasheet.
"""

from __future__ import annotations

from ..base.errors import UsageError
from .drive import FlatProfile, Optical, Profile

KiB = 1024
MiB = 1024 * KiB
MB = 1_000_000

#: DVD 1x user-data rate: 11.08 Mbit/s (ECMA-267).
DVD_1X = 11.08e6 / 8
#: Radii of the DVD data zone (ECMA-267): starts at 24 mm, ends at most at 58 mm.
DVD_R_INNER_MM = 24.0
DVD_R_OUTER_MM = 58.0

#: A single-layer 120 mm DVD and the seek curve of a real DVD drive, measured. Geometry:
#: ECMA-267 radii; 4 699 979 776 bytes (2 294 912 sectors, Dolphin's single-layer size).
#: Seeks: Dolphin emulator, Source/Core/Core/HW/DVD/DVDMath.cpp ("experimentally measured
#: seek constants", on a Wii's DVD drive, dolphin-emu/dolphin PR 327): below 1 mm of radial
#: distance 35 ms + 50 ms/mm, beyond 75 ms + 4.5 ms/mm (full stroke 34 mm: 228 ms).
DVD_GEOMETRY = Optical(
    r_inner_mm=DVD_R_INNER_MM,
    r_outer_mm=DVD_R_OUTER_MM,
    medium_bytes=4_699_979_776,
    block_bytes=32 * KiB,  # ECC block: 16 sectors of 2 KiB
    short_max_mm=1.0,
    short_s=35e-3,
    short_s_per_mm=50e-3,
    long_s=75e-3,
    long_s_per_mm=4.5e-3,
)

HDD_5400 = Profile(
    name="hdd-5400",
    description="2.5-inch 5400 rpm laptop hard disk",
    rotational=True,
    command_overhead_s=0.3e-3,
    cache_hit_overhead_s=0.1e-3,
    settle_s=1.0e-3,
    full_stroke_s=20.0e-3,  # average seek 11.1 ms
    rpm=5400,
    rate_outer=100 * MB,
    rate_inner=50 * MB,
    outer_at_start=True,
    cache_bytes=2 * MiB,
    interface_rate=300 * MB,  # SATA 3 Gb/s
    write_overhead_s=1.0e-3,
    source=(
        "seek/latency: Hitachi Travelstar 5K160 / 5K320 OEM specifications (5400 rpm, "
        "single-track seek 1.0 ms, average read seek 11-12 ms, full stroke 20 ms, write "
        "seeks ~1 ms slower, average latency 5.5 ms), same class as the Seagate Momentus "
        "5400 drives; command overhead 0.3 ms (0.1 ms on a cache hit) as listed in IBM/Hitachi "
        "Deskstar/Travelstar OEM specifications; transfer ~100 MB/s outer, ~50 MB/s inner: "
        "typical of published benchmarks of 500 GB-1 TB 2.5-inch 5400 rpm drives (WD Blue "
        "mobile / Momentus class); 2 MiB read-ahead segment of an 8-16 MB buffer, read "
        "ahead after every read: assumed (the one manual found, Fujitsu MHM2xxxAT/MHC/MHE, "
        "gives a 1 MiB read segment of a 2 MB buffer and no read-ahead after a random read); "
        "checked against the sourced figures in docs/measurements/slowdisk.md, Calibration"
    ),
)

HDD_7200 = Profile(
    name="hdd-7200",
    description="3.5-inch 7200 rpm desktop hard disk",
    rotational=True,
    command_overhead_s=0.3e-3,
    cache_hit_overhead_s=0.1e-3,
    settle_s=1.0e-3,
    full_stroke_s=15.0e-3,  # average seek 8.47 ms
    rpm=7200,
    rate_outer=150 * MB,
    rate_inner=75 * MB,
    outer_at_start=True,
    cache_bytes=4 * MiB,
    interface_rate=300 * MB,
    write_overhead_s=1.0e-3,
    source=(
        "seek/latency: Seagate Barracuda 7200.12 product manual (track-to-track read < 1 ms, "
        "average read seek < 8.5 ms, average latency 4.16 ms) and Hitachi Deskstar 7K1000.C "
        "specification (average seek 8.5 ms read / 9.5 ms write); full stroke 15 ms follows "
        "from the sqrt curve with those two figures; command overhead 0.3 ms (0.1 ms on a "
        "cache hit) as in IBM/Hitachi Deskstar OEM specifications; transfer ~150 MB/s outer, "
        "~75 MB/s inner: WD Blue / Barracuda desktop drives with 500 GB-1 TB platters (makers "
        "quote 125-210 MB/s maximum sustained; inner zones run at about half); 4 MiB "
        "read-ahead segment of a 32-64 MB buffer: assumed"
    ),
)

DVD = Profile(
    name="dvd",
    description="16x DVD-ROM drive (CAV), read-only medium",
    rotational=True,
    command_overhead_s=0.6e-3,
    cache_hit_overhead_s=0.6e-3,
    settle_s=DVD_GEOMETRY.short_s,  # 35 ms: the shortest seek
    full_stroke_s=DVD_GEOMETRY.full_stroke_s,  # 228 ms; average seek 123 ms (full disc)
    rpm=9200,  # 16x at the 58 mm outer radius: 16 * 3.49 m/s / (2 pi 58 mm) ~ 153 rev/s
    rate_outer=16 * DVD_1X,  # 22.2 MB/s
    rate_inner=16 * DVD_1X * DVD_R_INNER_MM / DVD_R_OUTER_MM,  # 6.6x, 9.2 MB/s
    outer_at_start=False,  # a DVD is read from the inside out: the END is the fast edge
    cache_bytes=1 * MiB,
    interface_rate=66 * MB,  # ATA/ATAPI UDMA mode 4
    read_only_medium=True,
    command_queueing=False,  # ATAPI: one command at a time, the host sorts and merges
    optical=DVD_GEOMETRY,
    source=(
        "geometry and rate: DVD specification ECMA-267 (120 mm DVD-ROM): 1x = 11.08 Mbit/s "
        "user data, 3.49 m/s scanning velocity, data zone from 24 mm to 58 mm radius, 32 KiB "
        "ECC blocks; a 16x CAV drive reads 6.6x at the inner edge and 16x at the outer one, "
        "the rate linear in the radius (Dolphin emulator DVDMath.cpp, matched to a hardware "
        "test: a Wii's drive reads 3.48 MiB/s inner, 8.41 MiB/s outer, the same 24:58); "
        "an image smaller than a disc sits on its inner rings. Seeks: measured on a Wii's "
        "DVD drive (Dolphin DVDMath.cpp, dolphin-emu/dolphin PR 327): 35 ms + 50 ms/mm "
        "below 1 mm of radial distance, 75 ms + 4.5 ms/mm beyond, so average seek 123 ms, "
        "full stroke 228 ms (PC drive datasheets and reviews: average seek or access about "
        "100-130 ms). Buffer: the drive reads on 1 MiB past the last read while idle; a "
        "read ahead of what it has buffered, or behind it, is a seek (Dolphin "
        "DVDInterface.cpp and PR 9847, hardware-tested; PC drives have 0.5-2 MB buffers); "
        "0.6 ms per read command, also when served from the buffer (Dolphin PR 8935). "
        "Assumed: 9200 rpm (16x at the outer edge; rotational latency 3.3 ms), that a 16x "
        "PC drive seeks like the Wii's 6x drive, the 66 MB/s ATAPI link. ATAPI (MMC) drives "
        "take one command at a time (no tagged/native command queueing), so the host's IO "
        "scheduler orders and merges what waits"
    ),
)

SDCARD = Profile(
    name="sdcard",
    description="SD card / eMMC (A1 class): no seek, fast-ish random reads, slow random writes",
    rotational=False,
    command_overhead_s=0.10e-3,
    settle_s=0.46e-3,  # constant random-access penalty (flash: no seek curve)
    full_stroke_s=0.46e-3,
    rpm=0,
    rate_outer=40 * MB,
    rate_inner=40 * MB,
    cache_bytes=0,
    write_overhead_s=0.10e-3,
    random_write_penalty_s=1.14e-3,  # random 4 KiB write = 2.0 ms = 500 IOPS
    write_rate_factor=0.5,  # 20 MB/s sequential write
    source=(
        "SD Association Application Performance Class A1 (minimum 1500 random-read and 500 "
        "random-write IOPS at 4 KiB, 10 MB/s sustained sequential) and Speed Class 10 / UHS "
        "Speed Class U1 (10 MB/s minimum sequential write): random 4 KiB costs 0.66 ms read "
        "(~1500 IOPS) and 2.0 ms write (500 IOPS) here; ~40 MB/s read / ~20 MB/s write are "
        "typical of published measurements of A1 cards in UHS-I (DDR50) readers such as "
        "single-board computers"
    ),
)

BUILTIN: dict[str, Profile] = {p.name: p for p in (HDD_5400, HDD_7200, DVD, SDCARD)}

FLAT_PREFIX = "flat:"


def profile_names() -> list[str]:
    """Names accepted by :func:`get_profile` (``flat:MS`` stands for any delay)."""
    return [*BUILTIN, "flat:MS"]


def list_profiles() -> list[Profile]:
    """The built-in profiles, in a stable order (``flat:MS`` is parsed on demand)."""
    return list(BUILTIN.values())


def get_profile(name: str) -> Profile:
    """A built-in profile by name, or ``flat:MS`` (e.g. ``flat:20``, ``flat:0.5``)."""
    key = name.strip().lower()
    if key in BUILTIN:
        return BUILTIN[key]
    if key.startswith(FLAT_PREFIX):
        text = key[len(FLAT_PREFIX):]
        try:
            return FlatProfile.from_ms(float(text))
        except ValueError:
            raise UsageError(
                f"bad flat profile {name!r}",
                "use flat:MS with a delay of 0 to 10000 milliseconds, e.g. flat:20",
            ) from None
    raise UsageError(
        f"unknown slowdisk profile {name!r}",
        "known profiles: " + ", ".join(profile_names()),
    )
