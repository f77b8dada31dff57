"""The commands a slowdisk's drive served, read back from its daemon's requests.log.

The daemon (`fs`) writes one line per command it served; the bench and the tests read them
here to see what a start cost on the modelled drive (seeks, cache hits, host merges),
apart from the device's lifecycle in `device`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Served:
    """One command the drive served, from its requests.log (`fs`): times in seconds on
    the daemon's clock."""

    seq: int
    arrival: float
    start: float
    finish: float
    offset: int
    length: int
    kind: str  # sequential, cache, skip, random (a seek), flat
    carried: int  # requests the host merged into it (1: none)
    seek_s: float

    @property
    def seek(self) -> bool:
        return self.kind == "random"


def parse_requests(text: str, since: int = 0) -> list[Served]:
    """requests.log's lines numbered `since` and later."""
    out = []
    for line in text.splitlines():
        f = line.split()
        if len(f) != 9 or int(f[0]) < since:
            continue
        out.append(Served(int(f[0]), float(f[1]), float(f[2]), float(f[3]), int(f[4]),
                          int(f[5]), f[6], int(f[7]), float(f[8])))
    return out


def read_requests(path: str, since: int = 0) -> list[Served]:
    """The commands a slowdisk served (its requests.log at `path`), from number `since`
    on: take stats.json's ``requests`` before a start as `since` for the start's own."""
    with open(path) as f:
        return parse_requests(f.read(), since)
