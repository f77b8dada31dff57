"""`apply --status`: drift and liveness decided from a stand-in /sys/block, cgroup tree,
systemd and process priorities (the real ones are read in the guest:
tests/vm/test_guest_apply.py)."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest
from helpers import bb, one_line_error

from backburner.apply import install as apply
from backburner.apply import status as applied
from backburner.kernel import priorities
from backburner.policy import grammar

BACKGROUND = grammar.BUILTIN["background"]
IDLE = {"start": 1, "io": priorities.IOPrio("idle", 4).value, "policy": os.SCHED_IDLE, "nice": 0}
NORMAL = {"start": 1, "io": 0, "policy": os.SCHED_OTHER, "nice": 0}
DROPIN = "/etc/systemd/system/bulk.service.d/50-backburner.conf"


class FakeSystemd:
    def __init__(self, **units: applied.Unit) -> None:
        self.units = units

    def unit(self, name: str) -> applied.Unit:
        return self.units.get(name.replace(".", "_").replace("-", "_"),
                              applied.Unit("not-found"))


def _tree(tmp_path: Path, scheduler: str = "[bfq] mq-deadline none") -> dict[str, object]:
    """A root with the background policy's files for bulk.service and a rule for vd*, a
    /sys/block with vda and vdb, a cgroup tree with bulk.service in our slice."""
    root = tmp_path / "root"
    root.mkdir()
    files = apply.plan(apply.SchedulerRule("bfq", "vd*", None), ["bulk"], BACKGROUND)
    for f in files:
        (root / f.path).parent.mkdir(parents=True, exist_ok=True)
        (root / f.path).write_text(f.content)
    for disk in ("vda", "vdb", "sda"):
        (tmp_path / "block" / disk / "queue").mkdir(parents=True)
        (tmp_path / "block" / disk / "queue" / "scheduler").write_text(scheduler + "\n")
        (tmp_path / "block" / disk / "queue" / "rotational").write_text("1\n")
    (tmp_path / "block" / "sda" / "queue" / "scheduler").write_text("[none] bfq\n")  # no match
    group = tmp_path / "cg" / "backburner.slice" / "bulk.service"
    group.mkdir(parents=True)
    (group / "cgroup.procs").write_text("101\n102\n")
    for where in (group, group.parent):
        (where / "io.weight").write_text("default 10\n")
        (where / "cpu.weight").write_text("10\n")
    return {"root": str(root), "sys_block": str(tmp_path / "block"),
            "cgroup_root": str(tmp_path / "cg"), "read_thread": lambda pid: IDLE}


def _running() -> FakeSystemd:
    return FakeSystemd(
        bulk_service=applied.Unit("loaded", "active", (DROPIN,), "/usr/lib/bulk.service", False,
                                  "/backburner.slice/bulk.service"),
        backburner_slice=applied.Unit("loaded", "active", (), "/etc/systemd/system/backburner"
                                      ".slice", False, "/backburner.slice"))


def _status(tree: dict[str, object], view: applied.Systemd | None, **kw: object
            ) -> applied.Status:
    args = {**tree, **kw}
    return applied.status(view=view, **args)  # type: ignore[arg-type]


def _notes(st: applied.Status) -> str:
    return applied.render(st)


def test_nothing_installed(tmp_path: Path) -> None:
    st = applied.status(str(tmp_path), FakeSystemd())
    assert st.exit_status == applied.NOTHING == 3
    assert applied.render(st).startswith("nothing installed")


def test_a_slice_left_behind_without_its_file_is_named(tmp_path: Path) -> None:
    view = FakeSystemd(backburner_slice=applied.Unit("not-found", "active"))
    st = applied.status(str(tmp_path), view)
    assert st.exit_status == applied.NOTHING
    assert applied.render(st).endswith("note: backburner.slice is still active without its "
                                       "unit file: systemctl stop backburner.slice once no "
                                       "unit runs in it\n")
    view.units["backburner_slice"] = applied.Unit("loaded", "active")  # made by a Slice=
    assert applied.status(str(tmp_path), view).leftover is not None
    transient = applied.Unit("loaded", "active", (), "/run/systemd/transient/backburner.slice")
    for quiet in (applied.Unit("not-found"), transient):  # run's own
        view.units["backburner_slice"] = quiet
        assert applied.status(str(tmp_path), view).leftover is None
    assert applied.status(str(tmp_path), None).leftover is None


def test_installed_and_live(tmp_path: Path) -> None:
    st = _status(_tree(tmp_path), _running())
    assert [i.verdict for i in st.items] == ["live"] * 3, _notes(st)
    assert st.exit_status == applied.LIVE == 0
    text = _notes(st)
    assert "vda: bfq in force" in text and "vdb: bfq in force" in text and "sda" not in text
    assert "bulk.service: 2 processes at IO class idle and CPU idle" in text
    assert "backburner.slice: IOWeight=10, CPUWeight=10 in force" in text
    assert text.endswith("live: every file is as apply writes it, and in force\n")


def test_a_disk_without_the_scheduler_is_not_live(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    Path(str(tree["sys_block"]), "vdb/queue/scheduler").write_text("[mq-deadline] bfq none\n")
    st = _status(tree, _running())
    assert st.exit_status == applied.NOT_LIVE == 1
    assert "vdb: mq-deadline in force, not bfq (udevadm" in _notes(st)


@pytest.mark.parametrize("unit, why", [
    (applied.Unit("loaded", "active", (), "/x", False, "/backburner.slice/bulk.service"),
     "systemd has not loaded /etc/systemd/system/bulk.service.d/50-backburner.conf "
     "(systemctl daemon-reload)"),
    (applied.Unit("loaded", "active", (DROPIN,), "/x", True, "/backburner.slice/bulk.service"),
     "changed since systemd read it"),
    (applied.Unit("not-found"), "bulk.service: systemd has no such unit"),
    (applied.Unit("masked"), "bulk.service: systemd says it is masked"),
    (applied.Unit("loaded", "active", (DROPIN,), "/x", False, "/system.slice/bulk.service"),
     "bulk.service runs in /system.slice, not in backburner.slice (systemctl restart "
     "bulk.service)"),
])
def test_a_dropin_systemd_does_not_use_is_not_live(tmp_path: Path, unit: applied.Unit,
                                                   why: str) -> None:
    view = _running()
    view.units["bulk_service"] = unit
    if unit.cgroup.startswith("/system.slice"):
        Path(tmp_path, "cg/system.slice/bulk.service").mkdir(parents=True)
    st = _status(_tree(tmp_path), view)
    assert st.exit_status == applied.NOT_LIVE, _notes(st)
    assert why in _notes(st)


def test_processes_started_before_the_dropin_are_not_live(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    st = _status(tree, _running(), read_thread=lambda pid: NORMAL if pid == 102 else IDLE)
    assert st.exit_status == applied.NOT_LIVE
    assert ("bulk.service: 1 of 2 processes not at IO class idle and CPU idle, e.g. PID 102 "
            "(systemctl restart bulk.service)") in _notes(st)
    # a process that has gone meanwhile is not held against it
    assert _status(tree, _running(), read_thread=lambda pid: None
                   if pid == 102 else IDLE).exit_status == applied.LIVE


def test_weights_not_in_force_are_not_live(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    Path(str(tree["cgroup_root"]), "backburner.slice/io.weight").write_text("default 100\n")
    Path(str(tree["cgroup_root"]), "backburner.slice/bulk.service/cpu.weight").unlink()
    st = _status(tree, _running())
    assert st.exit_status == applied.NOT_LIVE
    assert "backburner.slice: io.weight 100, not 10" in _notes(st)
    assert "bulk.service: cpu.weight absent, not 10" in _notes(st)


def test_an_inactive_unit_is_live_once_loaded(tmp_path: Path) -> None:
    view = _running()
    view.units["bulk_service"] = applied.Unit("loaded", "inactive", (DROPIN,), "/x")
    view.units["backburner_slice"] = replace(view.units["backburner_slice"],
                                             active_state="inactive", cgroup="")
    st = _status(_tree(tmp_path), view)
    assert st.exit_status == applied.LIVE, _notes(st)
    assert "bulk.service is inactive: the drop-in takes effect when it starts" in _notes(st)


def test_without_systemd_nothing_is_loaded(tmp_path: Path) -> None:
    st = _status(_tree(tmp_path), None)
    assert st.exit_status == applied.NOT_LIVE
    assert "systemd is not PID 1 here: nothing loads it" in _notes(st)


def test_a_file_edited_by_hand_has_drifted(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    conf = Path(str(tree["root"]) + DROPIN)
    conf.write_text(conf.read_text() + "Nice=-5\n")
    st = _status(tree, _running())
    assert st.exit_status == applied.DRIFTED == 2  # before "not live"
    assert ("drifted   " + str(conf)) in _notes(st)
    assert "differs from what apply writes for it now" in _notes(st)
    conf.write_text(apply.MARKER + "\n[Service]\nNice=-5\n")
    assert "does not say what apply wrote it for" in _notes(_status(tree, _running()))


def test_another_root_is_checked_for_drift_only(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    st = _status(tree, None, live=False)
    assert st.exit_status == applied.LIVE and [i.live for i in st.items] == [None] * 3
    assert "liveness not checked" in _notes(st)


@pytest.mark.parametrize("snap, policy, ok", [
    (IDLE, BACKGROUND, True),  # systemd's idle class carries a level the kernel ignores
    (NORMAL, BACKGROUND, False),
    ({**IDLE, "io": priorities.IOPrio("be", 7).value}, BACKGROUND, False),
    ({**NORMAL, "io": priorities.IOPrio("be", 7).value, "nice": 19}, grammar.BUILTIN["gentle"],
     True),
    ({**NORMAL, "io": priorities.IOPrio("be", 4).value, "nice": 19}, grammar.BUILTIN["gentle"],
     False),
    ({**NORMAL, "io": priorities.IOPrio("be", 7).value, "nice": 0}, grammar.BUILTIN["gentle"],
     False),
])
def test_at_policy(snap: dict[str, int], policy: grammar.Policy, ok: bool) -> None:
    assert applied.at_policy(snap, policy) is ok


def test_the_cli_exit_statuses(tmp_path: Path, state_dir: Path) -> None:
    root = tmp_path / "image"
    (root / "usr/lib/systemd/system").mkdir(parents=True)
    (root / "usr/lib/systemd/system/bulk.service").write_text("[Service]\nExecStart=/bin/true\n")
    r = bb("apply", "--status", "--root", str(root))
    assert r.returncode == 3 and r.out.startswith("nothing installed"), r.err
    assert bb("apply", "--root", str(root), "--unit", "bulk").returncode == 0
    r = bb("apply", "--status", "--root", str(root))
    assert r.returncode == 0, r.out + r.err
    assert r.out.count("installed ") == 2 and "liveness not checked" in r.out
    conf = root / "etc/systemd/system/bulk.service.d" / apply.DROPIN
    conf.write_text(conf.read_text().replace("IOWeight=10", "IOWeight=100"))
    r = bb("apply", "--status", "--root", str(root))
    assert r.returncode == 2 and "drifted" in r.out, r.out
    for bad in (["--unit", "bulk"], ["--remove"], ["--dry-run"]):
        r = bb("apply", "--status", "--root", str(root), *bad)
        assert r.returncode == 64 and "--status reads what apply installed" in one_line_error(r)
    r = bb("apply", "--status", "--root", str(root), "--json")
    doc = json.loads(r.out)
    assert r.returncode == doc["exit_status"] == 2 and doc["format"] == "backburner-apply-status"
    assert {f["path"]: f["verdict"] for f in doc["files"]} == {
        str(conf): "drifted", str(root / "etc/systemd/system/backburner.slice"): "installed"}
    assert doc["checked_live"] is False and doc["leftover"] is None
    r = bb("apply", "--root", str(root), "--unit", "bulk", "--format", "json")
    assert r.returncode == 64 and "for the output of --status" in one_line_error(r)
    r = bb("apply", "--status", "--root", str(tmp_path / "nothing"))
    assert r.returncode == 66
    one_line_error(r)


def test_a_net_dropin_is_live_when_the_services_programs_are_attached() -> None:
    unit = applied.Unit("loaded", "active", (DROPIN,), "/usr/lib/bulk.service", False,
                        "/system.slice/bulk.service")
    service = applied.Unit("loaded", "active")
    pinned, on = {7, 8}, {7, 8, 3}  # 3: systemd's own (its IP accounting, say)

    def check(u: applied.Unit = unit, s: applied.Unit = service,
              attached: set[int] = on) -> tuple[bool, list[str]]:
        return applied.net_live("bulk.service", u, s, "/cg", lambda: pinned,
                                lambda group: attached if group == "/cg/system.slice/"
                                "bulk.service" else set())

    assert check() == (True, ["bulk.service: its traffic paced by backburner-net.service"])
    live, notes = check(attached={3})  # started before the service pinned these
    assert not live and "not attached to its group (systemctl restart bulk.service)" in notes[0]
    live, notes = check(s=applied.Unit("loaded", "inactive"))
    assert not live and "backburner-net.service is inactive" in notes[0]
    assert check(u=replace(unit, active_state="inactive"), s=applied.Unit("loaded")) == (True, [])


def test_a_net_dropin_is_what_apply_writes(tmp_path: Path) -> None:
    for f in apply.plan(None, ["bulk"], BACKGROUND, "background"):
        (tmp_path / f.path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f.path).write_text(f.content)
    st = applied.status(str(tmp_path), live=False)
    assert [i.verdict for i in st.items] == ["installed"] * 2, applied.render(st)
    conf = tmp_path / "etc/systemd/system/bulk.service.d" / apply.DROPIN
    conf.write_text(conf.read_text().replace("BPFProgram=sock_ops:", "#"))
    assert applied.status(str(tmp_path), live=False).exit_status == applied.DRIFTED
