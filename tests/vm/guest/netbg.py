"""Run in the guest by tests/vm/test_guest_net.py (as root, this commit's wheel installed):
the network testbed with a real delay (netem), four downloads with and without the
background policy (its default mechanism, and TCP-LP for the job's sockets), one upload
of the job's that reads back its congestion control, and what is on the machine before
and after. Prints one JSON object.

python3 netbg.py LINK [MODEM [MECHANISM]]    e.g. 1mbit:40ms; MODEM: tbf (the default: a
    deep FIFO queue), cake or fq_codel: the downstream queue a "smart modem" would have
    instead (the whole delay then moves to the upstream side, so the round trip stays the
    same); MECHANISM: the policy's (its default, or e.g. ingress). The comparison in
    docs/measurements/network.md; the guest checks run the default modem with both mechanisms.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from backburner import system
from backburner.kernel.bpf import calls as bpf
from backburner.kernel.cgroups import unified_root
from backburner.net import link, measure, policy, tcpopts, testbed

#: `run --net`'s job (guest/netsd.py, guest/netv1.py): a download for 4 s, then an upload
#: for 2 s into the server's sink; the download's bytes, what its socket had, and the job's
#: own cgroups; exit status 7.
RUN_JOB = r"""
import json, socket, sys, time
from backburner.net.tcpopts import socket_options
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=30)
s.sendall(b"GET /bulk HTTP/1.0\r\n\r\n")
got, end = 0, time.monotonic() + 4
while time.monotonic() < end:
    got += len(s.recv(65536))
u = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=30)
u.sendall(b"POST /upload HTTP/1.0\r\n\r\n")
end = time.monotonic() + 2
while time.monotonic() < end:
    u.send(b"\0" * 16384)
cgroups = open("/proc/self/cgroup").read().splitlines()
print(json.dumps({"bytes": got, **socket_options(s), "cgroups": cgroups}), flush=True)
sys.exit(7)
"""

#: One upload of the job's for 2 s; then its socket's congestion control and what the
#: server acknowledged; the socket closed cleanly (so nothing holds TCP-LP after).
UPLOAD = r"""
import json, socket, struct, sys, time
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=30)
s.sendall(b"POST /upload HTTP/1.0\r\n\r\n")
end = time.monotonic() + 2.0
while time.monotonic() < end:
    s.send(b"\0" * 16384)
cc = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).rstrip(b"\0").decode()
acked = struct.unpack_from("<Q", s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 256), 120)[0]
s.shutdown(socket.SHUT_WR)
while s.recv(65536):
    pass
s.close()
print(json.dumps({"cc": cc, "acked": acked}), flush=True)
"""


def snapshot() -> dict[str, object]:
    root = unified_root()
    return {
        "netns": sorted(os.listdir(system.net.NETNS_DIR))
        if os.path.isdir(system.net.NETNS_DIR) else [],
        "groups": sorted(p.name for p in Path(root or "/nonexistent").iterdir() if p.is_dir()),
        "bpf": bpf.ours(),  # (programs, maps) by name: systemd loads its own
        "tcp_lp": system.module_loaded("tcp_lp"),
    }


def drained(bed: testbed.Testbed) -> None:
    """Until the link's queues are empty: a stopped download's last packets must not meet
    the next scenario's connections (which may get the same ports)."""
    deadline = time.monotonic() + 30
    ports = [f"{bed.router_ns}{i}" for i in (0, 1)]
    while any(system.qdisc_backlog(bed.router_ns, p) for p in ports):
        assert time.monotonic() < deadline, "the link's queues did not empty in 30 s"
        time.sleep(0.1)


def figures(f: measure.Figures) -> dict[str, object]:
    return {"fetch_s": f.fetch_s, "bulk_bit_s": f.bulk_bit_s}


def smart_modem(bed: testbed.Testbed, modem: str) -> None:
    """The downstream port's queue made `modem`'s, inside the bed's router namespace
    (which goes with the bed): cake shaping at the link's rate itself, or fq_codel under
    the link's token bucket; the delay moved upstream whole."""
    r, rate = bed.router_ns, bed.link.rate_bit
    down, up = f"{r}1", f"{r}0"
    if modem == "cake":
        cmds = [["qdisc", "replace", "dev", down, "root", "cake", "bandwidth", f"{rate}bit"]]
    else:  # a qdisc of another kind cannot replace netem in its place: netem goes first
        cmds = [["qdisc", "del", "dev", down, "parent", "1:1", "handle", "2:"],
                ["qdisc", "add", "dev", down, "parent", "1:1", "handle", "3:", "fq_codel"]]
    for cmd in cmds:
        subprocess.run(["tc", "-n", r, *cmd], check=True)
    subprocess.run(["tc", "-n", r, "qdisc", "change", "dev", up, "parent", "1:1", "handle",
                    "2:", "netem", "delay", f"{bed.link.delay_ms:g}ms", "limit", "100000"],
                   check=True)


def main(spec_text: str, modem: str = "tbf",
         mechanism: str = policy.DEFAULT_MECHANISM) -> dict[str, object]:
    out: dict[str, object] = {"kernel": os.uname().release, "modem": modem,
                              "before": snapshot()}
    spec = link.parse(spec_text)
    testbed.check(spec)
    tcpopts.check(tcpopts.LOW_PRIORITY_CC)
    root = unified_root()
    assert root is not None
    with system.Transaction("guest-net") as tx:
        bed = testbed.build(tx, spec)
        testbed.start_server(bed)
        if modem != "tbf":
            smart_modem(bed, modem)
        group = os.path.join(root, "bb-guest-net")
        tx.apply(system.CgroupDir(group))
        procs = (os.path.join(group, "cgroup.procs"),)
        out["unloaded"] = figures(measure.scenario(bed, 0, 3))
        out["unprotected"] = figures(measure.scenario(bed, 4, 3, cgroup_procs=procs))
        drained(bed)
        with system.Transaction("guest-net-policy") as ptx:
            applied = policy.background(ptx, bed.client_ns, bed.client_dev, None, group,
                                        cc=tcpopts.LOW_PRIORITY_CC, mechanism=mechanism)
            try:
                # five fetches: the ingress check asks that the queue drained for one of
                # them, which a guest starved of CPU by a busy host did not do in three
                out["policy"] = figures(measure.scenario(bed, 4, 5, cgroup_procs=procs))
                out["tcp_lp_during"] = system.module_loaded("tcp_lp")
                drained(bed)
                job = testbed.client(bed, [sys.executable, "-c", UPLOAD, testbed.SERVER_ADDR,
                                           str(testbed.PORT)], procs)
                out["upload"] = json.loads(job.popen.stdout.read())  # type: ignore[union-attr]
                job.wait()
            finally:
                policy.stop(applied)
            out["mechanism"] = applied.mechanism
            out["ack_packets"] = policy.bulk_counters(applied)[1]
            assert applied.pacer is not None
            out["knobs"] = {k.name: len(k.history) for k in applied.pacer.knobs}
            # how many values each budget took: more than one, the pacer moved it
            out["knob_values"] = {k.name: len({v for _, v in k.history})
                                  for k in applied.pacer.knobs}
    deadline = time.monotonic() + 5  # the kernel frees a detached program a moment later
    while (after := snapshot()) != out["before"] and time.monotonic() < deadline:
        time.sleep(0.2)
    out["after"] = after
    return out


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:4])), flush=True)
