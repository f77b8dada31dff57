"""One measured scenario on the testbed: `downloads` bulk downloads and `uploads` bulk
uploads run (in `cgroup_procs` when a policy covers them), and after a warm-up that lets
the link's buffer fill, the probe fetches the small page `probes` times. The figures:
each fetch's time and TCP handshake round trip, and the downloads' own speed over their
whole run."""

from __future__ import annotations

import json
import signal
import statistics
import time
from dataclasses import dataclass

from .. import spawn
from ..base.errors import SystemStateError
from .testbed import PORT, SERVER_ADDR, Testbed, client

WARMUP_S = 3.0
PROBE_GAP_S = 0.3


@dataclass(frozen=True)
class Figures:
    downloads: int
    fetch_s: list[float]
    connect_s: list[float]
    bulk_bit_s: float  # all downloads and uploads together, over their whole run
    uploads: int = 0

    @property
    def fetch_median_s(self) -> float:
        return statistics.median(self.fetch_s) if self.fetch_s else float("nan")

    @property
    def connect_median_s(self) -> float:
        return statistics.median(self.connect_s) if self.connect_s else float("nan")


def _read(child: object) -> dict[str, object]:
    out = child.popen.stdout.read()  # type: ignore[attr-defined]
    outcome = child.wait()  # type: ignore[attr-defined]
    if not outcome.ok:
        raise SystemStateError(f"a testbed client failed: {outcome.describe()}")
    return json.loads(out)


def scenario(bed: Testbed, downloads: int, probes: int, *,
             cgroup_procs: tuple[str, ...] = (), seconds: float | None = None,
             uploads: int = 0) -> Figures:
    """Run it; the loads run `seconds`, or (by default) until the probe is done."""
    run_s = seconds if seconds is not None else 600.0  # stopped when the probe is done
    loads = [client(bed, spawn.python_module("backburner.net.client", kind, SERVER_ADDR,
                                             str(PORT), f"{run_s:g}"), cgroup_procs)
             for kind in ["download"] * downloads + ["upload"] * uploads]
    fetch: list[float] = []
    connect: list[float] = []
    try:
        if probes:
            if loads:
                time.sleep(WARMUP_S)
            got = _read(client(bed, spawn.python_module(
                "backburner.net.client", "probe", SERVER_ADDR, str(PORT), str(probes),
                f"{PROBE_GAP_S:g}")))
            fetch, connect = list(got["fetch_s"]), list(got["connect_s"])  # type: ignore
            for c in loads:
                c.signal(signal.SIGTERM)
        bulk = [_read(c) for c in loads]
    finally:
        for c in loads:
            if c.poll() is None:
                c.stop()
    rate = sum(float(b["bytes"]) * 8 / float(b["seconds"]) for b in bulk)  # type: ignore
    return Figures(downloads, fetch, connect, rate, uploads)
