"""`backburner status` as text (one block per process or file) and as JSON. Every text line
goes out through `units.one_line`: a process's name and command line are its owner's
choice, and must neither drive the terminal nor forge a line."""

from __future__ import annotations

import json
import time
from dataclasses import asdict

from ..base.quantities import one_line
from .sources import Entry, View

FORMAT = 1


def _clock(epoch: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch)) if epoch else "?"


def _block(e: Entry) -> list[str]:
    head = f"{e.source:<10} {e.what}, by {e.by}, since {_clock(e.since)}"
    lines = [head, f"{'':<10} set       {e.sets}"]
    if e.in_force is not None:
        lines.append(f"{'':<10} in force  {e.in_force.describe()}")
    for d in e.differs:
        lines.append(f"{'':<10} DIFFERS   {d}")
    for n in e.notes:
        lines.append(f"{'':<10} {'':<9} {n}")
    return lines


def render(view: View) -> str:
    processes = sum(1 for e in view.entries if e.pid is not None)
    files = len(view.entries) - processes
    differ = sum(1 for e in view.entries if e.differs)
    if view.entries:
        lines = [f"On the back burner: {processes} process"
                 f"{'es' if processes != 1 else ''}, {files} file{'s' if files != 1 else ''}"
                 f" of apply; {differ} differ{'s' if differ == 1 else ''} from what was set"]
        for e in view.entries:
            lines += ["", *_block(e)]
    else:
        lines = ["Nothing is on the back burner: no `run` job, no tree of `run --pid`, "
                 "no process governed by a running `govern`, no file of `apply`."]
    if view.disks:
        lines += ["", "disks (the IO scheduler in force): "
                  + ", ".join(f"{d.name} {d.scheduler}" for d in view.disks)]
    lines += [f"note: {n}" for n in view.notes]
    return "\n".join(one_line(line) for line in lines) + "\n"


def render_json(view: View) -> str:
    """docs/reference/cli.md describes the fields; `format` changes when a field changes meaning."""
    return json.dumps({"format": FORMAT, **asdict(view)}, indent=1) + "\n"
