"""What a policy's levers do, on cgroup v2 (the guest): the levers model on a virtio disk
switched through each scheduler and with io.cost on; `run` and `apply` saying in one line
where a lever does nothing (the guest's root disk runs `none`); `apply`'s rule per class of
disk matching QEMU's emulated NVMe disk apart from the solid-state class; and `apply
--iocost` (with a unit in the background slice) charging a buffered writer's writeback to
its group and holding it back against a writer in system.slice, `io.stat` showing it, and
`--remove` putting every file and value back. Timing in the guest is emulated: these prove
function; docs/measurements/ssd.md measures speed on the host."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .rig import Guest

pytestmark = [pytest.mark.root, pytest.mark.timeout(900)]

SCRIPT = Path(__file__).parent / "guest" / "levers.py"
NVME = "/dev/disk/by-id/nvme-QEMU_NVMe_Ctrl_bbnvme"  # the shared guest's NVMe disk
SCRATCH = "/dev/disk/by-id/virtio-scratch"
MNT = "/mnt/bb-levers"
MODEL = ("rbps=20000000 rseqiops=2000 rrandiops=2000 wbps=20000000 wseqiops=2000 "
         "wrandiops=2000")  # slower than the emulated disk: io.cost has something to share
SAME_CPU = ["--cpu-weight", "100"]  # the writers' CPU shared evenly: only their IO differs


def _name(guest: Guest, link: str) -> str:
    return guest.run(["readlink", "-f", link], check=True).out.strip().removeprefix("/dev/")


def _active(guest: Guest, name: str) -> str:
    text = guest.get(f"/sys/block/{name}/queue/scheduler").decode()
    return text.partition("[")[2].partition("]")[0]


def _set(guest: Guest, name: str, sched: str) -> None:
    guest.run(["sh", "-c", f"echo {sched} > /sys/block/{name}/queue/scheduler"], check=True)


def _trigger(guest: Guest) -> None:
    guest.run(["udevadm", "control", "--reload"], check=True)
    guest.run(["udevadm", "trigger", "--action=change", "--subsystem-match=block", "--settle"],
              check=True, timeout=120)


def _ours(guest: Guest) -> str:
    return guest.run("ls -d /etc/udev/rules.d/*backburner* /etc/systemd/system/*.d/"
                     "50-backburner.conf /etc/systemd/system/backburner.slice 2>/dev/null; "
                     "true").out


def test_the_model_through_each_scheduler_and_with_io_cost(guest: Guest) -> None:
    scratch = _name(guest, SCRATCH)
    guest.put("/root/levers.py", SCRIPT.read_text())
    r = guest.run(["python3", "/root/levers.py", scratch], check=True, timeout=120)
    got = json.loads(r.out)
    g = got["groups"]
    # systemd's memory accounting is on at the root: with io, writeback is the group's
    assert g["hierarchy"] == "v2" and g["writeback"] and g["cost"], g
    lv = got["levers"]
    assert lv["bfq"] == [True, "io.bfq.weight", True], lv
    assert lv["none"] == [False, None, False] and lv["kyber"] == [False, None, False], lv
    assert lv["mq-deadline"][1:] == [None, False], lv  # the class: where it has priorities
    assert lv["none+iocost"] == [False, "io.weight", True], lv


def test_run_and_apply_say_in_one_line_that_none_ignores_the_policy(guest: Guest) -> None:
    assert _active(guest, "vda") == "none"  # the guest's root disk: virtio, multi-queue
    want = ("vda (/, /var, the working directory) runs none: the IO class and the IO weight "
            "do nothing there; backburner apply --scheduler bfq --devices rotational")
    r = guest.run(["backburner", "run", "-v", "--policy", "background", "--", "true"],
                  cwd="/", timeout=60)
    assert r.status == 0, r
    warned = [ln for ln in r.err.splitlines() if "warning" in ln]
    assert warned == [f"backburner: warning: {want}"], r
    r = guest.run(["backburner", "run", "-q", "--policy", "background", "--", "false"],
                  cwd="/", timeout=60)
    assert r.status == 1 and "warning" not in r.err, r
    guest.put("/etc/systemd/system/bb-lever.service", "[Service]\nExecStart=/bin/true\n")
    try:
        guest.run(["systemctl", "daemon-reload"], check=True)
        r = guest.run(["backburner", "apply", "--unit", "bb-lever"], timeout=60, check=True)
        assert "backburner: warning: vda (/, /var) runs none: the IO class and the IO " \
               "weight do nothing there" in r.err, r
        doctor = guest.run(["backburner", "doctor", "--json"], timeout=120)
        vda = next(d for d in json.loads(doctor.out)["disks"] if d["name"] == "vda")
        assert vda["ignored"] == ["io", "io-weight"] and vda["groups"]["writeback"], vda
        status = json.loads(guest.run(["backburner", "apply", "--status", "--json"],
                                      timeout=60).out)
        assert any(d["name"] == "vda" and d["fix"] for d in status["disks"]), status
    finally:
        guest.run(["backburner", "apply", "--remove"], timeout=60)
        guest.run(["rm", "-f", "/etc/systemd/system/bb-lever.service"])
        guest.run(["systemctl", "daemon-reload"])


def test_nvme_is_a_class_of_its_own(guest: Guest) -> None:
    nvme, scratch = _name(guest, NVME), _name(guest, SCRATCH)
    assert nvme.startswith("nvme"), nvme
    before = {n: _active(guest, n) for n in (nvme, scratch, "vda")}
    rotational = {n: guest.get(f"/sys/block/{n}/queue/rotational").decode().strip()
                  for n in before}
    assert rotational[nvme] == "0", rotational  # NVMe says it is solid-state too
    try:
        guest.run(["backburner", "apply", "--scheduler", "kyber", "--devices", "nvme"],
                  check=True, timeout=60)
        _trigger(guest)
        assert _active(guest, nvme) == "kyber"
        assert {n: _active(guest, n) for n in (scratch, "vda")} == \
            {n: before[n] for n in (scratch, "vda")}
        status = guest.run(["backburner", "apply", "--status"], timeout=60)
        assert status.status == 0 and f"{nvme}: kyber in force" in status.out, status
        guest.run(["backburner", "apply", "--remove"], check=True, timeout=60)
        _set(guest, nvme, before[nvme])
        # the solid-state class leaves NVMe to its own rule
        guest.run(["backburner", "apply", "--scheduler", "kyber", "--devices",
                   "non-rotational"], check=True, timeout=60)
        _trigger(guest)
        assert _active(guest, nvme) == before[nvme]
        for n in (scratch, "vda"):
            assert _active(guest, n) == ("kyber" if rotational[n] == "0" else before[n])
    finally:
        if _ours(guest):
            guest.run(["backburner", "apply", "--remove"], timeout=60)
        guest.run(["udevadm", "control", "--reload"])
        for n, sched in before.items():
            _set(guest, n, sched)


WRITER = """[Unit]
Description=a buffered writer ({which})
[Service]
IOAccounting=yes
ExecStart=/bin/sh -c 'exec dd if=/dev/zero of={mnt}/{which} bs=1M count=100000 status=none'
"""
IO_STAT = r"""
import json, subprocess, sys
devno = sys.argv[1]
out = {}
for unit in sys.argv[2:]:
    group = subprocess.run(["systemctl", "show", "-P", "ControlGroup", unit],
                           capture_output=True, text=True, check=True).stdout.strip()
    line = next((ln for ln in open(f"/sys/fs/cgroup{group}/io.stat")
                 if ln.split(" ", 1)[0] == devno), "")
    out[unit] = {"group": group, **{k: int(float(v)) for k, v in
                                    (f.split("=") for f in line.split()[1:])}}
print(json.dumps(out))
"""


def _qos(guest: Guest, devno: str) -> str:
    text = guest.get("/sys/fs/cgroup/io.cost.qos").decode()
    return next((ln for ln in text.splitlines() if ln.split(" ", 1)[0] == devno), "")


def _writers(guest: Guest, devno: str, units: dict[str, str], seconds: int) -> dict:
    """Both writers for `seconds`, then their groups' io.stat lines for the disk."""
    guest.run(["systemctl", "start", *units.values()], check=True)
    try:
        guest.run(["sleep", str(seconds)], timeout=seconds + 60)
        return json.loads(guest.run(["python3", "-c", IO_STAT, devno, *units.values()],
                                    check=True, timeout=60).out)
    finally:
        guest.run(["systemctl", "stop", *units.values()], timeout=120)


def test_iocost_holds_a_background_writers_writeback_back_and_remove_undoes_it(
        guest: Guest) -> None:
    scratch = _name(guest, SCRATCH)
    devno = guest.get(f"/sys/block/{scratch}/dev").decode().strip()
    qos_before = _qos(guest, devno)
    assert "enable=1" not in qos_before, qos_before
    units = {w: f"bb-{w}writer.service" for w in ("bg", "fg")}
    guest.run(["mkfs.ext4", "-q", "-F", f"/dev/{scratch}"], check=True, timeout=120)
    guest.run(["mkdir", "-p", MNT], check=True)
    guest.run(["mount", f"/dev/{scratch}", MNT], check=True)
    try:
        for which, unit in units.items():
            guest.put(f"/etc/systemd/system/{unit}", WRITER.format(which=which, mnt=MNT))
        guest.run(["systemctl", "daemon-reload"], check=True)
        # the control: the slice's weight alone, under `none`, holds nothing back. The
        # slice keeps the system's CPU weight (--cpu-weight 100): emulated writers can be
        # bound by CPU (a guest of one vCPU: the background's CPU weight alone held its
        # writer to 1/12)
        guest.run(["backburner", "apply", "--unit", units["bg"], *SAME_CPU], check=True,
                  timeout=60)
        guest.run(["systemctl", "daemon-reload"], check=True)
        stat = _writers(guest, devno, units, 15)
        assert stat[units["fg"]]["wbytes"] < 2 * stat[units["bg"]]["wbytes"], stat
        guest.run(["rm", "-f", *(f"{MNT}/{w}" for w in units)], check=True)
        r = guest.run(["backburner", "apply", "--iocost", "--devices", "all", "--kernel",
                       scratch, "--iocost-model", MODEL, "--unit", units["bg"], *SAME_CPU],
                      check=True, timeout=60)
        guest.run(["systemctl", "daemon-reload"], check=True)
        _trigger(guest)
        assert "enable=1" in _qos(guest, devno), (_qos(guest, devno), r)
        status = guest.run(["backburner", "apply", "--status"], timeout=60)
        assert f"{scratch}: io.cost on" in status.out, status
        stat = _writers(guest, devno, units, 25)
        bg, fg = stat[units["bg"]], stat[units["fg"]]
        assert bg["group"] == f"/backburner.slice/{units['bg']}", stat
        # a buffered writer's writeback is charged to its own group: the flusher's writes
        # are counted there, not at the root
        assert bg.get("wbytes", 0) > 0 and fg.get("wbytes", 0) > 0, stat
        # and held back: io.cost accounts its group (cost.usage: the time it used of the
        # device, by the model) and gave it a fraction of what the writer in system.slice
        # (weight 100 against the slice's 10) got
        assert "cost.usage" in bg and "cost.usage" in fg, stat
        assert fg["wbytes"] > 2 * bg["wbytes"], stat
    finally:
        guest.run(["systemctl", "stop", *units.values()], timeout=120)
        removed = guest.run(["backburner", "apply", "--remove"], timeout=60)
        guest.run(["umount", MNT], timeout=120)
        guest.run(["rm", "-f", *(f"/etc/systemd/system/{u}" for u in units.values())])
        guest.run(["systemctl", "daemon-reload"])
        guest.run(["udevadm", "control", "--reload"])
    assert removed.status == 0 and f"io.cost off for {scratch}" in removed.out, removed
    assert _ours(guest) == ""
    assert "enable=1" not in _qos(guest, devno)  # as before apply: io.cost off
    model = guest.get("/sys/fs/cgroup/io.cost.model").decode()
    assert all("ctrl=user" not in ln for ln in model.splitlines()
               if ln.startswith(devno + " ")), model  # the kernel's model again
