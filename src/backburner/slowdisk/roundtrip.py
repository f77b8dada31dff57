"""The FUSE round trip of a slowdisk mount: the median time of a stats.json read through it,
measured by a process of its own (`python -m backburner.slowdisk.roundtrip PATH`).

Never by the daemon itself: a thread of a FUSE server reading its own mount is in an
uninterruptible wait for an answer only its own process can give. Killed (SIGKILL) while
such a read was in flight, the daemon could not exit (its zombie kept /dev/fuse open in
that thread), the mount hung, and every process that touched the loop device on it (even
`restore`'s LOOP_GET_STATUS) hung with it. A separate reader's request fails with ENOTCONN
when the daemon dies."""

from __future__ import annotations

import os
import sys
import time

#: never more than this is compensated, whatever was measured (a loaded machine's outlier)
MAX_ROUNDTRIP_COMPENSATION_S = 1e-3


def median_roundtrip(path: str, probes: int = 15, gap_s: float = 0.003) -> float | None:
    """Median time of a one-byte read of `path` (stats.json through the mount), capped at
    MAX_ROUNDTRIP_COMPENSATION_S; None if it cannot be read. The gap between probes lets
    the CPUs go idle, as they do between disk requests, so wake-up latency is included."""
    times = []
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        for _ in range(probes):
            time.sleep(gap_s)
            t0 = time.perf_counter()
            os.pread(fd, 1, 0)
            times.append(time.perf_counter() - t0)
    except OSError:
        return None
    finally:
        try:
            os.close(fd)
        except OSError:
            pass  # unmounted under us (shutting down): close reports ENOTCONN
    times.sort()
    return min(times[len(times) // 2], MAX_ROUNDTRIP_COMPENSATION_S)


def main(argv: list[str]) -> int:
    """Print the median in seconds; status 1 when the mount could not be read."""
    if len(argv) != 1:
        print("usage: python -m backburner.slowdisk.roundtrip STATS_PATH", file=sys.stderr)
        return 2
    rt = median_roundtrip(argv[0])
    if rt is None:
        return 1
    print(repr(rt))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
