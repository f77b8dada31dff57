"""`backburner slowdisk ...` as a user runs it: subprocesses, exit statuses, one-line errors."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from helpers import bb, one_line_error, wait_for

from backburner.base.errors import SystemStateError
from backburner.slowdisk.profiles import BUILTIN

pytestmark = pytest.mark.timeout(120)

needs_fuse = pytest.mark.skipif(not os.path.exists("/dev/fuse"), reason="needs /dev/fuse")


def test_profiles_lists_every_builtin_with_parameters_and_sources() -> None:
    r = bb("slowdisk", "profiles")
    assert r.returncode == 0 and r.err == "", r.err
    header = r.out.splitlines()[0].split()
    assert header == ["parameter", *BUILTIN]
    for row in ("rpm", "average seek", "rotational latency", "rate, outer edge",
                "drive cache", "random 4 KiB read (avg)", "read-only medium"):
        assert re.search(rf"^{re.escape(row)}\s", r.out, re.M), row
    assert re.search(r"^commands queued by\s+drive\s+drive\s+host\s+drive$", r.out, re.M)
    assert "flat:MS" in r.out
    assert r.out.count("source: ") == len(BUILTIN) + 1
    assert "ECMA-267" in r.out and "dm-delay" in r.out

    r = bb("slowdisk", "profiles", "--format", "json")
    assert r.returncode == 0 and r.out == bb("slowdisk", "profiles", "--json").out
    data = json.loads(r.out)
    assert [p["name"] for p in data] == list(BUILTIN)
    assert all(p["source"] and "average_seek_s" in p for p in data)


@pytest.mark.root
@needs_fuse
def test_create_stats_list_remove(tmp_path: Path, state_dir: Path) -> None:
    image = tmp_path / "disk.img"
    r = bb("slowdisk", "create", "--profile", "hdd-5400", "--size", "32M", str(image))
    assert r.returncode == 0, r.err
    assert re.fullmatch(r"/dev/loop\d+\n", r.out), r.out  # scripts can capture it
    dev = r.out.strip()
    assert len(r.err.strip().splitlines()) == 1 and f"slowdisk remove {dev}" in r.err
    assert image.stat().st_size == 32 << 20

    with open(dev, "rb", buffering=0) as f:  # one read through the loop device
        f.read(4096)
    r = bb("slowdisk", "stats", dev)
    assert r.returncode == 0, r.err
    assert r.out.startswith(f"{dev}: hdd-5400 slowdisk on {image}")
    for word in ("requests", "seeks", "busy (model)", "overhead", "scheduler mq-deadline",
                 "rotational 1"):
        assert word in r.out, word
    r = bb("slowdisk", "stats", "--json", dev.removeprefix("/dev/"))
    assert r.returncode == 0, r.err
    stats = json.loads(r.out)
    assert stats["device"] == dev and stats["profile"] == "hdd-5400"
    assert stats["reads"] >= 1 and stats["busy_s"] > 0 and "overhead_mean_s" in stats

    r = bb("slowdisk", "list")
    assert r.returncode == 0 and dev in r.out and "running" in r.out

    r = bb("slowdisk", "remove", dev)
    assert r.returncode == 0, r.err
    assert r.out.strip() == f"removed {dev} (hdd-5400 slowdisk on {image})"
    wait_for(lambda: not os.path.exists(f"/proc/{stats['pid']}") or
             Path(f"/proc/{stats['pid']}/stat").read_text().split(") ")[1][0] == "Z", 10)
    assert stats["mountpoint"] not in Path("/proc/self/mounts").read_text()
    assert not Path(stats["mountpoint"]).parent.exists()
    assert image.exists()

    for args in (("remove", dev), ("stats", dev)):
        r = bb("slowdisk", *args)
        assert r.returncode == 66, r.err
        assert one_line_error(r) == f"backburner: {dev} is not a slowdisk; there is none"
    r = bb("slowdisk", "list")
    assert r.returncode == 0 and r.out == "no slowdisk is set up\n"


@pytest.mark.root
def test_errors_are_one_line_with_a_status(tmp_path: Path, state_dir: Path) -> None:
    small = tmp_path / "small.img"
    small.write_bytes(b"\0" * (1 << 20))
    missing = str(tmp_path / "missing.img")
    cases = [
        (("slowdisk",), 64, "required: ACTION"),
        (("slowdisk", "create", missing, "--size", "1G"), 64, "--profile"),
        (("slowdisk", "create", "--profile", "floppy", missing, "--size", "1G"), 64,
         "unknown slowdisk profile 'floppy'"),
        (("slowdisk", "create", "--profile", "flat:x", missing, "--size", "1G"), 64,
         "bad flat profile"),
        (("slowdisk", "create", "--profile", "hdd-5400", "--size", "8G", str(small)), 64,
         "smaller than the 8 GiB asked for"),
        (("slowdisk", "create", "--profile", "dvd", missing), 66, "does not exist"),
        (("slowdisk", "create", "--profile", "hdd-7200", missing), 64, "give --size"),
        (("slowdisk", "create", "--profile", "hdd-7200", "--size", "8Q", missing), 64,
         "does not parse"),
        (("slowdisk", "create", "--profile", "hdd-7200", "--size", "1G",
          "--scheduler", "cfq", missing), 64, "unknown IO scheduler"),
        (("slowdisk", "remove", "/dev/loop999"), 66, "not a slowdisk"),
        (("slowdisk", "stats", "loop999"), 66, "not a slowdisk"),
    ]
    for args, status, text in cases:
        r = bb(*args)
        assert r.returncode == status, (args, r.returncode, r.err)
        line = one_line_error(r)
        assert line.startswith("backburner: ") and text in line, (args, line)
        assert r.out == ""
    assert not os.path.exists(missing)
    assert not (state_dir / "journal").exists() or not list((state_dir / "journal").iterdir())


@pytest.mark.root
def test_create_refuses_a_planted_symlink_and_serves_nothing(tmp_path: Path) -> None:
    """A user links the image path to a file of root's: root's `slowdisk create` must not
    serve that file read-write through a loop device."""
    secret = tmp_path / "roots-file"
    secret.write_bytes(b"root's bytes" * 100_000)
    shared = tmp_path / "tmp"
    shared.mkdir(mode=0o1777)
    shared.chmod(0o1777)
    planted = shared / "slow.img"
    planted.symlink_to(secret)
    r = bb("slowdisk", "create", "--size", "64M", "--profile", "hdd-5400", str(planted))
    assert r.returncode == 78, r.err
    assert "is a symbolic link" in r.err and len(r.err.strip().splitlines()) == 1
    assert not [ln for ln in Path("/proc/mounts").read_text().splitlines()
                if str(tmp_path) in ln]
    assert subprocess.run(["losetup", "-j", str(secret)], capture_output=True,
                          text=True).stdout == ""


def test_the_daemon_serves_only_the_file_that_was_checked(tmp_path: Path) -> None:
    """Swapped between the check and the daemon's open: the daemon refuses to serve."""
    from backburner.slowdisk.image import ImageFile

    checked, other = tmp_path / "checked.img", tmp_path / "other.img"
    for f in (checked, other):
        f.write_bytes(b"\0" * 4096)
    st = checked.stat()
    checked.unlink()
    other.rename(checked)
    with pytest.raises(SystemStateError, match="was replaced after it was checked"):
        ImageFile(str(checked), writable=False, identity=f"{st.st_dev}:{st.st_ino}")
