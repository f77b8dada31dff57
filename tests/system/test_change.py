"""The undo core's rule, for every registered kind of change: what was there before a
change is never taken away by its undo, nor by the replay of a journal its run left when
it was killed during the apply.

Each case puts an object there first, as another party would (a transaction of its own,
"other"), and names our change on that object (or, where a kind cannot meet an object
of its own that was there before, on the nearest thing: another's object of the same
sort beside it; `BESIDE` says why per kind). Then:

1. our change is applied (it fails, is refused, or takes effect) and our transaction
   ends: the other's object is still there, as it was;
2. the journal a SIGKILL during our apply would leave (the intent and the old state, no
   outcome) is replayed as `restore` replays it: the object is still there.

The kinds a machine without systemd as PID 1 cannot show talk to a fake systemd that
holds the other party's units (the real path is tests/vm)."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from backburner import system
from backburner.base.errors import BackburnerError, NotFoundError, UsageError
from backburner.kernel import cgroups, priorities, procfs
from backburner.kernel.bpf import calls as bpf
from backburner.system import files as files_module
from backburner.systemd import bus as bus_module

pytestmark = [pytest.mark.root, pytest.mark.timeout(120)]

#: Kinds whose own object cannot be there before the change, and why; their case puts
#: another's object of the same sort beside it, which the undo must leave.
BESIDE = {
    "privdir": "a fresh random name in a directory only root writes: a name taken is "
               "skipped and journaled as not ours",
    "loop": "a new device each attach: another's device over the same file stays",
    "daemon": "a process we start: another's process of the same program stays",
    "started": "a process we started, known by PID and start time: a PID reused by "
               "another process is not ours",
    "cgroup-bpf-priority": "a program just loaded: another's program on the group stays",
    "cgroup-bpf-sock-priority": "a program just loaded: another's program on the group "
                                "stays",
    "cgroup-bpf-sock-ops": "a program just loaded: another's program on the group stays",
}
#: Kinds whose `read()` refuses an object there before: the change is never journaled.
REFUSED = {"mkfile", "mount", "cgroup-v1-mount", "fusemount", "tc-filter",
           "tc-bpf-classifier", "tc-bpf-classid", "bpf-pinned-programs", "mkfs"}


@dataclass
class Ctx:
    """What a case may use: the other party's transaction, a scratch directory, and a
    fake systemd (`units`: name -> properties) for the unit kinds."""

    other: system.Transaction
    tmp: Path
    monkeypatch: pytest.MonkeyPatch
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    units: dict[str, dict[str, Any]] = field(default_factory=dict)

    def sleeper(self) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(["sleep", "60"])
        self.procs.append(proc)
        return proc

    def netns(self) -> str:
        ns = f"bbk{secrets.token_hex(3)}"
        self.other.apply(system.NetNamespace(ns))
        return ns

    def bridge(self) -> tuple[str, str]:
        ns = self.netns()
        self.other.apply(system.Link(ns, "kbr0", "bridge"))
        return ns, "kbr0"

    def group(self, hierarchy: str = "") -> str:
        root = hierarchy or cgroups.unified_root()
        assert root is not None
        path = os.path.join(root, f"bbtest-{uuid.uuid4().hex[:8]}")
        self.other.apply(system.CgroupDir(path))
        return path

    def private(self) -> str:
        return str(self.other.apply(system.PrivateDir(str(system.work_root()), "kinds-")))

    def bus(self) -> None:
        units = self.units

        class FakeBus:
            def __enter__(self) -> FakeBus:
                return self

            def __exit__(self, *exc: object) -> None:
                pass

            def unit_path(self, name: str) -> str:
                if name not in units:
                    raise NotFoundError(f"no unit {name}")
                return name

            def loaded(self, name: str) -> bool:
                return name in units

            def get(self, path: str, _iface: str, prop: str) -> Any:
                return units[path].get(prop, 0)

            def unit_property(self, name: str, _iface: str, prop: str) -> Any:
                return self.get(self.unit_path(name), _iface, prop)

            def set_properties(self, name: str, props: list[Any]) -> None:
                units[self.unit_path(name)].update({k: v for k, (_t, v) in props})

            def start_scope(self, name: str, *_a: Any, **_k: Any) -> bool:
                if name in units:
                    raise UsageError(f"Unit {name} already exists.")
                units[name] = {"ActiveState": "active"}
                return False

            def stop(self, name: str) -> None:
                units.pop(name, None)

            def freeze(self, name: str, frozen: bool) -> None:
                units[self.unit_path(name)]["FreezerState"] = \
                    "frozen" if frozen else "running"

        self.monkeypatch.setattr(bus_module.Bus, "connect", classmethod(lambda c: FakeBus()))


Case = Callable[[Ctx], tuple[system.Change, Callable[[], object]]]
CASES: dict[str, Case] = {}


def case(kind: str) -> Callable[[Case], Case]:
    def register(fn: Case) -> Case:
        CASES[kind] = fn
        return fn
    return register


def _alive(proc: subprocess.Popen[bytes]) -> bool:
    return proc.poll() is None


# --- network ------------------------------------------------------------------------------


@case("netns")
def _netns(c: Ctx) -> Any:
    ns = c.netns()
    ident = system.net.netns_identity(ns)
    return system.NetNamespace(ns), lambda: system.net.netns_identity(ns) == ident


@case("link")
def _link(c: Ctx) -> Any:
    ns, dev = c.bridge()
    index = system.link_info(ns, dev)["ifindex"]
    return (system.Link(ns, dev, "bridge"),
            lambda: (system.link_info(ns, dev) or {}).get("ifindex") == index)


@case("link-up")
def _link_up(c: Ctx) -> Any:
    ns, dev = c.bridge()  # down, as the other left it
    return (system.LinkUp(ns, dev),
            lambda: "UP" not in (system.link_info(ns, dev) or {"flags": ["UP"]})["flags"])


@case("address")
def _address(c: Ctx) -> Any:
    ns, dev = c.bridge()
    c.other.apply(system.Address(ns, dev, "10.79.0.1/24"))
    change = system.Address(ns, dev, "10.79.0.1/24")
    return change, change._present


def _htb(c: Ctx) -> tuple[str, str]:
    ns, dev = c.bridge()
    c.other.apply(system.Qdisc(ns, dev, "root", "1", "htb", ["default", "20"]))
    return ns, dev


def _qdisc_there(ns: str, dev: str, handle: str, kind: str) -> Callable[[], bool]:
    return lambda: any(q.get("handle") == handle and q.get("kind") == kind
                       for q in system.qdiscs(ns, dev))


@case("qdisc")
def _qdisc(c: Ctx) -> Any:
    ns, dev = _htb(c)  # an HTB 1: already there: our add fails on it
    return (system.Qdisc(ns, dev, "root", "1", "htb", ["default", "20"]),
            _qdisc_there(ns, dev, "1:", "htb"))


@case("tc-class")
def _tc_class(c: Ctx) -> Any:
    ns, dev = _htb(c)
    c.other.apply(system.TcClass(ns, dev, "1:", "1:1", "htb", ["rate", "1mbit"]))
    return (system.TcClass(ns, dev, "1:", "1:1", "htb", ["rate", "10gbit"]),
            lambda: any(x["handle"] == "1:1" for x in system.tc_classes(ns, dev)))


_U32 = ["protocol", "ip", "u32", "match", "u32", "0", "0", "flowid", "1:20"]


def _filter_at_1(c: Ctx) -> tuple[str, str, Callable[[], bool]]:
    ns, dev = _htb(c)
    c.other.apply(system.TcFilter(ns, dev, "1:", 1, _U32))
    return ns, dev, lambda: len(system.tc_filters(ns, dev, "1:")) > 0


@case("tc-filter")
def _tc_filter(c: Ctx) -> Any:
    ns, dev, there = _filter_at_1(c)
    return system.TcFilter(ns, dev, "1:", 1, _U32), there


@case("tc-bpf-classifier")
def _tc_bpf_classifier(c: Ctx) -> Any:
    ns, dev, there = _filter_at_1(c)
    return system.BpfClassifier(ns, dev, "1:", 1, 0x10010, 0x10010), there


@case("tc-bpf-classid")
def _tc_bpf_classid(c: Ctx) -> Any:
    ns, dev, there = _filter_at_1(c)
    return system.ClassidClassifier(ns, dev, "1:", 1, 0x10001, 0x10010), there


# --- files, mounts, loop devices ----------------------------------------------------------


@case("mkdir")
def _mkdir(c: Ctx) -> Any:
    path = c.private()
    return system.MadeDir(path), lambda: os.path.isdir(path)


@case("mkfile")
def _mkfile(c: Ctx) -> Any:
    path = os.path.join(c.private(), "image")
    c.other.apply(system.MadeFile(path, 4096))
    return system.MadeFile(path, 4096), lambda: os.path.getsize(path) == 4096


@case("privdir")
def _privdir(c: Ctx) -> Any:
    parent = c.private()
    taken = os.path.join(parent, "kinds-planted")
    os.mkdir(taken, 0o700)
    names = iter(["planted", "fresh0"])
    c.monkeypatch.setattr(files_module.secrets, "token_hex", lambda _n: next(names))
    return system.PrivateDir(parent, "kinds-"), lambda: os.path.isdir(taken)


@case("configfile")
def _configfile(c: Ctx) -> Any:
    path = c.tmp / "x.conf"
    path.write_text("the admin's\n")
    return (system.InstalledFile(str(path), "ours\n"),
            lambda: path.read_text() == "the admin's\n")


def _mounted(c: Ctx) -> str:
    where = c.private()
    c.other.apply(system.Mount("tmpfs", where, "tmpfs", "size=1m"))
    return where


@case("mount")
def _mount(c: Ctx) -> Any:
    where = _mounted(c)
    return system.Mount("tmpfs", where, "tmpfs"), lambda: system.is_mountpoint(where)


@case("cgroup-v1-mount")
def _v1_mount(c: Ctx) -> Any:
    where = _mounted(c)
    return (system.V1Hierarchy("cgroup", where, options="net_cls"),
            lambda: system.is_mountpoint(where))


@case("fusemount")
def _fusemount(c: Ctx) -> Any:
    where = _mounted(c)
    return system.FuseMount(where), lambda: system.is_mountpoint(where)


def _image(c: Ctx) -> tuple[str, str]:
    path = os.path.join(c.private(), "disk.img")
    c.other.apply(system.MadeFile(path, 8 << 20))
    with open(path, "r+b") as f:
        f.write(b"the other's data")
    return path, str(c.other.apply(system.LoopDevice(path, direct_io=False)))


@case("loop")
def _loop(c: Ctx) -> Any:
    path, dev = _image(c)
    return system.LoopDevice(path, direct_io=False), lambda: system.is_loop_over(dev, path)


@case("mkfs")
def _mkfs(c: Ctx) -> Any:
    path, dev = _image(c)
    ours = c.tmp / "ours.img"
    ours.write_bytes(b"")

    def intact() -> bool:
        with open(path, "rb") as f:
            return f.read(16) == b"the other's data"

    return system.Filesystem(dev, str(ours)), intact


# --- cgroups, BPF programs ----------------------------------------------------------------


@case("cgroup")
def _cgroup(c: Ctx) -> Any:
    path = c.group()
    return system.CgroupDir(path), lambda: os.path.isdir(path)


@case("controllers")
def _controllers(c: Ctx) -> Any:
    path = c.group()
    control = os.path.join(path, "cgroup.subtree_control")
    before = Path(control).read_text()
    return (system.ControllersEnabled(control, ["pids"]),
            lambda: Path(control).read_text() == before)


@case("cgdevline")
def _cgdevline(c: Ctx) -> Any:
    path = c.tmp / "io.latency"
    path.write_text("7:0 target=100\n")
    return (system.DeviceLine(str(path), "7:0 target=5", "target=max"),
            lambda: path.read_text().strip() == "7:0 target=100")


@case("freezer")
def _freezer(c: Ctx) -> Any:
    path = c.group("/sys/fs/cgroup/freezer")
    return system.CgroupFreezer(path, 1), lambda: os.path.isdir(path)


@case("sysfs")
def _sysfs(c: Ctx) -> Any:
    path = c.group("/sys/fs/cgroup/cpu")
    c.other.apply(system.SysfsValue(os.path.join(path, "cpu.shares"), "512"))
    shares = os.path.join(path, "cpu.shares")
    return system.SysfsValue(shares, "100"), lambda: Path(shares).read_text().strip() == "512"


@case("cgmove")
def _cgmove(c: Ctx) -> Any:
    theirs, ours = c.group(), c.group()
    proc = c.sleeper()
    Path(theirs, "cgroup.procs").write_text(str(proc.pid))
    return (system.CgroupMove(proc.pid, ours),
            lambda: str(proc.pid) in Path(theirs, "cgroup.procs").read_text().split())


def _program(c: Ctx, change: system.Change, attach_type: int) -> Any:
    group = change.path  # type: ignore[attr-defined]
    theirs = c.other.apply(type(change)(group, *(
        [0x10030] if attach_type != bpf.BPF_CGROUP_SOCK_OPS else [])))

    def attached() -> bool:
        fd = os.open(group, os.O_RDONLY | os.O_DIRECTORY)
        try:
            return theirs["prog"] in bpf.attached(fd, attach_type)
        finally:
            os.close(fd)

    return change, attached


@case("cgroup-bpf-priority")
def _bpf_priority(c: Ctx) -> Any:
    return _program(c, system.CgroupPacketPriority(c.group(), 0x10010),
                    bpf.BPF_CGROUP_INET_EGRESS)


@case("cgroup-bpf-sock-priority")
def _bpf_sock_priority(c: Ctx) -> Any:
    return _program(c, system.CgroupSocketPriority(c.group(), 0x10010),
                    bpf.BPF_CGROUP_INET_SOCK_CREATE)


@case("cgroup-bpf-sock-ops")
def _bpf_sock_ops(c: Ctx) -> Any:
    return _program(c, system.CgroupSockOps(c.group()), bpf.BPF_CGROUP_SOCK_OPS)


@case("bpf-pinned-programs")
def _pins(c: Ctx) -> Any:
    root = c.private()
    c.other.apply(system.Mount("bpf", root, "bpf", "mode=0700"))
    c.other.apply(system.PinnedPrograms(root, 0x10010))
    theirs = system.pinned_ids(root)
    return system.PinnedPrograms(root, 0x10010), lambda: system.pinned_ids(root) == theirs


@case("kernel-module")
def _module(c: Ctx) -> Any:
    name = next(n for n in ("bridge", "loop", "fuse") if system.module_loaded(n))
    return system.KernelModule(name), lambda: system.module_loaded(name)


# --- processes ----------------------------------------------------------------------------


def _prio_kept(c: Ctx, make: Callable[[int, dict[str, int]], system.Change]) -> Any:
    proc = c.sleeper()
    before = priorities.snapshot_thread(proc.pid)
    assert before is not None
    return make(proc.pid, before), lambda: priorities.snapshot_thread(proc.pid) == before


@case("priorities")
def _priorities(c: Ctx) -> Any:
    return _prio_kept(c, lambda pid, _b: system.Priorities(pid, io="idle", cpu="idle"))


@case("priorities-first")
def _priorities_first(c: Ctx) -> Any:
    return _prio_kept(c, lambda pid, _b: system.PrioritiesFirst(pid, io="idle", cpu="idle"))


@case("inherited")
def _inherited(c: Ctx) -> Any:
    return _prio_kept(c, lambda pid, b: system.Inherited(
        pid, io="idle", old={k: b[k] for k in ("io", "policy", "nice")}))


@case("daemon")
def _daemon(c: Ctx) -> Any:
    theirs = c.sleeper()
    return system.Daemon(["sleep", "60"]), lambda: _alive(theirs)


@case("started")
def _started(c: Ctx) -> Any:
    theirs = c.sleeper()
    start = procfs.start_time(theirs.pid)
    assert start is not None
    return system.Started(theirs.pid, start + 1), lambda: _alive(theirs)


# --- systemd units (a fake systemd: the real one is tests/vm's) ----------------------------


@case("unitweights")
def _unitweights(c: Ctx) -> Any:
    c.bus()
    c.units["theirs.service"] = {"IOWeight": 100, "Transient": False}
    return (system.UnitWeights("theirs.service", {"IOWeight": 10}),
            lambda: c.units.get("theirs.service", {}).get("IOWeight") == 100)


@case("unitfrozen")
def _unitfrozen(c: Ctx) -> Any:
    c.bus()
    c.units["theirs.service"] = {"FreezerState": "frozen"}
    return (system.UnitFrozen("theirs.service"),
            lambda: c.units.get("theirs.service", {}).get("FreezerState") == "frozen")


def _their_scope(c: Ctx) -> tuple[str, str, subprocess.Popen[bytes], str]:
    """A scope of the other party's in a slice of its own: its group (made here, as
    systemd would), a process in it, and the unit."""
    c.bus()
    root = cgroups.unified_root()
    assert root is not None
    slice_name = f"bbtest{secrets.token_hex(3)}.slice"
    c.other.apply(system.CgroupDir(os.path.join(root, slice_name)))
    name = "theirs.scope"
    here = os.path.join(root, slice_name, name)
    c.other.apply(system.CgroupDir(here))
    proc = c.sleeper()
    Path(here, "cgroup.procs").write_text(str(proc.pid))
    c.units[name] = {"ActiveState": "active"}
    return name, slice_name, proc, here


def _scope_kept(name: str, proc: subprocess.Popen[bytes], here: str,
                c: Ctx) -> Callable[[], bool]:
    return lambda: name in c.units and str(proc.pid) in Path(
        here, "cgroup.procs").read_text().split()


@case("scope")
def _scope(c: Ctx) -> Any:
    name, slice_name, proc, here = _their_scope(c)
    ours = c.sleeper()
    return (system.TransientScope(name, slice_name, [ours.pid]),
            _scope_kept(name, proc, here, c))


@case("delegated")
def _delegated(c: Ctx) -> Any:
    name, slice_name, proc, here = _their_scope(c)
    ours = c.sleeper()
    return system.DelegatedScope(name, ours.pid, slice_name), _scope_kept(name, proc, here, c)


# --- the rule -----------------------------------------------------------------------------


def test_every_registered_kind_has_a_case() -> None:
    assert sorted(CASES) == sorted(system.Change.registry)
    assert set(BESIDE) | REFUSED <= set(CASES)
    makers = {k for k, cls in system.Change.registry.items() if cls.makes}
    assert set(BESIDE) <= makers  # a value kind has no object of its own to remove


def _killed_mid_apply(change: system.Change) -> list[str]:
    """Replay, as `restore` does, the journal a SIGKILL during `change`'s apply leaves:
    the begin, the intent with the old state, and no outcome. [] when `read()` refuses
    (nothing would have been journaled)."""
    try:
        old = change.read()
    except BackburnerError:
        return []
    jdir = system.trusted_dir(system.journal_dir(), "state directory")
    journal = system.Journal(jdir / f"killed-{uuid.uuid4().hex}.jsonl")
    journal.append({"event": "begin", "label": "killed", "pid": 1, "start": -1,
                    "time": time.time()})
    journal.append({"event": "intent", "seq": 1, "kind": change.kind,
                    "spec": json.loads(json.dumps(change.spec())), "old": old})
    return system.undo_journal(journal)


@pytest.fixture
def ctx(tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Ctx]:
    with system.Transaction("other") as other:
        c = Ctx(other, tmp_path, monkeypatch)
        try:
            yield c
        finally:
            for proc in c.procs:
                proc.kill()
                proc.wait()


@pytest.mark.parametrize("kind", sorted(CASES))
def test_an_object_there_before_is_never_removed(kind: str, ctx: Ctx) -> None:
    change, there = CASES[kind](ctx)
    assert change.kind == kind and there(), "the case did not set its object up"
    with contextlib.suppress(BackburnerError), system.Transaction("ours") as tx:
        tx.apply(change)
    assert there(), f"the undo of {change.describe()} took away what was there before"
    said = _killed_mid_apply(change)
    assert there(), f"the replay of {change.describe()} took it away: {said}"
    if kind in REFUSED:
        with pytest.raises(BackburnerError):
            change.read()


def test_a_failed_apply_undoes_only_what_it_recorded(state_dir: Path) -> None:
    """A group the apply made before a setting was refused is the change's own: the
    journal says it was made, then that the apply failed, and the undo removes it."""
    root = cgroups.unified_root()
    assert root is not None
    path = os.path.join(root, f"bbtest-{uuid.uuid4().hex[:8]}")
    with system.Transaction("ours") as tx:
        with pytest.raises(BackburnerError, match="no-such-file"):
            tx.apply(system.CgroupDir(path, {"no-such-file": "1"}))
        assert tx.journal is not None
        events = [json.loads(x)["event"] for x in tx.journal.path.read_text().splitlines()]
        assert events[1:] == ["intent", "applied", "failed"]
        assert os.path.isdir(path)
    assert not os.path.exists(path)


def test_selected() -> None:
    assert system.selected("none [mq-deadline] kyber bfq\n") == "mq-deadline"
    assert system.selected(" 1\n") == "1"
