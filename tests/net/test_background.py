"""net.background through `backburner run --net background`, on the testbed's client
interface (an interface in a namespace, never the host's own NICs): the job's packets go
through the paced class, its exit status is mirrored, and the interface and the cgroup tree
are as before after it ends, after SIGTERM, and (with `restore`) after a SIGKILL. Bad
input is one line and `run`'s own status before anything changes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from helpers import BB, TIMEOUT, bb

from backburner import system
from backburner.base.errors import ExistsError
from backburner.net import background, testbed

from .conftest import bed_state

pytestmark = [pytest.mark.root, pytest.mark.timeout(60)]


def _args(bed: testbed.Testbed) -> list[str]:
    return ["run", "--net", "background", "--netns", bed.client_ns, "--net-dev",
            bed.client_dev, "--"]


def test_job_traffic_is_paced_status_mirrored_and_nothing_left(
        bed: testbed.Testbed) -> None:
    before = bed_state(bed)
    job = (f"{sys.executable} -m backburner.net.client download {testbed.SERVER_ADDR} "
           f"{testbed.PORT} 3 && tc -s class show dev {bed.client_dev}; exit 7")
    r = bb(*_args(bed), "sh", "-c", job)
    assert r.returncode == 7, r.err
    # seen by the job itself, while it ran: its ACKs went through the paced class
    lines = r.out.splitlines()
    at = next(i for i, x in enumerate(lines) if x.startswith("class htb 1:10 "))
    sent = lines[at + 1].split()
    assert sent[0] == "Sent" and int(sent[3]) > 20, lines[at:at + 2]
    assert bed_state(bed) == before


def test_sigterm_leaves_the_interface_as_before(bed: testbed.Testbed) -> None:
    before = bed_state(bed)
    proc = subprocess.Popen([*BB, *_args(bed), sys.executable, "-m", "backburner.net.client",
                             "download", testbed.SERVER_ADDR, str(testbed.PORT), "30"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 10
    while len(system.tc_classes(bed.client_ns, bed.client_dev)) < 3:
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.1)
    time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=TIMEOUT)
    # the SIGTERM reached the job, which reports its figures and ends well: mirrored
    assert proc.returncode == 0 and b'"bytes"' in out
    assert bed_state(bed) == before


def test_sigkill_then_restore_puts_the_interface_back(bed: testbed.Testbed) -> None:
    before = bed_state(bed)
    proc = subprocess.Popen([*BB, *_args(bed), "sleep", "30"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 10
    while len(system.tc_classes(bed.client_ns, bed.client_dev)) < 3:
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.1)
    time.sleep(0.3)  # the job is placed in its group
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=TIMEOUT)
    assert bed_state(bed) != before
    r = bb("restore")
    assert r.returncode == 0, r.err
    assert bed_state(bed) == before


def test_uploads_go_to_their_class_on_a_shaped_uplink(bed: testbed.Testbed) -> None:
    before = bed_state(bed)
    job = (f"{sys.executable} -m backburner.net.client upload {testbed.SERVER_ADDR} "
           f"{testbed.PORT} 2 && tc -s class show dev {bed.client_dev}")
    r = bb(*_args(bed)[:-1], "--net-uplink", "1mbit", "--", "sh", "-c", job)
    assert r.returncode == 0, r.err
    lines = r.out.splitlines()
    at = next(i for i, x in enumerate(lines) if x.startswith("class htb 1:30 "))
    sent = lines[at + 1].split()
    assert sent[0] == "Sent" and int(sent[1]) / int(sent[3]) > 1000, lines[at:at + 2]
    assert bed_state(bed) == before


@pytest.mark.parametrize("extra, words", [
    (["--net-dev", "nosuch0"], "no such interface: nosuch0"),
    (["--netns", "bbnosuchns"], "no network namespace"),
    (["--net-uplink", "fast"], "unknown link rate 'fast' (--net-uplink)"),
    (["--net-dev", "a/b"], "is not an interface name"),
    (["--net-dev", "x" * 16], "is not an interface name"),
    (["--netns", "../../etc"], "is not a network namespace's name"),
])
def test_bad_input_is_one_line_before_any_change(bed: testbed.Testbed, extra: list[str],
                                                 words: str) -> None:
    before = bed_state(bed)
    r = bb("run", "--net", "background", *extra, "--", "true")
    assert r.returncode == 125
    assert len(r.err.strip().splitlines()) == 1 and words in r.err, r.err
    assert bed_state(bed) == before


@pytest.mark.parametrize("option", ["--net-dev", "--netns", "--net-uplink"])
def test_an_empty_value_is_refused_not_taken_as_the_default(
        bed: testbed.Testbed, option: str) -> None:
    """`--net-dev "$UNSET"` shaped the interface of the default route: an empty value is
    refused in one line before anything changes (the other options name the testbed, so
    the old behaviour could not reach a host interface)."""
    before = bed_state(bed)
    given = {"--netns": bed.client_ns, "--net-dev": bed.client_dev, option: ""}
    r = bb("run", "--net", "background", *(x for kv in given.items() for x in kv),
           "--", "true")
    assert r.returncode == 125
    assert len(r.err.strip().splitlines()) == 1 and f"{option} is empty" in r.err, r.err
    assert bed_state(bed) == before
    r = bb("run", option, "", "--", "true")  # without --net, not silently ignored
    assert r.returncode == 125 and "go with --net background" in r.err, r.err


@pytest.mark.parametrize("rate, words", [
    ("1mbit\n", "unknown link rate"),
    ("8400bit", "is below 20kbit"),  # everything else's class would get -400bit
    ("8000bit", "is below 20kbit"),
    ("99999999999999999999gbit", "is above 10gbit"),  # tc wraps it round
])
def test_an_uplink_tc_cannot_shape_is_refused_before_any_change(
        bed: testbed.Testbed, rate: str, words: str) -> None:
    before = bed_state(bed)
    r = bb(*_args(bed)[:-1], "--net-uplink", rate, "--", "true")
    assert r.returncode == 125
    assert len(r.err.strip().splitlines()) == 1 and words in r.err, r.err
    assert bed_state(bed) == before


def test_net_options_without_net_are_refused(bed: testbed.Testbed) -> None:
    r = bb("run", "--net-uplink", "1mbit", "--", "true")
    assert r.returncode == 125 and "go with --net background" in r.err, r.err


def test_a_root_qdisc_of_someone_else_is_not_replaced(bed: testbed.Testbed) -> None:
    with system.Transaction("net-test-other") as tx:
        tx.apply(system.Qdisc(bed.client_ns, bed.client_dev, "root", "5", "pfifo", []))
        before = bed_state(bed)
        r = bb(*_args(bed), "true")
        assert r.returncode == 125 and "already has a root qdisc" in r.err, r.err
        assert bed_state(bed) == before


def _shaped(bed: testbed.Testbed) -> bool:
    return len(system.tc_classes(bed.client_ns, bed.client_dev)) >= 3


def test_a_run_that_raced_past_the_check_is_refused_and_the_first_stays_shaped(
        bed: testbed.Testbed) -> None:
    """The race of two runs on one device, made certain: the second passed `check`
    before the first put its qdisc on, and finds it there when it adds its own. It is
    refused (73, one line) and its rollback leaves the first run's shaping whole."""
    before = bed_state(bed)
    first = subprocess.Popen([*BB, *_args(bed), "sleep", "30"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
    # shaped within a few seconds alone; given TIMEOUT beside the suite's start (the
    # guest's boot, three workers' first tests), and the run's own output if it fails
    deadline = time.monotonic() + TIMEOUT
    while not _shaped(bed):
        if first.poll() is not None or time.monotonic() > deadline:
            first.kill()
            raise AssertionError(f"the first run never shaped: {first.communicate()}")
        time.sleep(0.1)
    time.sleep(0.3)
    shaped = bed_state(bed)
    second = background.Target(bed.client_dev, bed.client_ns,
                               attribution=background.attribution())
    try:
        with pytest.raises(ExistsError) as refused, system.Transaction("run") as tx:
            background.apply(tx, second, "race")
        assert "already has a root qdisc (htb 1:)" in str(refused.value)
        assert refused.value.exit_status == 73 and "\n" not in str(refused.value)
        assert bed_state(bed) == shaped and first.poll() is None
    finally:
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=TIMEOUT)
    assert bed_state(bed) == before


def test_two_runs_at_once_on_one_device_one_shaped_one_refused(
        bed: testbed.Testbed) -> None:
    """Two `run --net background` started together, three times: one runs shaped to its
    end (its job sees the HTB still there as it ends: status 0), the other is refused in
    one line with run's own status; never a job whose shaping the other's rollback took."""
    before = bed_state(bed)
    job = f"sleep 3; tc qdisc show dev {bed.client_dev} | grep -q 'htb 1:'"
    for _ in range(3):
        runs = [subprocess.Popen([*BB, *_args(bed), "sh", "-c", job], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE) for _ in range(2)]
        ends = [(r.wait(TIMEOUT), r.communicate()[1].decode()) for r in runs]
        assert sorted(status for status, _ in ends) == [0, 125], ends
        refusal = next(err for status, err in ends if status == 125)
        assert len(refusal.strip().splitlines()) == 1, refusal
        assert "already has a root qdisc" in refusal, refusal
        assert bed_state(bed) == before


def test_the_path_going_mid_job_is_said_once_and_the_status_is_the_jobs(
        bed: testbed.Testbed) -> None:
    """The job's own address removed and put back while it downloads (the pacer's echo
    cannot be sent meanwhile): one line on stderr says so, no traceback, and `run` exits
    with the job's status."""
    before = bed_state(bed)
    addr = f"{testbed.CLIENT_ADDR}/24 dev {bed.client_dev}"
    job = (f"{sys.executable} -m backburner.net.client download {testbed.SERVER_ADDR} "
           f"{testbed.PORT} 8 >/dev/null & sleep 3; ip addr del {addr}; sleep 2; "
           f"ip addr add {addr}; wait $!; exit 3")
    r = bb(*_args(bed), "sh", "-c", job)
    assert r.returncode == 3, r.err
    [line] = r.err.strip().splitlines()
    assert "could not reach" in line and "Network is unreachable" in line, r.err
    assert bed_state(bed) == before
