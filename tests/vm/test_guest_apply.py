"""`apply` on a systemd machine: its udev rule selects the scheduler of a real virtio disk
after a trigger; its drop-in, once systemd has reloaded and the unit restarted, puts a test
updater's processes at the idle IO class and SCHED_IDLE, in backburner.slice with weight 10
— all read back from the kernel, not from systemd's view of the unit; `--remove` puts it all
back; `--status` says at each step what is installed and whether it is live; bad unit names
are refused before anything is written."""

from __future__ import annotations

import json

import pytest

from .rig import Guest

pytestmark = [pytest.mark.root, pytest.mark.timeout(900)]

UPDATER = "bb-updater.service"
UNIT_FILE = f"/etc/systemd/system/{UPDATER}"
DROPIN = f"/etc/systemd/system/{UPDATER}.d/50-backburner.conf"
SLICE_FILE = "/etc/systemd/system/backburner.slice"
RULE_FILE = "/etc/udev/rules.d/65-backburner-scheduler.rules"
# Two processes: a child left behind by the shell, and the shell exec'd into the main one.
UNIT = """[Unit]
Description=a test updater
[Service]
ExecStart=/bin/sh -c 'sleep 600 & exec sleep 601'
"""

# Every process of the updater as the kernel has it: its cgroup, IO priority (ioprio_get),
# CPU policy (sched_getscheduler), and the weights of its group and of the group's parent.
KERNEL_VIEW = r"""
import ctypes, json, os, subprocess
libc = ctypes.CDLL(None, use_errno=True)
pids = subprocess.run(["pgrep", "-f", "^sleep 60[01]$"], capture_output=True,
                      text=True).stdout.split()
def read(path):
    try:
        return open(path).read().strip().split("\n")[0]
    except OSError:
        return None
out = []
for pid in map(int, pids):
    group = open(f"/proc/{pid}/cgroup").read().strip().split("::", 1)[1]
    prio = libc.syscall(252, 1, pid)  # ioprio_get(IOPRIO_WHO_PROCESS, pid), x86-64
    g, s = "/sys/fs/cgroup" + group, "/sys/fs/cgroup" + os.path.dirname(group)
    out.append({"pid": pid, "group": group, "io_class": prio >> 13, "io_level": prio & 0x1fff,
                "policy": os.sched_getscheduler(pid),
                "group_weights": [read(f"{g}/io.weight"), read(f"{g}/cpu.weight")],
                "slice_weights": [read(f"{s}/io.weight"), read(f"{s}/cpu.weight"),
                                  read(f"{s}/io.bfq.weight")]})
print(json.dumps(out))
"""
IOPRIO_CLASS_IDLE, SCHED_IDLE, SCHED_OTHER = 3, 5, 0


def _kernel_view(guest: Guest) -> list[dict]:
    return json.loads(guest.run(["python3", "-c", KERNEL_VIEW], check=True).out)


def _status(guest: Guest) -> tuple[int, str]:
    r = guest.run(["backburner", "apply", "--status"], timeout=60)
    assert not r.err, r  # the verdict is on stdout and in the status, never an error
    return r.status, r.out


def _ours(guest: Guest) -> str:
    """Every file apply could have left, listed by the guest's shell."""
    return guest.run(f"ls -d /etc/udev/rules.d/*backburner* {SLICE_FILE} "
                     "/etc/systemd/system/*.d/50-backburner.conf 2>/dev/null; true").out


def _active(text: str) -> str:
    return text.partition("[")[2].partition("]")[0]


def test_the_udev_rule_selects_the_scheduler_of_the_scratch_disk(guest: Guest) -> None:
    dev = guest.run(["readlink", "-f", "/dev/disk/by-id/virtio-scratch"], check=True).out
    name = dev.strip().removeprefix("/dev/")
    sched = f"/sys/block/{name}/queue/scheduler"
    root_sched = "/sys/block/vda/queue/scheduler"
    before, root_disk = (_active(guest.get(path).decode()) for path in (sched, root_sched))
    want = "bfq" if before != "bfq" else "mq-deadline"  # bfq is a module: loaded on demand
    try:
        guest.run(["backburner", "apply", "--scheduler", want, "--devices", "all", "--kernel",
                   name], check=True, timeout=60)
        status, out = _status(guest)
        assert status == 1 and f"{name}: {before} in force, not {want}" in out, out
        guest.run(["udevadm", "control", "--reload"], check=True)
        guest.run(["udevadm", "trigger", "--action=change", "--settle", f"/sys/block/{name}"],
                  check=True)
        got = _active(guest.get(sched).decode())
        if got != want:  # what udev did with the rule, for the failure message
            test = guest.run(["udevadm", "test", f"/sys/block/{name}"], timeout=60)
            pytest.fail(f"{name}: {got} after the trigger, not {want}; udevadm test:\n"
                        f"{test.err}{test.out}")
        assert _active(guest.get(root_sched).decode()) == root_disk  # not matched
        status, out = _status(guest)
        assert status == 0 and f"{name}: {want} in force" in out, out

        guest.run(["backburner", "apply", "--remove"], check=True, timeout=60)
        assert _ours(guest) == ""
        guest.run(["udevadm", "control", "--reload"], check=True)
        test = guest.run(["udevadm", "test", "--action=change", f"/sys/block/{name}"],
                         timeout=60)
        assert "65-backburner" not in test.err + test.out, test
    finally:
        if _ours(guest):
            guest.run(["backburner", "apply", "--remove"], timeout=60)
        guest.run(["sh", "-c", f"echo {before} > {sched}"], check=True)
        guest.run(["udevadm", "control", "--reload"])


def test_the_dropin_puts_the_updater_on_the_back_burner_and_remove_undoes_it(
        guest: Guest) -> None:
    guest.put(UNIT_FILE, UNIT)
    try:
        guest.run(["systemctl", "daemon-reload"], check=True)
        guest.run(["systemctl", "start", UPDATER], check=True)  # running before apply
        r = guest.run(["backburner", "apply", "--unit", "bb-updater"], timeout=60, check=True)
        assert "systemctl daemon-reload" in r.err, r  # the hint: apply reloads nothing
        status, out = _status(guest)
        assert status == 1 and f"systemd has not loaded {DROPIN}" in out, out

        guest.run(["systemctl", "daemon-reload"], check=True)
        status, out = _status(guest)  # loaded, but its processes started before
        assert status == 1 and f"(systemctl restart {UPDATER})" in out, out

        guest.run(["systemctl", "restart", UPDATER], check=True, units=[UPDATER])
        procs = _kernel_view(guest)
        assert len(procs) == 2, procs
        for p in procs:
            assert p["group"] == f"/backburner.slice/{UPDATER}", p
            assert (p["io_class"], p["policy"]) == (IOPRIO_CLASS_IDLE, SCHED_IDLE), p
            assert p["group_weights"] == ["default 10", "10"], p
            assert p["slice_weights"][:2] == ["default 10", "10"], p
            assert p["slice_weights"][2] in (None, "default 10"), p  # BFQ's, where loaded
        status, out = _status(guest)
        assert status == 0, out
        assert f"{UPDATER}: 2 processes at IO class idle and CPU idle" in out, out
        assert "backburner.slice: IOWeight=10, CPUWeight=10 in force" in out, out


        r = guest.run(["backburner", "apply", "--remove"], check=True, timeout=60)
        assert r.out.count("removed ") == 2, r
        assert _ours(guest) == "" and guest.run(["test", "-e", f"{UNIT_FILE}.d"]).status == 1
        # the hint's order: stopped while the slice's file is still loaded, the slice stops
        # with its last unit (StopWhenUnneeded=yes); then the reload, then the start
        assert "systemctl stop UNIT; systemctl daemon-reload; systemctl start UNIT" in r.err
        guest.run(["systemctl", "stop", UPDATER], check=True, units=[UPDATER])
        guest.run(["systemctl", "daemon-reload"], check=True)
        guest.run(["systemctl", "start", UPDATER], check=True, units=[UPDATER])
        procs = _kernel_view(guest)
        assert len(procs) == 2, procs
        for p in procs:
            assert p["group"] == f"/system.slice/{UPDATER}", p
            assert p["io_class"] in (0, 2) and p["policy"] == SCHED_OTHER, p  # as booted
            assert p["group_weights"][0] in (None, "default 100"), p
            assert p["group_weights"][1] in (None, "100"), p
        gone = guest.run(["systemctl", "show", "-P", "ActiveState", "backburner.slice"]).out
        assert gone.strip() == "inactive"  # StopWhenUnneeded: no slice lingers
        assert _status(guest)[0] == 3
    finally:
        guest.run(["systemctl", "stop", UPDATER])
        if _ours(guest):
            guest.run(["backburner", "apply", "--remove"], timeout=60)
        guest.run(["rm", "-f", UNIT_FILE])
        guest.run(["systemctl", "daemon-reload"])
        guest.run(["systemctl", "stop", "backburner.slice"])


# the rest of the names: tests/apply/test_install.py
@pytest.mark.parametrize("args, status, says", [
    (["--scheduler", "bfq", "--unit", "bb-no-such-updater"], 66,
     "unit bb-no-such-updater.service does not exist"),  # systemd asked: not even the rule
    (["--unit", "bb-updater\nExecStart=/bin/sh"], 64, "is not a unit name"),
])
def test_bad_unit_names_are_one_line_and_write_nothing(guest: Guest, args: list[str],
                                                       status: int, says: str) -> None:
    r = guest.run(["backburner", "apply", *args], timeout=60)
    assert r.status == status, r
    assert len(r.err.strip().splitlines()) == 1 and says in r.err and r.out == "", r
    assert _ours(guest) == ""
    journals = guest.run("find /var/lib/backburner -name '*.jsonl' 2>/dev/null; true").out
    assert journals == "", journals  # no transaction was begun


def test_status_names_a_slice_left_behind_without_its_file(guest: Guest) -> None:
    """What a unit restarted after the reload that took the slice's file out leaves: the
    slice, active, empty of settings; systemd forgets StopWhenUnneeded= with the file."""
    guest.put(SLICE_FILE, "[Unit]\nStopWhenUnneeded=yes\n[Slice]\nIOWeight=10\n")
    try:
        guest.run(["systemctl", "daemon-reload"], check=True)
        guest.run(["systemd-run", "--unit", "bb-linger", "--slice", "backburner.slice",
                   "sleep", "300"], check=True)
        guest.run(["rm", SLICE_FILE], check=True)
        guest.run(["systemctl", "daemon-reload"], check=True)
        status, out = _status(guest)
        assert status == 3 and "note: backburner.slice is still active without its unit " \
            "file: systemctl stop backburner.slice" in out, out
    finally:
        guest.run(["systemctl", "stop", "bb-linger.service", "backburner.slice"])
        guest.run(["rm", "-f", SLICE_FILE])
        guest.run(["systemctl", "daemon-reload"])
