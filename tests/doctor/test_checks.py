"""doctor's verdicts over made-up machines: what each check says, which ones the main job
needs, and the two renderings."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from backburner.doctor import checks
from backburner.doctor.facts import Cgroups, Facts
from backburner.kernel import block
from backburner.kernel.levers import Disk, Effect, GroupIO
from backburner.policy import disks
from backburner.policy.disks import DiskReport
from backburner.policy.grammar import BUILTIN

FULL = Facts(
    euid=0, kernel="Linux 6.18 (x86_64)", disks={"sda": ("none", "mq-deadline", "kyber", "bfq")},
    loop_schedulers=("none", "mq-deadline", "kyber", "bfq"), loop_control=True,
    cgroups=Cgroups(v1=("blkio", "cpu", "freezer")), weights=None, systemd_owns=False,
    systemd_bus=None, fuse=True, fanotify=True,
    tools={t: f"/usr/bin/{t}" for t in ("fio", "strace", "perf", "unshare", "mkfs.ext4",
                                        "fusermount3")},
    modules=dict.fromkeys(("numpy", "scipy", "matplotlib", "rich", "mfusepy", "psycopg",
                           "jeepney"), True),
    perf_trace=None, work_dir="/var/lib/backburner/work", free_bytes=50 << 30, net_cls=True)


def _by_name(report: checks.Report) -> dict[str, checks.Check]:
    return {c.name: c for c in report.checks}


def test_a_machine_with_everything() -> None:
    report = checks.evaluate(FULL)
    assert report.can_run and report.blocking == []
    assert all(c.ok and c.fix is None for c in report.checks)
    text = checks.render_text(report)
    assert text.endswith(f"The main job can run here: {checks.MAIN_JOB}\n")
    assert "missing" not in text


@pytest.mark.parametrize("change, name, fix", [
    ({"euid": 1000}, "root", "run it as root"),
    ({"loop_control": False}, "loop devices", "modprobe loop"),
    ({"loop_schedulers": ("none", "mq-deadline")}, "schedulers on loop devices",
     "modprobe bfq"),
    ({"weights": "an IO weight needs the cgroup blkio (v1) or io (v2) controller"},
     "cgroup weights", "mount the v1 blkio and cpu controllers"),
    ({"tools": {**FULL.tools, "fio": None}}, "fio", "apt-get install fio"),
    ({"tools": {**FULL.tools, "strace": None}}, "strace", "apt-get install strace"),
    ({"modules": {**FULL.modules, "scipy": False}}, "report extras",
     "pip install 'backburner[report]' (or apt-get install python3-scipy)"),
    ({"free_bytes": 1 << 30}, "space for a testbed", "BACKBURNER_STATE_DIR"),
])
def test_what_the_main_job_needs(change: dict, name: str, fix: str) -> None:
    report = checks.evaluate(replace(FULL, **change))
    assert not report.can_run and report.blocking == [name]
    check = _by_name(report)[name]
    assert check.required and not check.ok and fix in (check.fix or "")
    assert f"The main job cannot run here: {name} missing." in checks.render_text(report)


@pytest.mark.parametrize("change, name, fix", [
    ({"disks": {"sda": ("none", "mq-deadline")}}, "schedulers on sda", "modprobe bfq"),
    ({"perf_trace": "perf trace needs root here (tracepoints; perf_event_paranoid)"},
     "perf", "run it as root"),
    ({"tools": {**FULL.tools, "perf": None}}, "perf", "apt-get install linux-perf"),
    ({"fanotify": False}, "fanotify", "CONFIG_FANOTIFY"),
    ({"fuse": False, "modules": {**FULL.modules, "mfusepy": False}}, "FUSE",
     "modprobe fuse; pip install 'backburner[slowdisk]'"),
    ({"cgroups": Cgroups(v1=("blkio", "cpu"))}, "cgroup freezer", "freezer"),
    ({"net_cls": False}, "network policy", "mount -t cgroup2"),
    ({"systemd_owns": True, "systemd_bus": "systemd's D-Bus API is not reachable"}, "systemd",
     "apt-get install dbus"),
])
def test_what_other_commands_need_does_not_stop_the_main_job(change: dict, name: str,
                                                             fix: str) -> None:
    report = checks.evaluate(replace(FULL, **change))
    assert report.can_run
    check = _by_name(report)[name]
    assert not check.ok and not check.required and fix in (check.fix or "")


def test_systemd_owning_the_tree_and_answering() -> None:
    check = _by_name(checks.evaluate(replace(FULL, systemd_owns=True)))["systemd"]
    assert check.ok and check.detail == "owns the cgroup tree; its D-Bus API answers"


def test_cgroup_details_name_versions_and_controllers() -> None:
    hybrid = Cgroups(v1=("blkio", "cpu", "cpuset", "freezer"), v2_root="/sys/fs/cgroup/unified")
    v2 = Cgroups(v2_root="/sys/fs/cgroup", v2_available=("cpu", "io", "memory"),
                 v2_enabled=("cpu", "io"))
    assert hybrid.version.startswith("hybrid") and v2.version == "v2"
    detail = _by_name(checks.evaluate(replace(FULL, cgroups=hybrid)))["cgroup weights"].detail
    assert detail == "v1 blkio cpu freezer; v2 /sys/fs/cgroup/unified: no controllers"
    detail = _by_name(checks.evaluate(replace(FULL, cgroups=v2)))["cgroup weights"].detail
    assert detail == "v2 /sys/fs/cgroup: cpu io memory, enabled: cpu io"


def test_a_database_from_the_environment_is_needed_one_given_is_not() -> None:
    down = "database on db.lab is unreachable (connection refused)"
    from_env = checks.evaluate(replace(FULL, db="postgresql://db.lab/b", db_from_env=True,
                                       db_error=down))
    assert from_env.blocking == ["PostgreSQL"]
    assert _by_name(from_env)["PostgreSQL"].detail == f"$BACKBURNER_DB: {down}"
    given = checks.evaluate(replace(FULL, db="postgresql://db.lab/b", db_error=down))
    assert given.can_run and not _by_name(given)["PostgreSQL"].ok
    assert "PostgreSQL" not in _by_name(checks.evaluate(FULL))  # nothing configured


def test_no_disk_with_a_scheduler() -> None:
    check = _by_name(checks.evaluate(replace(FULL, disks={})))["schedulers on disks"]
    assert not check.ok and check.detail == "no disk with an IO scheduler here"


def test_every_missing_line_has_a_fix() -> None:
    nothing = replace(FULL, euid=1000, loop_control=False, loop_schedulers=None, disks={},
                      weights="no", systemd_owns=True, systemd_bus="no", fuse=False,
                      fanotify=False, tools=dict.fromkeys(FULL.tools), modules={},
                      perf_trace="x", free_bytes=None, cgroups=Cgroups(), db="postgresql://x",
                      db_error="no", net_cls=False)
    report = checks.evaluate(nothing)
    assert all(not c.ok and c.fix for c in report.checks)
    lines = checks.render_text(report).splitlines()
    assert sum(ln.lstrip().startswith("fix: ") for ln in lines) == len(report.checks)


def test_json_for_machines() -> None:
    report = checks.evaluate(replace(FULL, euid=1000))
    doc = json.loads(checks.render_json(report))
    assert doc["format"] == "backburner-doctor" and doc["version"] == 1
    assert doc["main_job"] == {"command": checks.MAIN_JOB, "can_run": False,
                               "missing": ["root"]}
    root = next(c for c in doc["checks"] if c["name"] == "root")
    assert root == {"name": "root", "ok": False, "detail": "uid 1000",
                    "needed_for": "bench, slowdisk, apply, readahead, run with weights",
                    "fix": "run it as root (sudo)", "required": True}


def test_the_network_policy_says_how_it_would_know_the_jobs_packets() -> None:
    v1 = _by_name(checks.evaluate(FULL))["network policy"]
    assert v1.ok and "net_cls" in v1.detail and "ACKs and uploads only" in v1.detail
    v2 = _by_name(checks.evaluate(replace(FULL, net_cls=False, cgroups=Cgroups(
        v1=("blkio", "cpu", "freezer"), v2_root="/sys/fs/cgroup/unified"))))["network policy"]
    assert v2.ok and "cgroup v2" in v2.detail


V1 = GroupIO("v1")


def _report(name: str, kind: str, scheduler: str, classes: bool, holds: tuple[str, ...],
            groups: GroupIO = V1) -> DiskReport:
    effect = Effect(Disk(name, "259:0", kind, scheduler, ("none", "mq-deadline", "kyber"),
                         classes), groups)
    ignored = effect.ignored(disks.asked([BUILTIN["background"]]))
    return DiskReport(effect, holds, holds, ignored, disks.cure_for(effect, ignored))


def test_a_line_per_disk_says_what_the_background_policy_does_there() -> None:
    nvme = _report("nvme0n1", block.NVME, "none", False, ("/", "/var"))
    sda = _report("sda", block.ROTATIONAL, "bfq", True, ("/home",))
    found = _by_name(checks.evaluate(replace(FULL, disk_reports=(nvme, sda))))
    line = found["background on nvme0n1"]
    assert not line.ok and line.required is False
    assert line.detail == ("NVMe, none, holds /, /var: the IO class and the IO weight do "
                           "nothing here")
    # bfq is not offered by this made-up disk: the fix loads it first
    assert line.fix == "modprobe bfq; then backburner apply --scheduler bfq --devices nvme"
    ok = found["background on sda"]
    assert ok.ok and ok.fix is None
    assert ok.detail == ("rotational, bfq, holds /home: the IO class and the IO weight act; "
                         "not its buffered writeback (charged to the job's group only on "
                         "cgroup v2 with io and memory)")
    doc = json.loads(checks.render_json(checks.evaluate(replace(FULL, disk_reports=(nvme,)))))
    assert doc["disks"][0]["name"] == "nvme0n1" and doc["disks"][0]["ignored"] == ["io",
                                                                                 "io-weight"]
    assert doc["disks"][0]["fix"] == "backburner apply --scheduler bfq --devices nvme"


def test_mq_deadline_with_priorities_keeps_the_class_and_loses_the_weight() -> None:
    r = _report("sda", block.NON_ROTATIONAL, "mq-deadline", True, ("/",),
                GroupIO("v2", writeback=True))
    line = _by_name(checks.evaluate(replace(FULL, disk_reports=(r,))))["background on sda"]
    assert line.detail == ("solid-state, mq-deadline, holds /: the IO weight does nothing here "
                           "(the IO class acts)")
    assert line.fix == "modprobe bfq; then backburner apply --scheduler bfq --devices " \
                       "non-rotational"
