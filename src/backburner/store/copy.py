"""`store copy`: push the runs of one database into another (an offline run into the lab's
PostgreSQL), idempotently.

A run is recognised by its uuid: one already there is completed with the trials it lacks
(a run copied while unfinished, then finished offline), never duplicated; a trial is
recognised by (cell key, round). Copying the same database twice adds nothing the second
time, and says so.

So a copy stopped at any moment (^C, a lost server, SIGKILL) is finished by running it
again: every trial is committed on its own, a new destination file appears only with its
whole schema (`SqliteBackend.create`), and a shared one gets its schema in one transaction.
A run's finish time is copied last, so a run copied in part shows as unfinished.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .base import Store


@dataclass
class CopyResult:
    runs_added: int = 0
    runs_completed: int = 0
    runs_unchanged: int = 0
    trials_added: int = 0
    trials_present: int = 0
    notes: list[str] = field(default_factory=list)


def copy(src: Store, dst: Store, report: Callable[[str], None] = lambda _m: None
         ) -> CopyResult:
    out = CopyResult()
    for run in src.runs():
        existing = dst.run_by_uuid(run.uuid)
        if existing is None:
            run_id = dst.add_run(run.command, run.config, run.seed, run.environment,
                                 run.tool_version, run_uuid=run.uuid, machine=run.machine_id,
                                 hostname=run.hostname, started_at=run.started_at)
        else:
            run_id = existing.id
            dst.lock_run(existing)
        done = dst.done_keys(run_id)
        cells = {c.id: c for c in src.cells(run.id)}
        ids = {c.key: dst.add_cell(run_id, c.cell) for c in cells.values()}
        added = 0
        for t in src.trials(include_warmup=True, run_ids=[run.id]):
            key = cells[t["cell_id"]].key
            if (key, t["round"]) in done:
                out.trials_present += 1
                continue
            dst.add_trial(run_id, ids[key], **{k: t[k] for k in t
                                               if k not in ("id", "run_id", "cell_id")})
            added += 1
        if run.finished_at is not None and (existing is None or existing.finished_at is None):
            dst.finish_run(run_id, at=run.finished_at)
        out.trials_added += added
        if existing is None:
            out.runs_added += 1
            report(f"run {run.uuid[:12]} ({run.machine}): added with {added} trials")
        elif added:
            out.runs_completed += 1
            report(f"run {run.uuid[:12]} ({run.machine}): {added} trials it lacked added")
        else:
            out.runs_unchanged += 1
            report(f"run {run.uuid[:12]} ({run.machine}): already there, nothing to add")
    return out
