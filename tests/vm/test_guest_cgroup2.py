"""bench on cgroup v2 under systemd, and cgroup v2's own IO controls side by side with the
idle class: one small bench in the guest whose probe and load record where they run (their
groups, the groups' files, the scope's controllers, the probe group's io.latency, the
root's io.cost.qos) and how much of the load's buffered writes its group's io.stat counts
once written back. Read from the kernel, never from systemctl; nothing may be left after.

Figures here are emulated (TCG): they prove function, not speed."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .rig import SharedGuest

pytestmark = [pytest.mark.root, pytest.mark.timeout(900)]

SCRIPT = Path(__file__).parent / "guest" / "cgwhere.py"
WORK = "/var/tmp/bb-cg2"  # a directory on the guest's root disk: the device under test
MIB = 24  # each load's buffered writes
POLICIES = ["default", "background", "io=idle", "low-weight", "iocost"]
# Debian 12's kernel is built without CONFIG_BLK_CGROUP_IOPRIO and _IOLATENCY: no
# io.prio.class, no io.latency. Those policies are refused there, naming the file.
# OpenBLAS takes QEMU's emulated CPU (qemu64) for an Opteron and runs instructions TCG does
# not have (SIGILL in the plots of the HTML report); name a core it can run.
EMULATED_CPU = {"OPENBLAS_CORETYPE": "Prescott"}
REFUSED = {"group-idle": "io.prio.class", "latency-target": "io.latency"}


@pytest.fixture(scope="module")
def run(_shared_guest: SharedGuest) -> Iterator[dict[str, Any]]:
    """The bench, once for the module: its result, the records, and what is left after."""
    g = _shared_guest.get()
    g.put("/root/cgwhere.py", SCRIPT.read_text())
    part = g.run(["findmnt", "-nvo", "SOURCE", "--target", "/var/tmp"], check=True).out.strip()
    disk = g.run(["lsblk", "-ndo", "PKNAME", part], check=True).out.strip() or part[5:]
    devno = g.run(["cat", f"/sys/block/{disk}/dev"], check=True).out.strip()
    g.run(f"modprobe bfq; rm -rf {WORK} /root/probe.jsonl /root/load.jsonl /root/cg.db; "
          f"mkdir -p {WORK}", check=True)
    argv = ["backburner", "bench", "--device", WORK, "--scheduler", "bfq",
            "--probe", f"python3 /root/cgwhere.py probe /root/probe.jsonl {devno}",
            "--load", f"cmd:python3 /root/cgwhere.py load /root/load.jsonl {devno} {MIB}",
            "--trials", "1", "-w", "0", "--settle", "5", "--seed", "7", "-o", "/root/cg.db"]
    for pol in POLICIES:
        argv += ["--policy", pol]
    bench = g.run(argv, timeout=600, env=EMULATED_CPU)
    report = g.run(["backburner", "report", "/root/cg.db"], timeout=120, env=EMULATED_CPU)
    page = g.run(["head", "-c", "15", "/root/cg.html"]).out  # the one guest bench with a page
    left = {
        "units": g.run(["systemctl", "list-units", "--all", "--no-legend",
                        "backburner-bench*"]).out.strip(),
        "groups": g.run("find /sys/fs/cgroup -name 'backburner-bench*'").out.strip(),
        "qos": g.run(["cat", "/sys/fs/cgroup/io.cost.qos"]).out.strip(),
        "restore": g.run(["backburner", "restore"], timeout=60),
    }
    records = [json.loads(ln) for name in ("probe", "load")
               for ln in g.run(["cat", f"/root/{name}.jsonl"]).out.splitlines() if ln]
    yield {"guest": g, "bench": bench, "report": report, "left": left, "devno": devno,
           "records": records, "page": page}
    g.run(f"rm -rf {WORK} /root/probe.jsonl /root/load.jsonl /root/cg.db /root/cg.html")


BENCH = ["backburner", "bench", "--device", WORK, "--probe", "true", "--load", "cmd:sleep 60",
         "--trials", "1", "-w", "0"]


@pytest.mark.parametrize(("policy", "file"), sorted(REFUSED.items()))
def test_a_control_this_kernel_lacks_is_one_line_naming_the_file(
        run: dict[str, Any], policy: str, file: str) -> None:
    g = run["guest"]
    r = g.run([*BENCH, "--policy", "default", "--policy", policy, "-o", f"/root/{policy}.db"],
              timeout=300)
    g.run(["rm", "-f", f"/root/{policy}.db"])
    lines = r.err.strip().splitlines()
    assert r.status == 69, r
    assert re.search(rf"/backburner-bench-[\d-]+\.scope/probe/{re.escape(file)} is missing",
                     lines[-1]), r
    assert lines[-1].startswith("backburner: policy"), r
    units = g.run(["systemctl", "list-units", "--all", "--no-legend", "backburner-bench*"])
    assert units.out.strip() == "", units
    assert g.run("find /sys/fs/cgroup -name 'backburner-bench*'").out.strip() == ""


def _scoped(records: list[dict[str, Any]], role: str) -> list[dict[str, Any]]:
    """The records made inside bench's delegated scope (the probe's discovery run is not)."""
    return [r for r in records if r["role"] == role and "/backburner-bench-" in r["group"]]


def _load(records: list[dict[str, Any]], group_name: str) -> dict[str, Any]:
    (found,) = [r for r in _scoped(records, "load")
                if re.search(rf"/load-\d+-{re.escape(group_name)}$", r["group"])]
    return found


def _in_probe_group(records: list[dict[str, Any]], idle: bool) -> dict[str, Any]:
    (found,) = [r for r in _scoped(records, "load") if r["group"].endswith("/probe")
                and r["ionice"].startswith("idle") == idle]
    return found


def test_the_bench_completes_and_its_report_names_the_policies(run: dict[str, Any]) -> None:
    assert run["bench"].status == 0, run["bench"]
    assert run["report"].status == 0, run["report"]
    assert run["page"] == "<!DOCTYPE html>", run["page"]  # its plots drawn on an emulated CPU
    for pol in POLICIES:
        assert pol in run["report"].out, (pol, run["report"].out)


def test_probe_and_loads_run_in_a_delegated_scope_with_weights_and_controllers(
        run: dict[str, Any]) -> None:
    records = run["records"]
    probes = _scoped(records, "probe")
    assert len(probes) >= len(POLICIES), records  # every trial's probe, in the probe group
    (scope,) = {r["group"].rsplit("/", 1)[0] for r in probes}
    assert re.fullmatch(r"/system\.slice/backburner-bench-\d+-\d+\.scope", scope), scope
    assert all(r["group"] == scope + "/probe" for r in probes)
    background = _load(records, "background")
    assert background["group"].startswith(scope + "/load-")
    assert background["files"]["io.weight"] == "default 10", background
    assert background["files"]["io.bfq.weight"] == "default 10", background  # BFQ serves it
    assert background["files"]["cpu.weight"] == "10", background
    assert background["ionice"].startswith("idle"), background
    assert set(background["scope_controllers"].split()) >= {"io", "memory", "cpu"}
    low = _load(records, "low-weight")
    assert (low["files"]["io.weight"], low["files"]["cpu.weight"]) == ("default 10", "100")
    default = _in_probe_group(records, idle=False)  # no group of its own: bench's, the probe's
    assert default["files"]["io.weight"] == "default 100", default


def test_nothing_is_left_after_the_run(run: dict[str, Any]) -> None:
    left = run["left"]
    assert left["units"] == "", left
    assert left["groups"] == "", left
    qos = [ln for ln in left["qos"].splitlines() if ln.startswith(run["devno"] + " ")]
    assert all("enable=0" in ln for ln in qos), left  # io.cost off again (or never on)
    assert left["restore"].status == 0 and "undid" not in left["restore"].out.lower(), left


def test_io_cost_is_in_force_only_while_its_policy_runs(run: dict[str, Any]) -> None:
    records = run["records"]
    cost = _load(records, "iocost")
    assert cost["qos"] is not None and "enable=1" in cost["qos"], cost
    assert cost["files"]["io.weight"] == "default 10", cost
    for other in ("background", "low-weight"):
        got = _load(records, other)
        assert got["qos"] is None or "enable=0" in got["qos"], got


def test_writeback_is_charged_to_the_bulk_group_only_with_a_group_of_its_own(
        run: dict[str, Any]) -> None:
    """A load with a group of its own (low-weight): its group's io.stat counts the bytes
    its buffered writes put on the disk once written back. The idle class alone (io=idle,
    no group): the same bytes are charged to the group it shares with the probe, the one
    to protect, and are written at the flusher's class, not the load's."""
    records = run["records"]
    wrote = MIB << 20
    for name in ("low-weight", "background", "iocost"):
        grouped = _load(records, name)
        assert grouped["wrote"] == wrote
        assert grouped["charged"] >= 0.9 * wrote, grouped
    alone = _in_probe_group(records, idle=True)
    assert alone["charged"] >= 0.9 * wrote, alone  # paid by the protected group
    print(f"emulated: {wrote} B written; charged to the load's own group: "
          + ", ".join(f"{n} {_load(records, n)['charged']}" for n in ("low-weight", "iocost"))
          + f"; io=idle alone: to the probe's group {alone['charged']}")
