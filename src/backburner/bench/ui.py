"""Progress display for bench: current cell, trials done, ETA, last sample (rich).

No threads: rich's auto-refresh thread would run while spawn forks children that run Python
code before exec (a pre-exec hook), which can deadlock on a lock that thread held at the
fork. The bar is redrawn by the reporter itself, after every slot.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)

from .runner import Progress as BenchProgress
from .runner import Reporter


@contextmanager
def progress_bar(console: Console | None = None, enabled: bool = True) -> Iterator[Reporter]:
    if not enabled:  # --quiet
        yield lambda _p: None
        return
    console = console or Console(stderr=True)
    # the time left is the runner's estimate (`Progress.left_text`): rich's own would
    # divide by a total that shrinks as decided cells skip their slots
    bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn(), TextColumn("{task.fields[left]}"),
                   TextColumn("last: {task.fields[last]}"), console=console,
                   transient=False, disable=not console.is_terminal, auto_refresh=False)
    task = None
    printed = -1
    told = 0

    def report(p: BenchProgress) -> None:
        nonlocal task, printed, told
        left = p.left_text()
        if task is None:
            task = bar.add_task(p.cell, total=p.total, completed=p.done, last="-", left=left)
        bar.update(task, description=p.cell[:48], total=p.total, completed=p.done,
                   last=p.last or "-", left=left, refresh=True)
        if not console.is_terminal and p.done != printed and p.last:
            printed = p.done  # plain log lines where no live bar can be drawn (CI, pipes)
            print(f"[{p.done}/{p.total}, {left}] {p.cell}: {p.last}", file=sys.stderr,
                  flush=True)
        for event in p.events[told:]:
            if console.is_terminal:
                bar.console.print(f"bench: {event}", markup=False, highlight=False)
            else:
                print(f"backburner: bench: {event}", file=sys.stderr, flush=True)
        told = len(p.events)

    with bar:
        yield report
