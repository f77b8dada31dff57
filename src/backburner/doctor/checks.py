"""`doctor`'s verdicts: one line per capability, from `Facts` alone (pure).

Each `Check` says whether the capability is there (ok or missing), what it is for, and the
fix (the package to install, the module to load, the setting to change). The checks marked
`required` are what the main job, `bench --preset quick`, needs: the exit status is 0 only
when every one of them is ok.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from .. import __version__
from ..base.quantities import human_size
from ..policy import disks
from .facts import Facts

MAIN_JOB = "backburner bench --preset quick"
#: the quick preset compares these on its testbed, a loop device
QUICK_SCHEDULERS = ("mq-deadline", "bfq")
QUICK_TESTBED_BYTES = 4 << 30
#: the schedulers worth having on a disk, best for background work first
WANTED = ("bfq", "mq-deadline", "kyber")


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str  # what was found
    needed_for: str
    fix: str | None = None  # what to do when it is missing
    required: bool = False  # by the main job


@dataclass(frozen=True)
class Report:
    version: str
    kernel: str
    checks: tuple[Check, ...]
    disks: tuple[dict[str, Any], ...] = ()  # the per-disk facts of the "background on" lines

    @property
    def can_run(self) -> bool:
        return all(c.ok for c in self.checks if c.required)

    @property
    def blocking(self) -> list[str]:
        return [c.name for c in self.checks if c.required and not c.ok]


def _check(name: str, ok: bool, detail: str, needed_for: str, fix: str,
           required: bool = False) -> Check:
    return Check(name, ok, detail, needed_for, None if ok else fix, required)


def _tool(f: Facts, name: str, needed_for: str, fix: str, required: bool = False) -> Check:
    where = f.tools.get(name)
    return _check(name, where is not None, where or "not found on PATH", needed_for, fix,
                  required)


def root(f: Facts) -> Check:
    return _check("root", f.euid == 0, f"uid {f.euid}",
                  "bench, slowdisk, apply, readahead, run with weights",
                  "run it as root (sudo)", required=True)


def loop_devices(f: Facts) -> Check:
    return _check("loop devices", f.loop_control,
                  "/dev/loop-control" + ("" if f.loop_control else " is missing"),
                  "bench's testbed, slowdisk", "modprobe loop",
                  required=True)


def loop_schedulers(f: Facts) -> Check:
    offered = f.loop_schedulers or ()
    missing = [s for s in QUICK_SCHEDULERS if s not in offered]
    detail = " ".join(offered) if offered else "unknown: no blk-mq device to read"
    return _check("schedulers on loop devices", not missing, detail,
                  f"the quick preset: {' vs '.join(QUICK_SCHEDULERS)} on a testbed",
                  "modprobe " + " ".join(missing or QUICK_SCHEDULERS)
                  + " (kernel options CONFIG_MQ_IOSCHED_DEADLINE, CONFIG_IOSCHED_BFQ)",
                  required=True)


def disk_schedulers(f: Facts) -> list[Check]:
    if not f.disks:
        return [_check("schedulers on disks", False, "no disk with an IO scheduler here",
                       "apply --scheduler",
                       "none needed in a container or VM whose disks are not blk-mq")]
    checks = []
    for disk, offered in sorted(f.disks.items()):
        missing = [s for s in WANTED if s not in offered]
        detail = " ".join(offered) + (f" (no {', '.join(missing)})" if missing else "")
        checks.append(_check(f"schedulers on {disk}", "bfq" in offered, detail,
                             "apply --scheduler bfq",
                             "modprobe bfq (kernel option CONFIG_IOSCHED_BFQ)"))
    return checks


def disk_levers(f: Facts) -> list[Check]:
    """A line per mounted disk (root, /var, /home, the working directory's, every other):
    what the background policy's IO class and weight do there, and the fix where they do
    nothing."""
    out = []
    for r in f.disk_reports:
        fix = r.fix
        if r.cure and r.cure not in r.effect.disk.offered:
            fix = f"modprobe {r.cure}; then {fix}"
        out.append(Check(f"background on {r.name}", not r.ignored, disks.summary(r),
                         "run, govern and apply's IO class and weights",
                         (fix or "a kernel with what is missing") if r.ignored else None))
    return out


def cgroup_weights(f: Facts) -> Check:
    cg = f.cgroups
    parts = []
    if cg.v1:
        parts.append("v1 " + " ".join(c for c in cg.v1 if c in ("blkio", "cpu", "freezer",
                                                                "memory")))
    if cg.v2_root:
        parts.append(f"v2 {cg.v2_root}: " + (" ".join(cg.v2_available) or "no controllers")
                     + (f", enabled: {' '.join(cg.v2_enabled)}" if cg.v2_enabled else ""))
    return _check("cgroup weights", f.weights is None,
                  "; ".join(parts or ["no cgroup hierarchy"])
                  + (f" ({f.weights})" if f.weights else ""),
                  "the background policy, run --io-weight/--cpu-weight",
                  "mount the v1 blkio and cpu controllers, or make io and cpu available in "
                  "the cgroup2 root (a kernel with CONFIG_BLK_CGROUP and CONFIG_CGROUP_SCHED)",
                  required=True)


def cgroup_freezer(f: Facts) -> Check:
    cg = f.cgroups
    ok = "freezer" in cg.v1 or bool(cg.v2_root and cg.v2_available)
    detail = ("v1 freezer" if "freezer" in cg.v1 else
              "cgroup v2's cgroup.freeze" if ok else "no v1 freezer, no populated cgroup v2")
    return _check("cgroup freezer", ok, detail, "govern's pauses",
                  "mount the v1 freezer controller, or boot with cgroup v2")


def network_policy(f: Facts) -> Check:
    """How `run --net background` would know a job's packets here (`net.netcls`)."""
    if f.cgroups.v2_root:
        detail = "by cgroup v2: BPF programs on the job's group (ACKs, window, TCP-LP)"
    elif f.net_cls:
        detail = ("by cgroup v1 net_cls (no cgroup2 mount): the job's ACKs and uploads "
                  "only")
    else:
        detail = "no cgroup2 mount and no net_cls controller"
    return _check("network policy", bool(f.cgroups.v2_root or f.net_cls), detail,
                  "run --net background, govern's net key, bench --net-link",
                  "mount cgroup2 (mount -t cgroup2 none /sys/fs/cgroup/unified), or a "
                  "kernel with CONFIG_CGROUP_NET_CLASSID")


def systemd_check(f: Facts) -> Check:
    if not f.systemd_owns:
        return Check("systemd", True, "does not own the cgroup tree: groups are made directly",
                     "run's scopes where systemd owns the tree")
    ok = f.systemd_bus is None
    detail = "owns the cgroup tree; its D-Bus API " + (
        "answers" if ok else f"does not answer ({f.systemd_bus})")
    return _check("systemd", ok, detail, "run: the job's scope, weights on its slice",
                  "start the system bus (apt-get install dbus), or run as root (systemd's "
                  "private socket)")


def fuse(f: Facts) -> Check:
    parts = {"/dev/fuse": f.fuse, "fusermount3": f.tools.get("fusermount3") is not None,
             "mfusepy": f.modules.get("mfusepy", False)}
    fixes = {"/dev/fuse": "modprobe fuse", "fusermount3": "apt-get install fuse3",
             "mfusepy": "pip install 'backburner[slowdisk]'"}
    missing = [k for k, v in parts.items() if not v]
    return _check("FUSE", not missing, " ".join(k if v else f"no {k}"
                                                for k, v in parts.items()),
                  "slowdisk, the office-hdd preset",
                  "; ".join(fixes[k] for k in missing))


def fanotify(f: Facts) -> Check:
    return _check("fanotify", f.fanotify,
                  "/proc/sys/fs/fanotify" + ("" if f.fanotify else " is missing"),
                  "readahead record, flush-behind", "a kernel with CONFIG_FANOTIFY")


def perf(f: Facts) -> Check:
    """What `trace` uses by default when it can (`trace engines`): perf's syscall
    tracepoints; without them trace falls back to strace, slower."""
    use = "trace's default engine, bench --trace"
    if f.tools.get("perf") is None:
        return _check("perf", False, "not found on PATH: trace uses strace instead", use,
                      "apt-get install linux-perf (Ubuntu: linux-tools-$(uname -r))")
    ok = f.perf_trace is None
    why = str(f.perf_trace or "")
    fix = ("run it as root (perf trace needs the tracepoints; perf_event_paranoid)"
           if "root" in why or "paranoid" in why else "see perf's message above")
    return _check("perf", ok, "perf trace (syscall tracepoints): " + (
        "can run" if ok else f"{why}; trace uses strace instead"), use, fix)


def report_extras(f: Facts) -> Check:
    names = ("numpy", "scipy", "matplotlib", "rich")
    missing = [m for m in names if not f.modules.get(m, False)]
    return _check("report extras", not missing,
                  " ".join(m if f.modules.get(m) else f"no {m}" for m in names),
                  "bench's table, report, compare",
                  "pip install 'backburner[report]' (or apt-get install "
                  + " ".join(f"python3-{m}" for m in missing) + ")", required=True)


def free_space(f: Facts) -> Check:
    have = f.free_bytes
    ok = have is not None and have >= QUICK_TESTBED_BYTES
    detail = (f"{human_size(have)} free in {f.work_dir}" if have is not None
              else f"cannot tell for {f.work_dir}")
    return _check("space for a testbed", ok, detail,
                  f"the quick preset's {human_size(QUICK_TESTBED_BYTES)} testbed",
                  "free space there, or set BACKBURNER_STATE_DIR to a larger filesystem",
                  required=True)


def database(f: Facts) -> list[Check]:
    if f.db is None:
        return []
    ok = f.db_error is None
    where = "$BACKBURNER_DB" if f.db_from_env else "--db"
    return [_check("PostgreSQL", ok, f"{where}: " + ("opens" if ok else str(f.db_error)),
                   "the shared result store" + (" (bench writes there by default)"
                                                if f.db_from_env else ""),
                   "start the server or fix the address; psycopg: pip install "
                   "'backburner[postgres]'", required=f.db_from_env)]


def evaluate(f: Facts) -> Report:
    """Every check, the main job's first."""
    checks = [
        root(f), loop_devices(f), loop_schedulers(f), cgroup_weights(f),
        _tool(f, "fio", "bench's loads", "apt-get install fio", True),
        _tool(f, "strace", "bench: the files a probe opens", "apt-get install strace", True),
        _tool(f, "unshare", "bench, trace: PID namespaces", "apt-get install util-linux",
              True),
        _tool(f, "mkfs.ext4", "bench's testbed", "apt-get install e2fsprogs", True),
        report_extras(f), free_space(f), *database(f),
        *disk_schedulers(f), *disk_levers(f), systemd_check(f), cgroup_freezer(f),
        network_policy(f), fuse(f),
        fanotify(f),
        perf(f),
    ]
    return Report(__version__, f.kernel, tuple(checks),
                  tuple(r.as_dict() for r in f.disk_reports))


def render_text(report: Report) -> str:
    """One screen: the main job's needs, then the rest, then the verdict."""
    width = max(len(c.name) for c in report.checks)

    def line(c: Check) -> str:
        mark = "ok" if c.ok else "missing"
        text = f"  {mark:<8} {c.name:<{width}}  {c.detail}  (for {c.needed_for})"
        return text + (f"\n  {'':<8} {'':<{width}}  fix: {c.fix}" if c.fix else "")

    out = [f"backburner {report.version} on {report.kernel}", "",
           f"What the main job needs ({MAIN_JOB}):",
           *(line(c) for c in report.checks if c.required), "", "What the other commands need:",
           *(line(c) for c in report.checks if not c.required), ""]
    if report.can_run:
        out.append(f"The main job can run here: {MAIN_JOB}")
    else:
        out.append(f"The main job cannot run here: {', '.join(report.blocking)} missing.")
    return "\n".join(out) + "\n"


def render_json(report: Report) -> str:
    doc = {"format": "backburner-doctor", "version": 1, "backburner": report.version,
           "kernel": report.kernel,
           "main_job": {"command": MAIN_JOB, "can_run": report.can_run,
                        "missing": report.blocking},
           "checks": [asdict(c) for c in report.checks], "disks": list(report.disks)}
    return json.dumps(doc, indent=1) + "\n"
