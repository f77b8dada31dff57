"""net.testbed: three namespaces over a real slow link; a page is fetched through it; the
whole bed goes at the end of its transaction and, after a SIGKILL, with `restore`."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import TIMEOUT, bb

from backburner import system
from backburner.base.errors import UnavailableError
from backburner.net import link, measure, testbed

#: alone: the checks compare every network namespace of the machine (beds elsewhere, e.g.
#: bench's, make their own), so scripts/test runs them with no other host test beside
pytestmark = [pytest.mark.root, pytest.mark.alone, pytest.mark.timeout(60)]


def _netns() -> set[str]:
    return set(p.name for p in Path(system.net.NETNS_DIR).iterdir()) \
        if Path(system.net.NETNS_DIR).is_dir() else set()


def test_page_crosses_the_slow_link_and_the_bed_goes(state_dir: Path) -> None:
    before = _netns()
    spec = link.parse("1mbit:0ms:300ms")
    with system.Transaction("net-test") as tx:
        bed = testbed.build(tx, spec)
        testbed.start_server(bed)
        f = measure.scenario(bed, 0, 2)
        (tbf,) = system.qdiscs(bed.router_ns, f"{bed.router_ns}1")
        assert tbf["kind"] == "tbf" and tbf["options"]["rate"] == 125_000
    # 10 kB at 1 Mbit/s is 80 ms on the wire: the page really crossed the slow link
    assert all(0.06 < t < 1.0 for t in f.fetch_s), f.fetch_s
    assert _netns() == before


def test_delay_without_netem_is_refused_before_any_change(state_dir: Path) -> None:
    before = _netns()
    if testbed.qdisc_known("netem"):
        pytest.skip("this kernel has netem")  # the VM guest's kernel
    with pytest.raises(UnavailableError) as err:
        testbed.check(link.parse("1mbit:40ms"))
    assert err.value.exit_status == 69 and "netem" in str(err.value)
    assert _netns() == before


HOLD = """
import sys, time
from backburner import system
from backburner.net import link, testbed
with system.Transaction("net-hold") as tx:
    bed = testbed.build(tx, link.parse("1mbit:0ms:300ms"))
    testbed.start_server(bed)
    print(bed.server_ns, bed.router_ns, bed.client_ns, flush=True)
    time.sleep(60)
"""


def test_sigkill_then_restore_removes_the_bed(state_dir: Path) -> None:
    before = _netns()
    proc = subprocess.Popen([sys.executable, "-c", HOLD], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    names = proc.stdout.readline().split()
    assert len(names) == 3 and set(names) <= _netns()
    proc.send_signal(signal.SIGKILL)
    proc.wait(TIMEOUT)
    assert set(names) <= _netns()  # nothing but the journal undoes a SIGKILL
    r = bb("restore")
    assert r.returncode == 0, r.err
    assert "network namespace" in r.out
    assert _netns() == before
