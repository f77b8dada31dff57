"""The network policy where this machine cannot show it: a link with a real delay (netem,
`1mbit:40ms`) and TCP-LP, in the Debian guest (kernel 6.1). Four downloads of the job's
make a page fetch many times slower unprotected; with the background policy (its default
mechanism: paced ACKs and the window clamp) the fetch is far shorter and the downloads
still move; the job's upload socket runs TCP-LP, loaded for it and unloaded after; nothing
is left: namespaces, groups, BPF programs and maps as before. The same with the job's
data shaped on the way in instead (the `ingress` mechanism: an IFB, the tc classifier
that finds each segment's socket, on Debian's kernel).

Timings here are emulated (TCG): they prove function; docs/measurements/network.md measures on the
host."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from .rig import Guest

pytestmark = [pytest.mark.root, pytest.mark.timeout(900)]

SCRIPT = Path(__file__).parent / "guest" / "netbg.py"


def test_background_policy_over_a_delayed_link_and_tcp_lp(guest: Guest) -> None:
    guest.put("/root/netbg.py", SCRIPT.read_text())
    r = guest.run(["python3", "/root/netbg.py", "1mbit:40ms"], timeout=300, check=True)
    got = json.loads(r.out)
    unloaded = statistics.median(got["unloaded"]["fetch_s"])
    unprotected = statistics.median(got["unprotected"]["fetch_s"])
    protected = statistics.median(got["policy"]["fetch_s"])
    assert unprotected > 4 * unloaded, got  # the link's deep buffer, filled
    assert protected < unprotected / 3, got
    assert got["policy"]["bulk_bit_s"] > 100_000, got  # the downloads still move
    assert got["mechanism"] == "both" and got["ack_packets"] > 20, got
    # the pacer stepped, and moved both budgets (how many steps it takes in the policy's
    # phase depends on the emulated CPU it is given: 10 each with another guest beside)
    assert min(got["knobs"].values()) >= 5 and min(got["knob_values"].values()) > 1, got
    assert got["upload"]["cc"] == "lp" and got["upload"]["acked"] > 10_000, got
    assert got["tcp_lp_during"] and not got["before"]["tcp_lp"], got
    assert got["after"] == got["before"], got


def test_ingress_shaping_over_a_delayed_link(guest: Guest) -> None:
    guest.put("/root/netbg.py", SCRIPT.read_text())
    r = guest.run(["python3", "/root/netbg.py", "1mbit:40ms", "tbf", "ingress"], timeout=300,
                  check=True)
    got = json.loads(r.out)
    unprotected = statistics.median(got["unprotected"]["fetch_s"])
    # the queue drained at least once (its median can stay long: docs/measurements/network.md)
    assert min(got["policy"]["fetch_s"]) < unprotected / 3, got
    assert got["policy"]["bulk_bit_s"] > 100_000, got
    # the job's segments went through its class on the IFB, found by their sockets
    assert got["mechanism"] == "ingress" and got["ack_packets"] > 100, got
    assert list(got["knobs"]) == ["ingress-rate"] and got["knobs"]["ingress-rate"] >= 5, got
    assert got["knob_values"]["ingress-rate"] > 1, got
    assert got["after"] == got["before"], got
