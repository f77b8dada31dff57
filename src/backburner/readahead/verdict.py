"""A pack's measured worth: the start timed with and without a replay of it, and the
bytes the replay read that the start then did not use (`readahead measure` writes it
beside the pack, as PACK.verdict; `replay`, `show` and the boot unit read it).

A prefetcher can make a start slower: it reads what the start does not need, or reads
it in the start's way (preload's own announcement: a desktop login 37 -> 32 s, but
power-on to GDM 65 -> 85 s). So the cure checks itself: a replay reports the last
measurement of its pack beside what it read, and skips a pack measured as making the
start slower (`--force` replays it anyway). Loading it imports nothing heavy: a boot's
replay reads it.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from ..base.errors import DataError
from ..base.quantities import fmt_pct, fmt_s, human_size
from ..files import infile

if TYPE_CHECKING:
    from .. import spawn
    from .replay import ReplayOptions, ReplayReport

SUFFIX = ".verdict"
VERSION = 1
SLOWER, FASTER, SAME = "slower", "faster", "no difference"
_MAX_BYTES = 1 << 20


@dataclass(frozen=True)
class Verdict:
    measured_ns: int
    command: str
    mode: str  # "with": a replay launched with the start (as at boot); "before": then it
    without_s: tuple[float, ...]
    with_s: tuple[float, ...]
    ratio: float  # median with / median without
    lo: float  # its 95% interval
    hi: float
    verdict: str  # SLOWER, FASTER or SAME
    replayed: int = 0  # bytes of files the replays read (medians of the rounds)
    unused: int = 0  # of which the start did not use
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def waste(self) -> float | None:
        """The share of the replayed bytes the start did not use (None: not measured)."""
        return self.unused / self.replayed if self.replayed else None

    @property
    def slower(self) -> bool:
        return self.verdict == SLOWER

    def as_dict(self) -> dict[str, Any]:
        return {"version": VERSION, **asdict(self)}


def path_of(pack: str) -> str:
    return os.fspath(pack) + SUFFIX


def load(pack: str) -> Verdict | None:
    """The verdict beside `pack`, or None when there is none. A damaged one is refused
    (DataError): a replay that cannot tell whether it is wanted says so."""
    where = path_of(pack)
    if not os.path.lexists(where):
        return None
    data = infile.read(where, "verdict", _MAX_BYTES)
    try:
        raw = json.loads(data)
        if raw.pop("version") != VERSION:
            raise ValueError("another version")
        raw["without_s"] = tuple(raw["without_s"])
        raw["with_s"] = tuple(raw["with_s"])
        raw["notes"] = tuple(raw.get("notes", ()))
        return Verdict(**raw)
    except (ValueError, KeyError, TypeError) as err:
        raise DataError(f"{where}: not a verdict this backburner reads ({err})",
                        "measure the pack again: backburner readahead measure") from None


def describe(v: Verdict) -> str:
    """The measurement in one line."""
    when = time.strftime("%Y-%m-%d", time.localtime(v.measured_ns / 1e9))
    waste = v.waste
    used = ("" if waste is None else
            f"; the replay read {human_size(v.replayed)}, {fmt_pct(round(waste, 3))} of it "
            "unused by the start")
    how = "launched with it" if v.mode == "with" else "before it"
    return (f"measured {when}: the start took {fmt_s(_median(v.with_s))} s with a replay "
            f"{how} and {fmt_s(_median(v.without_s))} s without ({len(v.with_s)} each: "
            f"{v.verdict}, {v.ratio:.2f}x [{v.lo:.2f}, {v.hi:.2f}]){used}")


def replay_unless_slower(pack_path: str, opts: ReplayOptions, force: bool,
                         background: bool) -> tuple[Verdict | None, ReplayReport | None,
                                                    spawn.Child | None]:
    """A replay of the pack, unless a measurement found it makes the start slower (and
    not `force`d): the pack's verdict (if any), and the replay's report (`background`:
    the child doing it); both None when it was skipped for that."""
    from . import packfile, replay  # here: show reads a verdict without a replay's imports
    from .background import start_background

    found = load(pack_path)
    pack = packfile.load(pack_path)  # a bad pack is refused here, not in the background
    if found is not None and found.slower and not force:
        return found, None, None
    if background:
        return found, None, start_background(pack_path, opts)
    return found, replay.replay(pack, opts), None


def describe_skip(v: Verdict) -> str:
    return (f"not replayed: {describe(v)}; the pack makes the start slower "
            "(record it again, or replay it anyway with --force)")


def _median(xs: tuple[float, ...]) -> float:
    s = sorted(xs)
    n = len(s)
    return (s[n // 2] + s[(n - 1) // 2]) / 2 if n else 0.0


__all__ = ["FASTER", "SAME", "SLOWER", "SUFFIX", "Verdict", "describe", "describe_skip", "load",
           "path_of", "replay_unless_slower"]
