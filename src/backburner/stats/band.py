"""The band a verdict is judged against: how much slower than unloaded a person at the
machine would notice, for a start of that length.

A bare ±10% asks a 0.2 s start to be pinned to within 20 ms -- less than anyone sees -- and
a 9 s start to within 0.9 s. What a person notices is a difference that is large both
relative to the start and in absolute terms, so the band is the larger of the two
thresholds, and never wider than `WIDEST`:

    band(T) = min(WIDEST, max(NOTICEABLE_FRACTION, NOTICEABLE_S / T))

for an unloaded start of median T seconds: ±25% for a 0.2 s start (100 ms of it would be
50%), ±10% from 1 s up. The constants come from studies of how people perceive time and
response time, chosen before any run was judged with them (docs/design/statistics.md, "The band a
person notices", has the sources):

* `NOTICEABLE_FRACTION` (10%): Weber's law holds for durations of tenths of a second to
  seconds -- the smallest difference noticed is a fixed fraction of the duration. That
  fraction is about 5% at best for trained listeners comparing tones back to back (Getty
  1975), about 20% for visual durations of seconds (Wackermann & Spati 2006) and in the
  rule of thumb for software response times (Seow 2008, "the 20% rule"); 10% is taken, the
  sensitive end for a person who is not in a laboratory.
* `NOTICEABLE_S` (100 ms): the model human processor's perceptual cycle, 100 ms [50-200]
  (Card, Moran & Newell 1983) -- events within one cycle fuse into one percept -- and the
  limit below which a response feels instantaneous (Miller 1968; Nielsen 1993).
* `WIDEST` (25%): whatever the start's length, no band wider than this, so no start is
  called "not noticeably slower" when it is a quarter slower.

A band given by hand (`--tolerance`) replaces the rule. Pure: numbers in, a `Band` out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

#: A person notices a change in a start's time of more than this fraction of it ...
NOTICEABLE_FRACTION = 0.10
#: ... and of more than this many seconds (both must be exceeded).
NOTICEABLE_S = 0.100
#: The band is never wider than this, whatever the start's length.
WIDEST = 0.25


class Basis(StrEnum):
    """Which part of the rule set a band's width."""

    RELATIVE = "relative"  # NOTICEABLE_FRACTION: a start of NOTICEABLE_S / fraction or more
    ABSOLUTE = "absolute"  # NOTICEABLE_S of the unloaded start
    WIDEST = "widest"      # the cap: NOTICEABLE_S would be more than WIDEST of the start
    GIVEN = "given"        # by hand (--tolerance), not by the rule


@dataclass(frozen=True)
class Band:
    """The verdict's band 1 +/- ``tolerance`` (a fraction), why it is that wide, and the
    unloaded median it was sized for (None: given by hand, or no unloaded time known)."""

    tolerance: float
    basis: Basis
    reference_s: float | None = None


def check_tolerance(tolerance: float) -> None:
    if not (math.isfinite(tolerance) and 0.0 <= tolerance < 1.0):
        raise ValueError(f"tolerance must be in [0, 1), got {tolerance}")


def noticeable(reference_s: float | None) -> Band:
    """The band for an unloaded start of median ``reference_s`` seconds: the larger of
    `NOTICEABLE_FRACTION` and `NOTICEABLE_S` of it, at most `WIDEST`. No usable time (None,
    0, not finite): the relative part alone, the narrowest the rule gives."""
    if reference_s is None or not (math.isfinite(reference_s) and reference_s > 0.0):
        return Band(NOTICEABLE_FRACTION, Basis.RELATIVE, None)
    absolute = NOTICEABLE_S / reference_s
    if absolute <= NOTICEABLE_FRACTION:
        return Band(NOTICEABLE_FRACTION, Basis.RELATIVE, reference_s)
    if absolute < WIDEST:
        return Band(absolute, Basis.ABSOLUTE, reference_s)
    return Band(WIDEST, Basis.WIDEST, reference_s)


def band_for(reference_s: float | None, tolerance: float | None = None) -> Band:
    """The band a verdict uses: ``tolerance`` when given by hand, else `noticeable`."""
    if tolerance is not None:
        check_tolerance(tolerance)
        return Band(tolerance, Basis.GIVEN, reference_s)
    return noticeable(reference_s)
