"""bench.devices without real devices: mkfs failures quote the tool, and the bench modules
create processes only through spawn."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from backburner import spawn
from backburner.bench import devices
from backburner.errors import SystemStateError, UnavailableError


class _Tx:
    """Records what would be applied, applies nothing."""

    def __init__(self) -> None:
        self.applied: list[object] = []

    def apply(self, change: object) -> object:
        self.applied.append(change)
        return change


MKFS_STDERR = ("mke2fs 1.47.0 (5-Feb-2023)\n"
               "/dev/loop97 contains a ext4 file system\n"
               "mkfs.ext4: Device or resource busy while setting up superblock\n\n")


@pytest.mark.parametrize(("result", "quoted"), [
    (spawn.ToolResult(1, "", MKFS_STDERR),
     ": mkfs.ext4: Device or resource busy while setting up superblock"),
    (spawn.ToolResult(None, "", ""), " (timed out after 300 s, or killed by a signal)"),
    (spawn.ToolResult(8, "", ""), " (exit status 8)"),
])
def test_mkfs_failure_quotes_the_last_stderr_line(monkeypatch: pytest.MonkeyPatch,
                                                  tmp_path: Path, result: spawn.ToolResult,
                                                  quoted: str) -> None:
    calls = []

    def fake_run_tool(argv: list[str], timeout: float = 120.0) -> spawn.ToolResult:
        calls.append((list(argv), timeout))
        return result

    monkeypatch.setattr(devices.spawn, "run_tool", fake_run_tool)
    with pytest.raises(SystemStateError) as err:
        devices._make_testbed_on("/dev/loop97", str(tmp_path), "testbed:64M", _Tx(), 1)
    assert str(err.value) == f"mkfs.ext4 on /dev/loop97 failed{quoted}"
    assert calls == [(["mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0",
                       "/dev/loop97"], 300.0)]
    assert not (tmp_path / "mnt").exists()  # nothing mounted after a failed mkfs


def test_mkfs_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(argv: list[str], timeout: float = 120.0) -> spawn.ToolResult:
        raise FileNotFoundError(2, "No such file or directory", argv[0])

    monkeypatch.setattr(devices.spawn, "run_tool", missing)
    with pytest.raises(UnavailableError, match="mkfs.ext4 is not installed"):
        devices.mkfs("/dev/loop97")


def test_bench_creates_processes_only_through_spawn() -> None:
    """No subprocess.run/Popen/call, os.system/fork/exec/spawn* in bench/*.py."""
    pattern = re.compile(r"\bsubprocess\.(run|Popen|call|check_call|check_output|getoutput)\b"
                         r"|\bos\.(system|fork|forkpty|exec\w*|spawn\w*|posix_spawn\w*|popen)\(")
    src = Path(devices.__file__).parent
    found = [f"{p.name}:{n}: {ln.strip()}" for p in sorted(src.glob("*.py"))
             for n, ln in enumerate(p.read_text().splitlines(), 1) if pattern.search(ln)]
    assert found == []
