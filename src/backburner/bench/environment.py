"""What a run's results depend on, beyond the matrix: recorded with every run.

Buffered IO results in particular hang on settings a reader would otherwise never see: the
kernel's dirty-page thresholds, the writeback throttling of the device, BFQ's low-latency
heuristics, which cgroup version attributes writeback, the fio that made the load. They are
captured once per run (the device's own once it exists), with one naming style.
"""

from __future__ import annotations

import os
import platform
import shutil
from pathlib import Path
from typing import Any

from .. import __version__, spawn
from ..kernel import cgroups

DIRTY_SYSCTLS = ("dirty_ratio", "dirty_background_ratio", "dirty_bytes",
                 "dirty_background_bytes", "dirty_expire_centisecs",
                 "dirty_writeback_centisecs")


def _read(path: str | Path) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


def _os_release() -> str:
    fields = dict(line.split("=", 1) for line in _read("/etc/os-release").splitlines()
                  if "=" in line)
    return fields.get("PRETTY_NAME", "").strip('"') or "unknown"


def cgroup_version() -> int:
    """2 when the unified hierarchy has controllers (io, cpu), else 1."""
    root = cgroups.unified_root()
    return 2 if root is not None and {"io", "cpu"} & cgroups.controllers(root) else 1


def _fio_version() -> str:
    if not shutil.which("fio"):
        return "not installed"
    try:
        res = spawn.run_tool(["fio", "--version"], timeout=10)
    except FileNotFoundError:
        return "not installed"
    return res.stdout.strip() or "unknown"


def capture() -> dict[str, Any]:
    """The machine: CPU, memory, kernel, distribution, and the writeback settings."""
    cpu = next((ln.split(":", 1)[1].strip() for ln in _read("/proc/cpuinfo").splitlines()
                if ln.startswith("model name")), platform.processor())
    mem = next((ln.split()[1] for ln in _read("/proc/meminfo").splitlines()
                if ln.startswith("MemTotal")), "0")
    return {
        "os": _os_release(),
        "kernel": platform.release(),
        "kernel_version": platform.version(),
        "kernel_cmdline": _read("/proc/cmdline"),
        "machine": platform.machine(),
        "cpu_model": cpu,
        "cpus": os.cpu_count(),
        "cpu_governor": _read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
        or "n/a",
        "memory_bytes": int(mem) * 1024,
        "vm_dirty": {name: _read(f"/proc/sys/vm/{name}") for name in DIRTY_SYSCTLS},
        "cgroup_version": cgroup_version(),
        "fio": _fio_version(),
        "python": platform.python_version(),
        "backburner": __version__,
        "hostname": platform.node(),
    }


def device_settings(queue: str) -> dict[str, Any]:
    """The device's queue settings that decide buffered-IO results (recorded at set-up:
    the scheduler's own tunables appear once a scheduler is selected, so BFQ's are read
    after switching to it, where the run uses BFQ)."""
    out = {"wbt_lat_usec": _read(Path(queue, "wbt_lat_usec")) or "n/a",
           "nr_requests": _read(Path(queue, "nr_requests")),
           "read_ahead_kb": _read(Path(queue, "read_ahead_kb"))}
    iosched = Path(queue, "iosched")
    if (iosched / "low_latency").exists():
        out["bfq"] = {name: _read(iosched / name) for name in
                      ("low_latency", "slice_idle", "slice_idle_us", "strict_guarantees")}
    return out
