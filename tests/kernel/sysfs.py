"""Made-up sysfs trees for the kernel layer's pure parts: disks with their queues,
partitions, device-mapper devices over them, and a cgroup2 root."""

from __future__ import annotations

from pathlib import Path


def disk(sys: Path, name: str, *, scheduler: str = "[none] mq-deadline kyber bfq",
         rotational: str = "0", devno: str = "259:0", iosched: dict[str, str] | None = None,
         partitions: tuple[str, ...] = ()) -> Path:
    """/sys/devices/.../NAME with its queue, linked from /sys/block/NAME."""
    real = sys / "devices" / name
    (real / "queue").mkdir(parents=True)
    (real / "queue" / "scheduler").write_text(scheduler + "\n")
    (real / "queue" / "rotational").write_text(rotational + "\n")
    (real / "dev").write_text(devno + "\n")
    for key, value in (iosched or {}).items():
        (real / "queue" / "iosched").mkdir(exist_ok=True)
        (real / "queue" / "iosched" / key).write_text(value + "\n")
    for part in partitions:
        (real / part).mkdir()
        (real / part / "partition").write_text("1\n")
    (sys / "block").mkdir(exist_ok=True)
    (sys / "block" / name).symlink_to(real)
    return real


def mapped(sys: Path, name: str, over: list[Path]) -> Path:
    """A device-mapper device whose slaves are `over` (disks or partitions)."""
    real = disk(sys, name, scheduler="none", devno="254:0")
    (real / "slaves").mkdir()
    for target in over:
        (real / "slaves" / target.name).symlink_to(target)
    return real
