"""The testbed's client side, run in the client namespace (``python -m
backburner.net.client probe|download ...``), printing one JSON line of figures:

* ``probe HOST PORT COUNT GAP_S``: COUNT times, the round trip of a TCP handshake (the
  time `connect` takes) and the time to fetch the small page on a new connection, as a
  browser's first request would; GAP_S seconds apart.
* ``download HOST PORT SECONDS``: one bulk download for SECONDS (or until SIGTERM); the
  bytes it got and the time it ran, so its own speed over its whole run is known.
"""

from __future__ import annotations

import json
import signal
import socket
import sys
import time


def _get(host: str, port: int, path: str) -> tuple[float, float, int]:
    t0 = time.monotonic()
    sock = socket.create_connection((host, port), timeout=30)
    t1 = time.monotonic()
    sock.sendall(f"GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n".encode())
    got = 0
    while chunk := sock.recv(65536):
        got += len(chunk)
    sock.close()
    return t1 - t0, time.monotonic() - t0, got


def probe(host: str, port: int, count: int, gap_s: float) -> dict[str, list[float]]:
    connect, fetch = [], []
    for i in range(count):
        if i:
            time.sleep(gap_s)
        c, f, _ = _get(host, port, "/page")
        connect.append(c)
        fetch.append(f)
    return {"connect_s": connect, "fetch_s": fetch}


#: How long a download's receive may block before it looks whether it was told to stop.
STOP_POLL_S = 0.1


def download(host: str, port: int, seconds: float) -> dict[str, float]:
    """Until `seconds` pass or SIGTERM comes (the probe is done): either way the figures
    are printed, so a download stopped early still reports its speed. The signal only
    sets a flag, looked at between receives: a handler that raised could land between a
    receive and its count (or outside the loop) and lose the figures."""
    stopped: list[int] = []
    signal.signal(signal.SIGTERM, lambda sig, _frame: stopped.append(sig))
    t0 = time.monotonic()
    sock = socket.create_connection((host, port), timeout=30)
    sock.sendall(f"GET /bulk HTTP/1.0\r\nHost: {host}\r\n\r\n".encode())
    got = 0
    end = t0 + seconds
    while not stopped and time.monotonic() < end:
        sock.settimeout(max(0.01, min(STOP_POLL_S, end - time.monotonic())))
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            continue
        if not chunk:
            break
        got += len(chunk)
    elapsed = time.monotonic() - t0
    sock.close()
    return {"bytes": got, "seconds": elapsed}


def main(argv: list[str]) -> int:
    if argv[0] == "probe":
        out: dict[str, object] = dict(probe(argv[1], int(argv[2]), int(argv[3]),
                                            float(argv[4])))
    else:
        out = dict(download(argv[1], int(argv[2]), float(argv[3])))
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
