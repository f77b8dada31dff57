"""Plot the slowdisk seek curves of `dvd` and `hdd-5400` against the published drive figures
they are calibrated with, and print the calibration table of docs/measurements/slowdisk.md.

Pure arithmetic on the model (no device, no root, well under a second of model time):
seek time against seek distance, for the dvd from the inner edge, from mid-disc (41 mm) and
from near the outer edge, on a full 4.7 GB disc; for hdd-5400 on a 500 GB disk. The sourced
points are those of `backburner.slowdisk.calibration.POINTS` that are seeks of one distance;
averages (over all start/end pairs) are drawn as horizontal lines.

Usage: .venv/bin/python benchmarks/slowdisk_calibration.py [--out docs/img/slowdisk-calibration.png]
"""

from __future__ import annotations

import argparse
import sys

import matplotlib
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from backburner.slowdisk import calibration
from backburner.slowdisk.calibration import dvd_disk, hdd_disk, offset_at_radius
from backburner.slowdisk.profiles import DVD, HDD_5400

MB = 1e6
#: Sourced seek points drawn on the dvd panel: (radial start mm, distance mm, label).
DVD_SEEKS = [(24.0, 0.0004, "35 ms: shortest (Wii)"), (24.0, 0.5, None),
             (24.0, 0.99, None), (24.0, 1.01, None), (30.0, 10.0, None),
             (24.0, 34.0, None)]


def _dvd_curve(ax, start_mm: float, label: str) -> None:
    d = dvd_disk()
    a = offset_at_radius(d, start_mm)
    xs, ys = [], []
    dist = 32 * 1024
    while a + dist <= d.span:
        xs.append(dist / MB)
        ys.append(d.seek_time(dist, a) * 1000)
        dist = int(dist * 1.05) + 1
    ax.plot(xs, ys, label=label)


def _old_dvd(ax) -> None:
    """The earlier assumed curve: sqrt, 30 ms settle, 200 ms full stroke over the image."""
    span = dvd_disk().span
    xs = [32 * 1024 * 1.05**i / MB for i in range(400) if 32 * 1024 * 1.05**i <= span]
    ys = [30 + 170 * (x * MB / span) ** 0.5 for x in xs]
    ax.plot(xs, ys, linestyle=":", color="grey", label="before: sqrt 30/200 ms (assumed)")


def draw(out: str) -> None:
    fig = Figure(figsize=(10, 4.2))
    left, right = fig.subplots(1, 2)
    with matplotlib.rc_context({"text.parse_math": False}):
        for start, label in ((24.0, "from the inner edge (24 mm)"), (41.0, "from 41 mm"),
                             (55.0, "from 55 mm")):
            _dvd_curve(left, start, "model " + label)
        _old_dvd(left)
        d = dvd_disk()
        xs, ys = [], []
        for start, dist, note in DVD_SEEKS:
            a, b = offset_at_radius(d, start), offset_at_radius(d, start + dist)
            src = DVD.optical.seek_s(dist) * 1000 if DVD.optical else 0.0
            xs.append((b - a) / MB)
            ys.append(src)
            if note:
                left.annotate(note, ((b - a) / MB, src), textcoords="offset points",
                              xytext=(-130 if dist > 10 else 5, -3 if dist > 10 else 5),
                              fontsize=8)
        left.scatter(xs, ys, color="black", zorder=5,
                     label="measured curve (Dolphin): 35 ms ... 228 ms full stroke")
        left.axhspan(100, 130, color="tab:green", alpha=0.12,
                     label="PC drives: average access 100-130 ms")
        left.axhline(DVD.average_seek_s * 1000, color="tab:red", linestyle="--", linewidth=0.8,
                     label=f"model average seek {DVD.average_seek_s * 1000:.0f} ms "
                     "(Wii 123, SD-R1312 120)")
        left.set_xscale("log")
        left.set_xlabel("seek distance, MB (4.7 GB disc)")
        left.set_ylabel("seek time, ms (no rotation, no command)")
        left.set_title("dvd")
        left.legend(fontsize=7, loc="upper left", bbox_to_anchor=(0.0, 0.93))
        left.set_ylim(0, 250)

        h = hdd_disk()
        cap = h.capacity
        xs = [cap * 10 ** (-7 + 7 * i / 300) for i in range(301)]
        right.plot([x / 1e9 for x in xs], [h.seek_time(int(x)) * 1000 for x in xs],
                   label="model (sqrt curve)")
        track = int(h.rate_at(0) / (HDD_5400.rpm / 60))
        right.scatter([track / 1e9, cap / 1e9], [1.0, 20.0], color="black", zorder=5,
                      label="Travelstar 5K160/5K320: track-to-track 1.0, full 20 ms")
        right.axhspan(11, 12, color="tab:green", alpha=0.15,
                      label="average read seek 11-12 ms (Travelstar, MQ01ABD, Scorpio Blue)")
        right.axhline(HDD_5400.average_seek_s * 1000, color="tab:red", linestyle="--",
                      linewidth=0.8,
                      label=f"model average seek {HDD_5400.average_seek_s * 1000:.1f} ms")
        right.set_xscale("log")
        right.set_xlabel("seek distance, GB (500 GB disk)")
        right.set_ylabel("seek time, ms")
        right.set_title("hdd-5400")
        right.legend(fontsize=7, loc="upper left")
        right.set_ylim(0, 25)
        right.set_xlim(right=cap / 1e9 * 2)
        plain = FuncFormatter(lambda v, _: f"{v:g}")  # no mathtext: parse_math is off
        for ax in (left, right):
            ax.xaxis.set_major_formatter(plain)
        fig.tight_layout()
        fig.savefig(out, dpi=110, metadata={"Software": None})


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="docs/img/slowdisk-calibration.png")
    args = ap.parse_args()
    draw(args.out)
    print(calibration.table())
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
