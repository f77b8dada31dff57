"""Flush-behind as part of a policy text (`bench --policy io=idle,flush-behind`): the
item that asks for it. Pure: `run.flushing` writes the files back.

Why a policy needs it: a process's IO class governs the requests it makes, and the pages
it dirties are written later by the kernel's flusher threads, at the default class. Beside
a flatpak installer at the idle class, one Writer start in eight was 1.6-2x slower, each
time while the flusher wrote 107 MB of the installer's files (`bench --trace`,
docs/measurements/startup.md, "The slow starts traced"). cgroup v2 charges that
writeback to the writer's group (`group-idle`, `iocost`); on cgroup v1 nothing does. With
flush-behind, each file the job closes after writing is written back at once from a thread
at the job's IO class, so the flusher finds nothing of it left to write.
"""

from __future__ import annotations

from ..base.errors import UsageError
from .grammar import Policy

ITEM = "flush-behind"


def split(text: str) -> tuple[str, bool]:
    """A policy text without its flush-behind item, and whether it asks for it
    (``flush-behind``, ``flush-behind=on``; ``=off`` is the same as leaving it out)."""
    rest: list[str] = []
    on, seen = False, False
    for item in text.split(","):
        key, eq, value = (part.strip() for part in item.partition("="))
        if key != ITEM:
            rest.append(item)
            continue
        if seen:
            raise UsageError(f"{ITEM} given twice in policy {text!r}", "give it once")
        if eq and value not in ("on", "off"):
            raise UsageError(f"{ITEM}={value!r} in policy {text!r}", "use on or off")
        on, seen = not eq or value == "on", True
    return ",".join(rest).strip() or "default", on


def check_class(text: str, policy: Policy, whose: str) -> None:
    """Flush-behind writes at the policy's IO class: refused, in one line, without one."""
    if policy.io is None or policy.io.klass == "none":
        why = "the policy sets none" if policy.io is None else "the class in force is none"
        raise UsageError(f"policy {text!r}: flush-behind writes {whose} files at its IO "
                         f"class, and {why}", "add io=idle (or another class)")
