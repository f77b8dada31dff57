"""`apply`: the udev rule and systemd drop-ins it writes, checked by the tools that will read
them (systemd-analyze; udevadm where installed, else an independent parse and an evaluation
of the rule's matches against this machine's real block devices), installed and removed
through the undo core, all or nothing, and put back by `restore` after a SIGKILL."""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import signal
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from helpers import BB, TIMEOUT, WITHOUT_CGROUP2, bb, one_line_error

from backburner import system
from backburner.apply import install as apply
from backburner.base.errors import ExistsError, NotFoundError, UsageError
from backburner.policy import grammar

BACKGROUND = grammar.BUILTIN["background"]
RULE = apply.SchedulerRule("bfq")

# --- rendering (pure) ------------------------------------------------------------------------


def test_the_udev_rule_selects_the_scheduler_for_matching_disks() -> None:
    text = apply.udev_rule(RULE)
    lines = text.splitlines()
    assert lines[0] == apply.MARKER
    rule = lines[-1]
    assert 'ATTR{queue/scheduler}="bfq"' in rule
    assert 'ATTR{queue/rotational}=="1"' in rule and 'ENV{DEVTYPE}=="disk"' in rule
    anyone = apply.udev_rule(apply.SchedulerRule("mq-deadline", "sd*", None)).splitlines()[-1]
    assert "rotational" not in anyone and 'KERNEL=="sd*"' in anyone


@pytest.mark.parametrize("scheduler, kernel", [("bfq\"", "sd*"), ("", "sd*"), ("BFQ", "sd*"),
                                               ("bfq", 'sd*", RUN+="/bin/sh'), ("bfq", "sd*\n"),
                                               ("bfq", "|sd*"), ("bfq", "sd*||vd*")])
def test_nothing_can_be_smuggled_into_the_rule(scheduler: str, kernel: str) -> None:
    with pytest.raises(UsageError):
        apply.SchedulerRule(scheduler, kernel)


def test_the_dropin_carries_the_policy() -> None:
    text = apply.dropin("backup.service", BACKGROUND)
    assert text.splitlines()[0] == apply.MARKER
    body = text.split("[Service]\n", 1)[1].splitlines()
    assert body == ["IOSchedulingClass=idle", "CPUSchedulingPolicy=idle", "IOWeight=10",
                    "CPUWeight=10", "Slice=backburner.slice"]
    gentle = apply.dropin("backup.service", grammar.BUILTIN["gentle"])
    assert "Slice=" not in gentle  # no weights: nothing for a slice to carry
    with pytest.raises(UsageError):
        apply.dropin("backup.service", grammar.BUILTIN["default"])


def test_plan_names_the_files() -> None:
    files = apply.plan(RULE, ["apt-daily-upgrade", "apt-daily-upgrade.service"], BACKGROUND)
    assert [f.path for f in files] == [
        "etc/udev/rules.d/65-backburner-scheduler.rules",
        "etc/systemd/system/apt-daily-upgrade.service.d/50-backburner.conf",
        "etc/systemd/system/backburner.slice"]
    assert files[-1].content.endswith("[Slice]\nIOWeight=10\nCPUWeight=10\n")
    assert [f.path for f in apply.plan(RULE, [], BACKGROUND)] == [files[0].path]
    assert len(apply.plan(None, ["x"], grammar.BUILTIN["gentle"])) == 1  # no weights, no slice
    with pytest.raises(UsageError):
        apply.plan(None, [], BACKGROUND)


@pytest.mark.parametrize("spec", ["background", "gentle", "io=rt:1,cpu=batch:5,io-weight=500",
                                  "background,io-weight=20"])
def test_each_file_says_what_it_was_written_for(spec: str) -> None:
    policy = grammar.parse_policy(spec)
    for f in apply.plan(apply.SchedulerRule("kyber", "sd*|vd*", "0"), ["x@y.z.service"], policy):
        if f.path.endswith(".rules"):
            assert apply.recorded_rule(f.content) == apply.SchedulerRule("kyber", "sd*|vd*", "0")
        else:
            got = apply.recorded_policy(f.content)
            assert got is not None
            assert (got.io, got.cpu, got.io_weight, got.cpu_weight) == (
                policy.io, policy.cpu, policy.io_weight, policy.cpu_weight)
    assert apply.recorded_rule(apply.udev_rule(RULE) + "KERNEL==\"x\"\n") is None
    assert apply.recorded_policy(apply.MARKER + "\n# edited\n") is None


def test_a_unit_exists_when_its_file_or_template_is_in_a_search_path(tmp_path: Path) -> None:
    (tmp_path / "usr/lib/systemd/system").mkdir(parents=True)
    (tmp_path / "usr/lib/systemd/system/backup@.service").write_text("")
    (tmp_path / "etc/systemd/system").mkdir(parents=True)
    (tmp_path / "etc/systemd/system/local.service").write_text("")
    for unit in ("backup@home.service", "backup@a.b.service", "local.service"):
        assert apply.unit_file_exists(unit, tmp_path), unit
    assert not apply.unit_file_exists("backup.service", tmp_path)
    apply.check_units(["local", "backup@x"], str(tmp_path))
    with pytest.raises(NotFoundError, match="unit nope.service does not exist") as err:
        apply.check_units(["local", "nope"], str(tmp_path))
    assert err.value.exit_status == 66
    apply.check_units(["nope"], "/", known=lambda name: name == "nope.service")
    with pytest.raises(NotFoundError):
        apply.check_units(["local"], str(tmp_path), known=lambda name: False)


# --- checked by the tools that read them -------------------------------------------------------

UNIT = """[Unit]
Description=bulk work for the test

[Service]
Type=oneshot
ExecStart={true}
"""


def _verify(unit_dir: Path, unit: str) -> str:
    done = subprocess.run(["systemd-analyze", "verify", "--man=no", str(unit_dir / unit)],
                          capture_output=True, text=True, timeout=TIMEOUT, cwd=unit_dir)
    return (done.stdout + done.stderr).strip() + ("" if done.returncode == 0 else " (failed)")


@pytest.mark.parametrize("spec", ["background", "gentle", "io=rt:1,cpu=batch:5,io-weight=500",
                                  "io=none,cpu=nice:-5,cpu-weight=10000"])
def test_systemd_analyze_accepts_the_dropins(tmp_path: Path, state_dir: Path, spec: str) -> None:
    root = tmp_path / "root"
    root.mkdir()
    apply.install(apply.plan(None, ["bulk"], grammar.parse_policy(spec)), str(root))
    unit_dir = root / apply.UNIT_DIR
    (unit_dir / "bulk.service").write_text(UNIT.format(true=shutil.which("true")))
    assert _verify(unit_dir, "bulk.service") == ""
    # the check can fail: the same tool names a wrong value in the same place
    conf = unit_dir / "bulk.service.d" / apply.DROPIN
    conf.write_text(conf.read_text().replace("[Service]", "[Service]\nIOSchedulingClass=idel"))
    assert "idel" in _verify(unit_dir, "bulk.service")


#: udev(7): match keys (==, !=) and assignment keys (=, +=, -=, :=) of rules.d files.
UDEV_MATCH_KEYS = {"ACTION", "DEVPATH", "KERNEL", "KERNELS", "NAME", "SYMLINK", "SUBSYSTEM",
                   "SUBSYSTEMS", "DRIVER", "DRIVERS", "ATTR", "ATTRS", "SYSCTL", "ENV", "CONST",
                   "TAG", "TAGS", "TEST", "PROGRAM", "RESULT"}
UDEV_ASSIGN_KEYS = {"NAME", "SYMLINK", "OWNER", "GROUP", "MODE", "SECLABEL", "ATTR", "SYSCTL",
                    "ENV", "TAG", "RUN", "LABEL", "GOTO", "IMPORT", "OPTIONS"}
_UDEV_PAIR = re.compile(r'\s*([A-Z]+)(?:\{([^}]+)\})?\s*(==|!=|\+=|-=|:=|=)\s*"([^"]*)"\s*(,|$)')


def parse_udev_line(line: str) -> list[tuple[str, str | None, str, str]]:
    """A rules.d line as udev reads it: comma-separated KEY[{attr}]OP"value" pairs."""
    pairs, pos = [], 0
    while pos < len(line):
        m = _UDEV_PAIR.match(line, pos)
        assert m, f"udev syntax error at column {pos}: {line[pos:]!r}"
        pairs.append((m.group(1), m.group(2), m.group(3), m.group(4)))
        pos = m.end()
    return pairs


def test_the_udev_rule_parses_and_matches_this_machines_disks(tmp_path: Path) -> None:
    text = apply.udev_rule(apply.SchedulerRule("bfq", rotational=None))
    rules = [ln for ln in text.splitlines() if ln and not ln.startswith("#")]
    assert len(rules) == 1
    pairs = parse_udev_line(rules[0])
    for key, _attr, op, _value in pairs:
        ok = UDEV_MATCH_KEYS if op in ("==", "!=") else UDEV_ASSIGN_KEYS
        assert key in ok, f"{key}{op} is not a udev key for that operator"
    matches = {(k, a): v for k, a, op, v in pairs if op == "=="}
    assigned = {(k, a): v for k, a, op, v in pairs if op == "="}
    assert assigned == {("ATTR", "queue/scheduler"): "bfq"}
    # evaluate the matches as udev would for this machine's real block devices
    matched = []
    for dev in sorted(Path("/sys/class/block").iterdir()):
        try:
            event = (dev / "uevent").read_text()
        except FileNotFoundError:
            continue  # a loop device another test (or process) detached meanwhile
        uevent = dict(ln.split("=", 1) for ln in event.splitlines() if "=" in ln)
        name_ok = any(fnmatch.fnmatchcase(dev.name, g)
                      for g in matches[("KERNEL", None)].split("|"))
        if name_ok and uevent.get("DEVTYPE") == matches[("ENV", "DEVTYPE")]:
            matched.append(dev)
            offered = (dev / "queue" / "scheduler").read_text().replace("[", "").replace("]", "")
            assert "bfq" in offered.split(), f"{dev.name} does not offer bfq: {offered}"
        if uevent.get("DEVTYPE") == "partition":
            assert dev not in matched  # a partition has no queue/scheduler of its own
    assert matched, "the default device names match no disk of this machine"
    if shutil.which("udevadm") is None:
        warnings.warn("udevadm is not installed: the rule was checked by parsing it against "
                      "udev(7)'s syntax and evaluating its matches on /sys, not by udevadm",
                      stacklevel=1)
        return
    rule_file = tmp_path / apply.UDEV_RULE
    rule_file.write_text(text)
    done = subprocess.run(["udevadm", "verify", str(rule_file)], capture_output=True,
                          text=True, timeout=TIMEOUT)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_parser_can_fail() -> None:
    with pytest.raises(AssertionError):
        parse_udev_line('KERNEL=="sd*", ATTR{queue/scheduler}="bfq" junk')
    with pytest.raises(AssertionError):
        parse_udev_line('KERNEL=="sd*" ATTR{queue/scheduler}="bfq"')


# --- installed through the undo core ------------------------------------------------------------


def test_install_and_remove_round_trip_through_the_cli(tmp_path: Path, state_dir: Path) -> None:
    root = tmp_path / "image"
    (root / "etc/systemd/system/keep.service.d").mkdir(parents=True)
    (root / "etc/systemd/system/keep.service.d/10-admin.conf").write_text("[Service]\nNice=5\n")
    args = ["--root", str(root), "--scheduler", "bfq", "--devices", "all", "--unit", "keep",
            "--unit", "backup@home", "--policy", "gentle"]
    res = bb("apply", *args)
    assert res.returncode == 66 and "keep.service does not exist" in one_line_error(res)
    assert list(root.rglob("*backburner*")) == []  # refused before anything was written
    (root / "usr/lib/systemd/system").mkdir(parents=True)
    (root / "usr/lib/systemd/system/backup@.service").write_text("[Service]\nExecStart=/bin/true\n")
    (root / "usr/lib/systemd/system/keep.service").write_text("[Service]\nExecStart=/bin/true\n")
    res = bb("apply", *args)
    assert res.returncode == 0, res.err
    rule = root / apply.UDEV_DIR / apply.UDEV_RULE
    keep = root / "etc/systemd/system/keep.service.d" / apply.DROPIN
    backup = root / "etc/systemd/system/backup@home.service.d" / apply.DROPIN
    assert rule.read_text() == apply.udev_rule(apply.SchedulerRule("bfq", rotational=None))
    assert "Nice=19" in keep.read_text() and backup.is_file()
    assert oct(rule.stat().st_mode & 0o777) == "0o644"
    assert not list(state_dir.rglob("*.jsonl"))  # committed: nothing left to undo
    again = bb("apply", "--root", str(root), "--unit", "keep")  # ours: replaced, not refused
    assert again.returncode == 0 and "IOSchedulingClass=idle" in keep.read_text()

    res = bb("apply", "--root", str(root), "--remove")
    assert res.returncode == 0, res.err
    assert res.out.count("removed ") == 4  # and the slice of the background policy
    assert not rule.exists() and not keep.exists() and not backup.parent.exists()
    assert not (root / "etc/systemd/system/backburner.slice").exists()
    assert (root / "etc/systemd/system/keep.service.d/10-admin.conf").is_file()  # not ours
    assert (root / apply.UDEV_DIR).is_dir()
    assert "nothing to remove" in bb("apply", "--root", str(root), "--remove").out


def test_dry_run_prints_and_changes_nothing(tmp_path: Path, state_dir: Path) -> None:
    unit = tmp_path / "lib/systemd/system/x.service"
    unit.parent.mkdir(parents=True)
    unit.write_text("[Service]\nExecStart=/bin/true\n")
    before = sorted(tmp_path.rglob("*"))
    res = bb("apply", "--root", str(tmp_path), "--scheduler", "kyber", "--unit", "x",
             "--dry-run")
    assert res.returncode == 0, res.err
    assert f"### {tmp_path}/etc/udev/rules.d/65-backburner-scheduler.rules" in res.out
    assert 'ATTR{queue/scheduler}="kyber"' in res.out and "[Service]" in res.out
    assert sorted(tmp_path.rglob("*")) == before


def test_a_dry_run_refuses_what_the_run_refuses(tmp_path: Path, state_dir: Path) -> None:
    """A dry run that prints files apply would refuse to write says nothing true: it makes
    the same checks, with the same statuses (a unit that does not exist, a file of someone
    else's in the way), and writes nothing."""
    for root in ("/", str(tmp_path)):
        args = ["apply", "--root", root, "--unit", "no-such-unit-xyz"]
        real, dry = bb(*args), bb(*args, "--dry-run")
        assert real.returncode == dry.returncode == 66, (real.err, dry.err)
        assert "no-such-unit-xyz.service does not exist" in one_line_error(dry)
        assert dry.out == ""
    rules = tmp_path / apply.UDEV_DIR
    rules.mkdir(parents=True)
    (rules / apply.UDEV_RULE).write_text("# the admin's own\n")
    args = ["apply", "--root", str(tmp_path), "--scheduler", "bfq"]
    assert bb(*args).returncode == bb(*args, "--dry-run").returncode == 73
    assert bb(*args, "--dry-run", "--force").returncode == 0


def test_a_file_we_did_not_write_is_not_replaced_without_force(tmp_path: Path,
                                                               state_dir: Path) -> None:
    rules = tmp_path / apply.UDEV_DIR
    rules.mkdir(parents=True)
    foreign = rules / apply.UDEV_RULE
    foreign.write_text('# the admin\'s own\nKERNEL=="sdz", ATTR{queue/scheduler}="none"\n')
    with pytest.raises(ExistsError):
        apply.install(apply.plan(RULE, [], BACKGROUND), str(tmp_path))
    res = bb("apply", "--root", str(tmp_path), "--scheduler", "bfq")
    assert res.returncode == 73 and "--force" in one_line_error(res)
    assert "admin" in foreign.read_text()
    assert bb("apply", "--root", str(tmp_path), "--scheduler", "bfq", "--force").returncode == 0
    assert foreign.read_text().startswith(apply.MARKER)
    bb("apply", "--root", str(tmp_path), "--remove")
    assert not foreign.exists()


def test_a_failure_half_way_undoes_what_was_written(tmp_path: Path, state_dir: Path) -> None:
    """The second file's directory is blocked by a plain file: the first file, written
    already, and the directories made for it are taken out again."""
    (tmp_path / "etc/systemd").mkdir(parents=True)
    (tmp_path / "etc/systemd/system").write_text("in the way")
    with pytest.raises(UsageError, match="in the way"):
        apply.install(apply.plan(RULE, ["bulk"], BACKGROUND), str(tmp_path))
    assert not (tmp_path / "etc/udev").exists()
    assert sorted(p.name for p in (tmp_path / "etc").iterdir()) == ["systemd"]
    assert not list(state_dir.rglob("*.jsonl"))


@pytest.mark.parametrize("bad, status", [(["--scheduler", "bfq", "--remove"], 64),
                                         (["--unit", "../x"], 64),
                                         (["--unit", "bb/updater"], 64),
                                         (["--unit", "x\nExecStart=/bin/sh"], 64),
                                         (["--unit", "x.slice"], 64),
                                         (["--unit", "x", "--io-weight", "0"], 64),
                                         (["--unit", "x", "--root", "/no/such/dir"], 66),
                                         ([], 64)])
def test_bad_input_is_one_line(tmp_path: Path, state_dir: Path, bad: list[str],
                               status: int) -> None:
    res = bb("apply", *bad)
    assert res.returncode == status, res.err
    one_line_error(res)


CRASH = """
import os, signal, sys
from backburner import system
path = sys.argv[1]
with system.Transaction("apply") as tx:
    tx.apply(system.InstalledFile(path, "# ours\\n"))
    os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.root
def test_restore_puts_back_the_old_file_after_a_sigkill(tmp_path: Path, state_dir: Path) -> None:
    target = tmp_path / "etc" / "x.rules"
    target.parent.mkdir()
    target.write_text("# the old rule\n")
    target.chmod(0o640)
    fresh = tmp_path / "etc" / "new.rules"
    for path in (target, fresh):
        killed = subprocess.run([sys.executable, "-c", CRASH, str(path)], timeout=TIMEOUT)
        assert killed.returncode == -signal.SIGKILL
        assert path.read_text() == "# ours\n"
    # what `backburner restore` does first; not the CLI itself, whose pruning of empty
    # cgroups would reach the groups of benches other tests run at the same time
    said: list[str] = []
    system.restore_stale(report=said.append)
    assert sum("undid install" in m for m in said) == 2, said
    assert target.read_text() == "# the old rule\n" and oct(target.stat().st_mode) == "0o100640"
    assert not fresh.exists()
    assert sorted(os.listdir(target.parent)) == ["x.rules"]


def test_undo_leaves_a_file_changed_since(tmp_path: Path, state_dir: Path) -> None:
    path = tmp_path / "x.conf"
    change = system.InstalledFile(str(path), "ours\n")
    old = change.read()
    change.apply()
    path.write_text("the admin edited it\n")
    assert "changed after" in (change.undo(old, None) or "")
    assert path.read_text() == "the admin edited it\n"
    path.write_text("ours\n")
    assert change.undo(old, None) is None and not path.exists()
    assert change.undo(old, None) is None  # idempotent


def test_an_empty_file_replaced_comes_back_empty(tmp_path: Path, state_dir: Path) -> None:
    path = tmp_path / "empty.rules"
    path.write_text("")
    change = system.InstalledFile(str(path), "ours\n")
    old = change.read()
    change.apply()
    assert change.undo(old, None) is None
    assert path.exists() and path.read_text() == ""


def test_a_scheduler_no_kernel_has_is_refused_before_anything_is_written(
        tmp_path: Path) -> None:
    root = tmp_path / "image"
    root.mkdir()
    r = bb("apply", "--root", str(root), "--scheduler", "junk")
    assert r.returncode == 64, r.err
    assert "unknown IO scheduler 'junk'" in r.err
    assert len(r.err.strip().splitlines()) == 1
    assert list(root.rglob("*")) == []
    r = bb("apply", "--root", str(root), "--scheduler", "junk", "--force")
    assert r.returncode == 0, r.err
    assert (root / "etc/udev/rules.d/65-backburner-scheduler.rules").is_file()


def test_net_background_attaches_the_services_pinned_programs() -> None:
    text = apply.dropin("bulk.service", grammar.BUILTIN["default"], "background")
    assert text.splitlines()[1].endswith("(policy default; net background).")
    assert text.split("\n", 2)[2] == (
        "[Unit]\nWants=backburner-net.service\nAfter=backburner-net.service\n[Service]\n"
        "BPFProgram=egress:/sys/fs/bpf/backburner/ack_egress\n"
        "BPFProgram=sock_ops:/sys/fs/bpf/backburner/window_sock_ops\n")
    both = apply.dropin("bulk.service", BACKGROUND, "background")
    assert "IOSchedulingClass=idle" in both and "BPFProgram=egress:" in both
    for content in (text, both):
        assert apply.recorded_net(content) == "background"
        assert apply.recorded_policy(content) is not None
    assert apply.recorded_net(apply.dropin("bulk.service", BACKGROUND)) is None
    with pytest.raises(UsageError, match="unknown --net mode"):
        apply.dropin("bulk.service", BACKGROUND, "foreground")
    with pytest.raises(UsageError, match="--net is for units"):
        apply.plan(RULE, [], BACKGROUND, "background")


def test_a_net_dropin_is_one_systemd_takes(tmp_path: Path) -> None:
    unit_dir = tmp_path / "units"
    (unit_dir / "bulk.service.d").mkdir(parents=True)
    (unit_dir / "bulk.service").write_text("[Service]\nExecStart=/bin/true\n")
    (unit_dir / "backburner-net.service").write_text(
        (Path(__file__).parents[2] / "systemd/backburner-net.service").read_text()
        .replace("/usr/bin/backburner", "/bin/true"))
    (unit_dir / "bulk.service.d" / apply.DROPIN).write_text(
        apply.dropin("bulk.service", grammar.BUILTIN["default"], "background"))
    conf = unit_dir / "bulk.service.d" / apply.DROPIN

    def verify() -> str:
        done = subprocess.run(["systemd-analyze", "verify", "--man=no",
                               str(unit_dir / "bulk.service"),
                               str(unit_dir / "backburner-net.service")],
                              capture_output=True, text=True, timeout=TIMEOUT,
                              env={**os.environ, "SYSTEMD_UNIT_PATH": f"{unit_dir}:"})
        assert done.returncode == 0, done.stderr
        return done.stderr

    assert "Unknown" not in (said := verify()) and "BPFProgram" not in said, said
    # the check can fail: the same tool names a wrong attach type
    conf.write_text(conf.read_text().replace("egress:", "egrexx:"))
    assert "egrexx" in verify()


@pytest.mark.root
def test_net_dropins_on_cgroup_v1_alone_are_69_before_anything(state_dir: Path) -> None:
    """systemd attaches BPFProgram= only on its cgroup2 tree: where none is mounted the
    drop-ins would hold nothing back, so apply refuses them here (no file written)."""
    unit = "bbtest-v1-netunit.service"
    res = subprocess.run([*WITHOUT_CGROUP2, *BB, "apply", "--unit", unit, "--net",
                          "background"], capture_output=True, text=True, timeout=TIMEOUT,
                         env=os.environ.copy())
    assert res.returncode == 69, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "only on a cgroup2 tree" in lines[0], res.stderr
    assert not Path(f"/etc/systemd/system/{unit}.d").exists()
