"""diskrules: the udev rules apply writes for disks, per class of disk (rotational,
solid-state, NVMe) and for io.cost; rendered, in udev's syntax, read back, matched against
made-up disks; and bad input refused with one line and its status before anything is
written."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import bb, one_line_error
from kernel.sysfs import disk

from backburner.apply import diskrules
from backburner.apply.diskrules import IoCostRule, SchedulerRule
from backburner.base.errors import UnavailableError, UsageError
from backburner.kernel import block
from backburner.policy import disks

from .test_install import UDEV_ASSIGN_KEYS, UDEV_MATCH_KEYS, parse_udev_line


def _lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln and not ln.startswith("#")]


def test_the_classes_are_apart_nvme_is_not_solid_state() -> None:
    rules = diskrules.scheduler_rules("recommended", None)
    assert [(r.kernel, r.rotational) for r in rules] == [
        (diskrules.DEFAULT_KERNEL, "1"), ("sd*|vd*|xvd*|mmcblk*", "0"), ("nvme*", None)]
    assert [r.scheduler for r in rules] == [disks.RECOMMENDED[c] for c in block.DISK_CLASSES]
    assert diskrules.scheduler_rules("recommended", "nvme") == [
        SchedulerRule(disks.RECOMMENDED["nvme"], "nvme*", None)]
    assert diskrules.scheduler_rules("kyber", None) == [SchedulerRule("kyber")]  # rotational
    assert diskrules.scheduler_rules("none", "all", "sd*") == [SchedulerRule("none", "sd*",
                                                                             None)]


def test_a_file_of_rules_is_udev_syntax_and_reads_back() -> None:
    rules = diskrules.scheduler_rules("recommended", None)
    text = diskrules.udev_rules(rules)
    assert text.startswith(diskrules.MARKER + "\n")
    assert "# The bfq IO scheduler for NVMe disks." in text
    for line in _lines(text):
        for key, _attr, op, _value in parse_udev_line(line):
            assert key in (UDEV_MATCH_KEYS if op in ("==", "!=") else UDEV_ASSIGN_KEYS)
    assert diskrules.recorded_rules(text) == rules
    assert diskrules.recorded_rule(text) is None  # several: not the one rule of old files
    assert diskrules.recorded_rules(text + 'KERNEL=="x"\n') is None


@pytest.mark.parametrize("model", [None, "rbps=500000000 wbps=400000000"])
def test_the_iocost_rule_writes_the_disks_own_number_and_reads_back(model: str | None
                                                                    ) -> None:
    rules = diskrules.iocost_rules("nvme", model=model)
    text = diskrules.iocost_udev(rules)
    (line,) = _lines(text)
    pairs = parse_udev_line(line)
    run = [v for k, _a, op, v in pairs if k == "RUN"]
    assert run and run[0].startswith("/bin/sh -c '") and run[0].endswith(
        "echo $major:$minor enable=1 > /sys/fs/cgroup/io.cost.qos'")
    assert ("ctrl=user model=linear rbps=500000000 wbps=400000000" in run[0]) is bool(model)
    assert ("KERNEL", None, "==", "nvme*") in pairs
    assert diskrules.recorded_iocost(text) == rules


@pytest.mark.parametrize("text, normal", [
    ("wbps=2 rbps=1", "rbps=1 wbps=2"), ("rbps=1,rseqiops=3", "rbps=1 rseqiops=3")])
def test_a_model_is_put_in_its_written_form(text: str, normal: str) -> None:
    assert diskrules.parse_model(text) == normal


@pytest.mark.parametrize("text", ["", "rbps=0", "rbps=-1", "rbps=1 rbps=2", "ctrl=user",
                                  "rbps=1; reboot", "rbps=1' '", "x"])
def test_a_bad_model_is_one_line(text: str) -> None:
    with pytest.raises(UsageError):
        diskrules.parse_model(text)
    with pytest.raises(UsageError):
        IoCostRule("nvme*", None, text or "x")


def test_io_cost_is_refused_where_the_kernel_has_none(tmp_path: Path) -> None:
    with pytest.raises(UnavailableError, match="no cgroup2 hierarchy"):
        diskrules.check_iocost(None)
    with pytest.raises(UnavailableError, match="io.cost.qos is missing"):
        diskrules.check_iocost(str(tmp_path))


def test_matches_and_liveness_on_made_up_disks(tmp_path: Path) -> None:
    disk(tmp_path, "sda", rotational="1", devno="8:0")
    disk(tmp_path, "sdb", rotational="0", devno="8:16")
    disk(tmp_path, "nvme0n1", rotational="0", devno="259:0")
    sys_block = str(tmp_path / "block")
    names = {c: [p.name for p in diskrules.matches(*diskrules.class_match(c), sys_block)]
             for c in diskrules.DEVICE_CLASSES}
    assert names == {"rotational": ["sda"], "non-rotational": ["sdb"], "nvme": ["nvme0n1"],
                     "all": ["nvme0n1", "sda", "sdb"]}
    root = tmp_path / "cg"
    root.mkdir()
    (root / "io.cost.qos").write_text("259:0 enable=1 ctrl=auto rpct=0.00 rlat=250000\n")
    (rule,) = diskrules.iocost_rules("nvme")
    assert diskrules.iocost_live(rule, sys_block, str(root)) == (True, ["nvme0n1: io.cost on"])
    (rule,) = diskrules.iocost_rules("all")
    live, notes = diskrules.iocost_live(rule, sys_block, str(root))
    assert not live and notes[1].startswith("sda: io.cost off (udevadm")


# --- through the command -------------------------------------------------------------------------


@pytest.mark.parametrize("args, status, words", [
    (["--scheduler", "bfq", "--devices", "ssd"], 64, "unknown disk class 'ssd'"),
    (["--iocost", "--devices", "hdd"], 64, "unknown disk class 'hdd'"),
    (["--iocost", "--iocost-model", "rbps=fast"], 64, "is not one of its parameters"),
    (["--iocost-model", "rbps=1"], 64, "--iocost-model goes with --iocost"),
    (["--devices", "nvme"], 64, "--devices says which disks"),
    (["--scheduler", "cfq", "--devices", "nvme"], 64, "unknown IO scheduler 'cfq'"),
])
def test_bad_input_is_one_line_before_anything_is_written(tmp_path: Path, args: list[str],
                                                          status: int, words: str) -> None:
    root = tmp_path / "image"
    root.mkdir()
    r = bb("apply", "--root", str(root), *args)
    assert r.returncode == status, r.err
    assert words in one_line_error(r)
    assert list(root.rglob("*")) == []


@pytest.mark.root
def test_a_disk_without_io_cost_is_refused_here_before_anything_is_written(
        state_dir: Path) -> None:
    """This host's cgroup2 root (an empty mount) has no io.cost.qos: 69, nothing written,
    although the rule would go under /etc."""
    before = set(Path("/etc/udev/rules.d").glob("*backburner*")) \
        if Path("/etc/udev/rules.d").is_dir() else set()
    r = bb("apply", "--iocost", "--devices", "nvme")
    assert r.returncode == 69, r.err
    assert "--iocost: this kernel has no io.cost" in one_line_error(r)
    after = set(Path("/etc/udev/rules.d").glob("*backburner*")) \
        if Path("/etc/udev/rules.d").is_dir() else set()
    assert after == before


def test_recommended_and_iocost_install_status_and_remove_under_a_root(
        tmp_path: Path, state_dir: Path) -> None:
    root = tmp_path / "image"
    root.mkdir()
    r = bb("apply", "--root", str(root), "--scheduler", "recommended", "--iocost",
           "--devices", "nvme", "--iocost-model", "rbps=1 wbps=2")
    assert r.returncode == 0, r.err
    rules = root / diskrules.UDEV_DIR
    assert (rules / diskrules.UDEV_RULE).read_text() == diskrules.udev_rules(
        [SchedulerRule("bfq", "nvme*", None)])
    assert (rules / diskrules.IOCOST_RULE).read_text() == diskrules.iocost_udev(
        [IoCostRule("nvme*", None, "rbps=1 wbps=2")])
    st = bb("apply", "--root", str(root), "--status")
    assert st.returncode == 0, st.out + st.err
    assert "udev io.cost rule" in st.out and "udev scheduler rule" in st.out
    assert bb("apply", "--root", str(root), "--remove").returncode == 0
    assert list(rules.iterdir()) == []
