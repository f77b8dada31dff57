"""Run in the guest by tests/vm/test_guest_netsd.py (as root, this commit's wheel
installed, systemd 252 as PID 1): the network policy for a systemd unit, as a user sets
it up. On the testbed (`1mbit:40ms`, netem), the shipped backburner-net.service runs on
the client's interface (`--netns`, through a runtime drop-in); a unit in the client
namespace (NetworkNamespacePath=) downloads, with the drop-in `backburner apply --unit
UNIT --net background` writes. Read back from the kernel: the programs the service
pinned are the ones attached to the unit's group, the ACK class's counters move, the
window map is set and the unit's socket carries that clamp and TCP-LP; `apply --status`
says live. Then the unit and the service stop, `apply --remove`: no pins, the client's
qdiscs and classes as before, no journal, and the machine as before the bed. Prints one
JSON object.

python3 netsd.py UNIT_FILE    UNIT_FILE: the shipped backburner-net.service, its binary
    path made the guest's
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import netbg  # beside this script in the guest

from backburner import system
from backburner.kernel.bpf import calls as bpf
from backburner.kernel.bpf import cgroup_programs
from backburner.net import link, policy, testbed
from backburner.system.bpf import (
    PIN_DIR,
    PIN_EGRESS,
    PIN_SOCK_OPS,
    PIN_WINDOW,
    bpf_program_settings,
)

UNIT = "bbtest-netdl.service"
SERVICE = "backburner-net.service"
STATE = "/run/bbtest-netdl.json"
PINS = os.path.join(bpf.BPFFS, PIN_DIR)
JOURNAL = "/var/lib/backburner/journal"

#: The unit's job: one download of the server's endless file; every half second, what
#: its socket has (bytes so far, window clamp, congestion control) in STATE.
JOB = r"""
import json, os, socket, sys, time
from backburner.net.tcpopts import socket_options
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=30)
s.sendall(b"GET /bulk HTTP/1.0\r\n\r\n")
got, last = 0, 0.0
while True:
    got += len(s.recv(65536))
    if time.monotonic() - last > 0.5:
        last = time.monotonic()
        with open(sys.argv[3] + ".tmp", "w") as f:
            json.dump({"bytes": got, **socket_options(s)}, f)
        os.replace(sys.argv[3] + ".tmp", sys.argv[3])
"""


def sh(*cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, check=check, capture_output=True, text=True, timeout=120)


def snapshot() -> dict[str, object]:
    return {
        **netbg.snapshot(),  # namespaces, groups, our BPF programs and maps, tcp_lp
        "pins": os.path.exists(PINS),
        "journal": sorted(os.listdir(JOURNAL)) if os.path.isdir(JOURNAL) else [],
    }


def shaping(bed: testbed.Testbed) -> object:
    return (system.qdiscs(bed.client_ns, bed.client_dev),
            [c["handle"] for c in system.tc_classes(bed.client_ns, bed.client_dev)])


def ack_packets(bed: testbed.Testbed, classid: str = policy.BULK_CLASS) -> int:
    for c in system.tc_classes(bed.client_ns, bed.client_dev):
        if c["handle"] == classid:
            return int(c["packets"])
    return -1


def attached(group: str) -> list[int]:
    fd = os.open(group, os.O_RDONLY | os.O_DIRECTORY)
    try:
        return sorted(bpf.attached(fd, bpf.BPF_CGROUP_INET_EGRESS)
                      + bpf.attached(fd, bpf.BPF_CGROUP_SOCK_OPS))
    finally:
        os.close(fd)


def cpu_s(pid: str) -> float:
    """A process's user and system CPU time so far, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def transient() -> object:
    """What StartTransientUnit does with the property BPFProgram (systemd-run -p asks
    for it over D-Bus): the programs attached to the transient service's group."""
    r = sh("systemd-run", "--unit=bbtest-transient", "-p", "Type=exec",
           *(f"--property=BPFProgram={p}" for p in bpf_program_settings()),
           "sleep", "30", check=False)
    if r.returncode != 0:
        return [r.returncode, r.stderr]
    try:
        group = "/sys/fs/cgroup" + sh("systemctl", "show", "-P", "ControlGroup",
                                      "bbtest-transient").stdout.strip()
        return attached(group)
    finally:
        sh("systemctl", "stop", "bbtest-transient", check=False)


def service_down(bed: testbed.Testbed) -> object:
    """The unit started while its service cannot start (a bad interface): does the unit
    run, unpaced, or fail?"""
    sh("systemctl", "stop", UNIT, SERVICE, check=False)
    conf = Path(f"/run/systemd/system/{SERVICE}.d/bed.conf")
    good = conf.read_text()
    conf.write_text(good.replace(f"--dev={bed.client_dev}", "--dev=nosuchdev"))
    sh("systemctl", "daemon-reload")
    try:
        r = sh("systemctl", "start", UNIT, check=False)
        time.sleep(1)
        return {"start": r.returncode,
                "unit": sh("systemctl", "show", "-P", "ActiveState", UNIT).stdout.strip(),
                "service": sh("systemctl", "show", "-P", "ActiveState", SERVICE).stdout.strip(),
                "log": sh("journalctl", "-b", "-u", UNIT, "-n", "5", "--no-pager",
                          check=False).stdout[-600:]}
    finally:
        sh("systemctl", "stop", UNIT, SERVICE, check=False)
        sh("systemctl", "reset-failed", check=False)
        conf.write_text(good)
        sh("systemctl", "daemon-reload")


def run_net(bed: testbed.Testbed, bb: str) -> dict[str, object]:
    """`backburner run --net background --net-uplink` where systemd owns the tree: the
    job's scope gets the run's own pinned programs; what is attached to it, the paced and
    the upload class's counters, the job's socket, its status mirrored, nothing of the
    run's left after."""
    Path("/root/netsd-runjob.py").write_text(netbg.RUN_JOB)
    proc = subprocess.Popen([bb, "run", "--net", "background", "--net-dev", bed.client_dev,
                             "--netns", bed.client_ns, "--net-uplink", "1mbit", "--",
                             sys.executable,
                             "/root/netsd-runjob.py", testbed.SERVER_ADDR, str(testbed.PORT)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen: dict[str, object] = {"attached": [], "pinned": {}}
    first = None
    while proc.poll() is None:
        runs = [d for d in os.listdir(bpf.BPFFS) if d.startswith("backburner-run-")]
        scopes = list(Path("/sys/fs/cgroup/backburner.slice").glob("*.scope"))
        if runs and scopes:
            seen["pinned"] = system.pinned_ids(bpf.BPFFS, runs[0])
            seen["attached"] = attached(str(scopes[0]))
            packets = ack_packets(bed)
            first = packets if first is None else first
            seen["ack_packets"] = [first, packets]
            seen["upload_packets"] = ack_packets(bed, policy.UPLOAD_CLASS)
        time.sleep(0.5)
    out, err = proc.communicate()
    Path("/root/netsd-runjob.py").unlink()
    return {**seen, "status": proc.returncode, "job": out, "stderr": err,
            "left": [d for d in os.listdir(bpf.BPFFS) if d.startswith("backburner")]}


def main(unit_file: str) -> dict[str, object]:
    out: dict[str, object] = {"before": snapshot()}
    bb = shutil.which("backburner")
    assert bb is not None
    spec = link.parse("1mbit:40ms")
    testbed.check(spec)
    t0 = time.monotonic()
    with system.Transaction("guest-netsd") as tx:
        bed = testbed.build(tx, spec)
        testbed.start_server(bed)
        out["shaping_before"] = shaping(bed)
        shutil.copy(unit_file, f"/etc/systemd/system/{SERVICE}")
        os.makedirs(f"/run/systemd/system/{SERVICE}.d", exist_ok=True)
        Path(f"/run/systemd/system/{SERVICE}.d/bed.conf").write_text(
            f'[Service]\nEnvironment="BACKBURNER_NET_ARGS=--dev={bed.client_dev} '
            f'--netns={bed.client_ns}"\n')
        Path("/root/netsd-job.py").write_text(JOB)
        Path(f"/etc/systemd/system/{UNIT}").write_text(
            "[Service]\nType=exec\n"
            f"NetworkNamespacePath={bed.client_netns_path}\n"
            f"ExecStart={sys.executable} /root/netsd-job.py {testbed.SERVER_ADDR} "
            f"{testbed.PORT} {STATE}\n")
        try:
            r = sh(bb, "apply", "--unit", UNIT, "--net", "background", "--policy", "default",
                   check=False)
            out["apply"] = [r.returncode, r.stdout, r.stderr]
            sh("systemctl", "daemon-reload")
            r = sh("systemctl", "start", UNIT, check=False)  # pulls the service in first
            out["start"] = [r.returncode, r.stderr, round(time.monotonic() - t0, 1)]
            time.sleep(4)
            group = "/sys/fs/cgroup" + sh("systemctl", "show", "-P", "ControlGroup",
                                          UNIT).stdout.strip()
            pinned = system.pinned_ids(bpf.BPFFS)
            out["pinned"] = pinned
            out["attached"] = attached(group)
            out["service"] = sh("systemctl", "show", "-P", "ActiveState", SERVICE).stdout.strip()
            main_pid = sh("systemctl", "show", "-P", "MainPID", SERVICE).stdout.strip()
            first, cpu0, w0 = ack_packets(bed), cpu_s(main_pid), time.monotonic()
            time.sleep(6)
            out["ack_packets"] = [first, ack_packets(bed)]
            # the service's own CPU while it paces one unit (the tree walk, the echoes)
            out["service_cpu"] = round((cpu_s(main_pid) - cpu0) / (time.monotonic() - w0), 3)
            window = bpf.pinned(os.path.join(PINS, PIN_WINDOW))
            try:
                out["window"] = list(cgroup_programs.window(window))
            finally:
                os.close(window)
            out["job"] = json.loads(Path(STATE).read_text())
            r = sh(bb, "apply", "--status", check=False)
            out["status"] = [r.returncode, r.stdout]
            out["ids"] = [pinned.get(PIN_EGRESS), pinned.get(PIN_SOCK_OPS)]
            out["transient"] = transient()
            out["service_down"] = service_down(bed)
        finally:
            sh("systemctl", "stop", UNIT, SERVICE, check=False)
            out["service_after"] = sh("systemctl", "show", "-P", "ActiveState",
                                      SERVICE).stdout.strip()
            r = sh(bb, "apply", "--remove", check=False)
            out["remove"] = [r.returncode, r.stdout, r.stderr]
            for path in (f"/etc/systemd/system/{UNIT}", f"/etc/systemd/system/{SERVICE}",
                         STATE, "/root/netsd-job.py"):
                Path(path).unlink(missing_ok=True)
            shutil.rmtree(f"/run/systemd/system/{SERVICE}.d", ignore_errors=True)
            sh("systemctl", "daemon-reload")
            sh("systemctl", "reset-failed", check=False)
        out["shaping_after"] = shaping(bed)
        out["pins_after_stop"] = os.path.exists(PINS)
        out["run"] = run_net(bed, bb)
        out["shaping_after_run"] = shaping(bed)
    deadline = time.monotonic() + 5  # the kernel frees a detached program a moment later
    while (after := snapshot()) != out["before"] and time.monotonic() < deadline:
        time.sleep(0.2)
    out["after"] = after
    out["seconds"] = round(time.monotonic() - t0, 1)
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])), flush=True)
