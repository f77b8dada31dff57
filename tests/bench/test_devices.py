"""bench.devices without real devices: what a testbed set-up asks the transaction for (and
stops asking once mkfs fails), mkfs failures quoted, device specs parsed."""

from __future__ import annotations

from pathlib import Path

import pytest

from backburner import spawn, system
from backburner.base.errors import SystemStateError, UnavailableError, UsageError
from backburner.bench import devices


class _Tx:
    """Records what is applied; mkfs fails the way the tool does, nothing else runs."""

    def __init__(self, mkfs_error: Exception) -> None:
        self.applied: list[system.Change] = []
        self.mkfs_error = mkfs_error

    def apply(self, change: system.Change) -> object:
        self.applied.append(change)
        if isinstance(change, system.Filesystem):
            raise self.mkfs_error
        return None


MKFS_STDERR = ("mke2fs 1.47.0 (5-Feb-2023)\n"
               "/dev/loop97 contains a ext4 file system\n"
               "mkfs.ext4: Device or resource busy while setting up superblock\n\n")


def test_a_failed_mkfs_stops_the_set_up_before_any_mount(tmp_path: Path) -> None:
    error = SystemStateError("mkfs.ext4 on /dev/loop97 failed: busy")
    tx = _Tx(error)
    with pytest.raises(SystemStateError) as err:
        devices.make_testbed("/dev/loop97", str(tmp_path / "disk.img"), str(tmp_path),
                             "testbed:64M", tx, 1)  # type: ignore[arg-type]
    assert err.value is error
    assert [type(c).__name__ for c in tx.applied] == ["SysfsValue", "Filesystem"]
    rotational, mkfs = tx.applied
    assert rotational == system.SysfsValue("/sys/block/loop97/queue/rotational", "1")
    assert mkfs == system.Filesystem("/dev/loop97", str(tmp_path / "disk.img"), "ext4",
                                     devices.MKFS_OPTIONS)


@pytest.mark.parametrize(("result", "quoted"), [
    (spawn.ToolResult(1, "", MKFS_STDERR),
     ": mkfs.ext4: Device or resource busy while setting up superblock"),
    (spawn.ToolResult(None, "", ""), " (timed out after 300 s, or killed by a signal)"),
    (spawn.ToolResult(8, "", ""), " (exit status 8)"),
])
def test_mkfs_failure_quotes_the_last_stderr_line(monkeypatch: pytest.MonkeyPatch,
                                                  result: spawn.ToolResult,
                                                  quoted: str) -> None:
    calls = []

    def fake_run_tool(argv: list[str], timeout: float = 120.0) -> spawn.ToolResult:
        calls.append((list(argv), timeout))
        return result

    monkeypatch.setattr(spawn, "run_tool", fake_run_tool)
    change = system.Filesystem("/dev/loop97", "/nonexistent/disk.img", "ext4",
                               devices.MKFS_OPTIONS)
    with pytest.raises(SystemStateError) as err:
        change.apply()
    assert str(err.value) == f"mkfs.ext4 on /dev/loop97 failed{quoted}"
    assert calls == [(["mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0",
                       "/dev/loop97"], 300.0)]


def test_mkfs_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(argv: list[str], timeout: float = 120.0) -> spawn.ToolResult:
        raise FileNotFoundError(2, "No such file or directory", argv[0])

    monkeypatch.setattr(spawn, "run_tool", missing)
    with pytest.raises(UnavailableError, match="mkfs.ext4 is not installed"):
        system.Filesystem("/dev/loop97", "/x.img").apply()


def test_mkfs_refuses_a_device_that_is_not_our_image() -> None:
    """A real disk (or any loop device over somebody else's file) is never formatted."""
    with pytest.raises(SystemStateError, match="not a loop device over"):
        system.Filesystem("/dev/sda", "/nonexistent/disk.img").read()


@pytest.mark.parametrize(("text", "kind", "size", "profile"), [
    ("testbed:64M", "testbed", 64 << 20, ""),
    ("testbed:4G", "testbed", 4 << 30, ""),
    ("slowdisk:hdd-5400:1G", "slowdisk", 1 << 30, "hdd-5400"),
    ("slowdisk:flat:5:1G", "slowdisk", 1 << 30, "flat:5"),
])
def test_device_specs(text: str, kind: str, size: int, profile: str) -> None:
    spec = devices.DeviceSpec.parse(text)
    assert (spec.kind, spec.label, spec.size, spec.profile) == (kind, text, size, profile)


@pytest.mark.parametrize(("text", "message"), [
    ("testbed:1M", "too small"), ("testbed:lots", "does not parse"),
    ("testbed:1e9999G", "does not parse"), ("testbed:99999999999999999999T", "too large"),
    ("slowdisk:1G", "does not parse"), ("slowdisk:warp-drive:1G", "profile"),
    ("/nonexistent/dir", "no such path"),
])
def test_bad_device_specs(text: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        devices.DeviceSpec.parse(text)


def test_a_path_device_must_be_a_directory(tmp_path: Path) -> None:
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(UsageError, match="not a directory"):
        devices.DeviceSpec.parse(str(f))
    spec = devices.DeviceSpec.parse(str(tmp_path))
    assert (spec.kind, spec.path) == ("path", str(tmp_path))


@pytest.mark.parametrize(("schedulers", "settle", "loaded", "block", "warned"), [
    (("bfq",), 0.5, True, False, True),
    (("mq-deadline", "bfq"), 0.99, True, False, True),
    (("bfq",), 1.0, True, False, False),  # past the window, with room
    (("mq-deadline",), 0.0, True, False, False),  # no stable merging there
    (("bfq",), 0.0, False, False, False),  # nothing starts before the probe
    (("bfq",), 0.5, True, True, False),  # a block's load settles past weight raising
])
def test_a_settle_inside_bfqs_stable_merge_window_is_named(
        schedulers: tuple[str, ...], settle: float, loaded: bool, block: bool,
        warned: bool) -> None:
    line = devices.settle_warning(schedulers, settle, loaded, block)
    assert (line is not None) == warned
    if line:
        assert line.startswith(f"--settle {settle:g} s under bfq") and "0.6 s" in line
