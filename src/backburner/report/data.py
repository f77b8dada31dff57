"""Loading a result database for reporting: cells with all their trials, one snapshot.

Reading never writes: the database is opened read-only and read inside one transaction, so a
database `bench` is still writing (WAL) gives one consistent snapshot, and an interrupted run
(no finished_at, cells with fewer trials) reports what it has. Every value was validated by
the store as it was read.

* A *cell* (see `backburner.store.cell`): trials of the same cell in several runs of one database
  are pooled. Load "none" is the unloaded baseline (policy "-").
* A cell's *samples* are ``wall_s`` of its counted trials (round > 0, warmup = 0) with status
  ok. Timeouts are no samples, but the statistics count each at the limit it hit
  (`timeout_limits`, see report.summary); failed and aborted trials are counted.
* Cold trials (caches dropped) are the measurement; a cell with only warm counted trials is
  reported warm.
* Trials are pooled within one machine only: a loaded cell of one machine judged against
  the idle baseline of another would be meaningless, so statistics over runs of several
  machines are refused (`ReportData.require_one_machine`); `split(by="machine")` gives each
  machine apart. A machine is its machine id (cloned lab images can share a host name),
  named by its host name.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from ..base.errors import DataError, NotFoundError, UsageError
from ..store import Filter, Run, Store, StoredCell
from ..store.cell import Cell

KNOWN_STATUSES = ("ok", "timeout", "aborted")


@dataclass
class CellData:
    """One logical cell and all its trials (warm-ups included), oldest first."""

    cell: Cell
    cell_ids: tuple[int, ...]
    run_ids: tuple[int, ...]
    trials: list[dict[str, Any]]

    @property
    def key(self) -> str:
        return self.cell.key

    @property
    def unloaded(self) -> bool:
        return self.cell.unloaded

    @property
    def label(self) -> str:
        return self.cell.label

    @property
    def counted(self) -> list[dict[str, Any]]:
        """Trials that count (not warm-ups), any status."""
        return [t for t in self.trials if not t["warmup"]]

    @property
    def mode(self) -> str:
        """"cold" if any counted trial was cold (those are then the measurement), else "warm"."""
        counted = self.counted
        if not counted or any(t["cold"] for t in counted):
            return "cold"
        return "warm"

    def mode_trials(self, mode: str | None = None) -> list[dict[str, Any]]:
        want = 1 if (mode or self.mode) == "cold" else 0
        return [t for t in self.counted if bool(t["cold"]) == bool(want)]

    def samples(self, mode: str | None = None) -> list[float]:
        return [t["wall_s"] for t in self.mode_trials(mode)
                if t["status"] == "ok" and t["wall_s"] is not None]

    def sample_trials(self, mode: str | None = None) -> list[dict[str, Any]]:
        """The trials behind `samples`, in the same order."""
        return [t for t in self.mode_trials(mode)
                if t["status"] == "ok" and t["wall_s"] is not None]

    def timeout_limits(self, mode: str | None = None) -> list[float]:
        """For each counted timeout, the limit it hit (its wall_s, else extra.limit_s)."""
        out = []
        for t in self.mode_trials(mode):
            if t["status"] == "timeout":
                limit = t["wall_s"] if t["wall_s"] is not None else t["extra"].get("limit_s")
                out.append(float(limit) if isinstance(limit, int | float) else math.nan)
        return out

    def timed_by_round(self, mode: str | None = None) -> dict[tuple[int, int], tuple[float, bool]]:
        """(run, round) -> (time, whether it is a timeout's limit), of the trials with a
        positive time: what pairs a loaded cell's rounds with its baseline's."""
        out: dict[tuple[int, int], tuple[float, bool]] = {}
        for t in self.mode_trials(mode):
            key = (int(t["run_id"]), int(t["round"]))
            wall = t["wall_s"]
            if t["status"] == "ok" and wall is not None and wall > 0:
                out[key] = (float(wall), False)
            elif t["status"] == "timeout":
                limit = wall if wall is not None else t["extra"].get("limit_s")
                if isinstance(limit, int | float) and math.isfinite(limit) and limit > 0:
                    out[key] = (float(limit), True)
        return out

    def count(self, status: str, mode: str | None = None) -> int:
        return sum(1 for t in self.mode_trials(mode) if t["status"] == status)

    def failed(self, mode: str | None = None) -> int:
        """Failed trials and any status we do not know."""
        return sum(1 for t in self.mode_trials(mode) if t["status"] not in KNOWN_STATUSES)

    def warm_reference(self) -> list[dict[str, Any]]:
        """Warm trials for the not-cold check: counted warm ones, else the warm-ups that ran
        warm (bench runs round 0 without dropping caches)."""
        ok = [t for t in self.mode_trials("warm") if t["status"] == "ok"]
        return ok or [t for t in self.trials if t["warmup"] and not t["cold"]
                      and t["status"] == "ok"]

    @staticmethod
    def blocks(trials: list[dict[str, Any]]) -> list[float]:
        return [float(t["in_blocks"]) for t in trials if t.get("in_blocks") is not None]

    def throughput(self, field_name: str) -> list[float]:
        """Background device throughput (bytes/s) of counted ok/timeout trials that have it."""
        return [float(t[field_name]) for t in self.mode_trials()
                if t["status"] in ("ok", "timeout") and t[field_name] is not None]


@dataclass
class ReportData:
    """Everything `load` read: runs, cells in display order, and the file's schema version."""

    path: str
    schema_version: int
    runs: list[Run]
    cells: list[CellData]
    read_at: float
    #: derived results (summary rows per tolerance), computed once per report
    cache: dict[Any, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def finished(self) -> bool:
        return all(r.finished_at is not None for r in self.runs)

    @property
    def asked_tolerance(self) -> float | None:
        """The band every run was decided with, when each asked the same one by
        --tolerance (else None: the band a person notices). A later report judges by it
        unless told otherwise, so that it says what the run's own table said and does not
        call undecided a cell the run stopped as decided, or the other way round."""
        asked = {r.config.get("tolerance") for r in self.runs}
        value = asked.pop() if len(asked) == 1 else None
        return float(value) if isinstance(value, int | float) else None

    @property
    def probes(self) -> list[str]:
        return list(dict.fromkeys(c.cell.probe for c in self.cells))

    @property
    def devices(self) -> list[str]:
        return list(dict.fromkeys(c.cell.device for c in self.cells))

    @property
    def policies(self) -> list[str]:
        return list(dict.fromkeys(c.cell.policy for c in self.cells))

    @property
    def machines(self) -> dict[str, str]:
        """Machine key -> how to name it, in order of first appearance."""
        return machine_labels(self.runs)

    def require_one_machine(self) -> None:
        """UsageError when the runs come from several machines: their trials must not be
        pooled into one cell."""
        machines = self.machines
        if len(machines) > 1:
            raise UsageError(
                f"{self.path} holds runs of {len(machines)} machines "
                f"({', '.join(machines.values())}): a report pools the trials of one",
                "pick one with --machine (its host name, or 6+ characters of its machine id), "
                "or compare them with `backburner compare --by machine`")

    @property
    def multi(self) -> bool:
        """More than one probe or device: tables then name them in every row."""
        return len(self.probes) > 1 or len(self.devices) > 1

    @property
    def trial_count(self) -> int:
        return sum(len(c.trials) for c in self.cells)

    def cell(self, key: str) -> CellData:
        for c in self.cells:
            if c.key == key:
                return c
        raise KeyError(key)

    def unprotected_of(self, cell: CellData) -> CellData | None:
        """The same load at policy default (nothing done to it) on the same scheduler."""
        want = replace(cell.cell, policy="default")
        return next((c for c in self.cells if c.cell == want), None)

    def baseline_of(self, cell: CellData) -> CellData | None:
        if cell.unloaded:
            return None
        want = cell.cell.baseline()
        for c in self.cells:
            if c.cell == want:
                return c
        return None


def load(path: str, selection: Filter | None = None) -> ReportData:
    """Read a result database (read-only, one snapshot), or the runs of it `selection`
    picks. DataError if nothing is counted yet."""
    store = Store.open(path, readonly=True)
    try:
        with store.snapshot():
            runs = store.runs(selection)
            ids = [r.id for r in runs] if selection is not None else None
            cells = store.cells(run_ids=ids)
            trials = store.trials(include_warmup=True, run_ids=ids)
        version = store.schema_version
    finally:
        store.close()
    if selection is not None and not runs:
        raise NotFoundError(f"{path} has no run that matches {selection.describe()}",
                            "its runs: backburner report DB --format json (runs[].id)")
    return assemble(path, version, runs, cells, trials)


def assemble(path: str, version: int, runs: list[Run], cells: list[StoredCell],
             trials: list[dict[str, Any]]) -> ReportData:
    """ReportData from stored rows: trials of the same cell in several runs pooled."""
    counted = sum(1 for t in trials if not t["warmup"])
    if not counted:
        what = (f"only {len(trials)} warm-up trial{'s' if len(trials) != 1 else ''}"
                if trials else "no trials")
        raise DataError(f"{path} has no counted trials yet ({what})",
                        "let `backburner bench` run at least one round past the warm-up")
    by_key: dict[str, CellData] = {}
    cell_key = {}
    for c in cells:
        cell_key[c.id] = c.key
        if c.key not in by_key:
            by_key[c.key] = CellData(c.cell, (), (), [])
        d = by_key[c.key]
        d.cell_ids += (c.id,)
        if c.run_id not in d.run_ids:
            d.run_ids += (c.run_id,)
    for t in trials:
        key = cell_key.get(t["cell_id"])
        if key is not None:
            by_key[key].trials.append(t)
    return ReportData(path, version, runs, display_order(list(by_key.values())), time.time())


def machine_of(run: Run) -> str:
    """A machine's identity: its machine id, else (a database from before machine ids) its
    host name."""
    return run.machine_id or f"host:{run.hostname}"


def machine_labels(runs: Iterable[Run]) -> dict[str, str]:
    """Machine key -> its host name, with its id where machines share a host name."""
    names: dict[str, str] = {}
    for run in runs:
        names.setdefault(machine_of(run), run.machine)
    shared = Counter(names.values())
    return {key: f"{name} ({key[:12]})" if shared[name] > 1 and not key.startswith("host:")
            else name for key, name in names.items()}


def split(data: ReportData, by: str) -> list[tuple[str, ReportData]]:
    """The data of each machine, kernel or run apart, in order of first appearance: for
    `compare --by`, one group against another with the same statistics."""
    labels = machine_labels(data.runs)

    def group_of(run: Run) -> str:
        if by == "machine":
            return labels[machine_of(run)]
        return {"kernel": run.kernel, "run": f"run {run.id}"}[by]

    groups: dict[str, list[Run]] = {}
    for run in data.runs:
        groups.setdefault(group_of(run), []).append(run)
    out = []
    for label, runs in groups.items():
        ids = {r.id for r in runs}
        cells = [CellData(c.cell, c.cell_ids, tuple(r for r in c.run_ids if r in ids),
                          [t for t in c.trials if t["run_id"] in ids]) for c in data.cells]
        cells = [c for c in cells if c.trials]
        out.append((label, ReportData(f"{data.path} ({by} {label})", data.schema_version,
                                      runs, cells, data.read_at)))
    return out


def display_order(cells: list[CellData]) -> list[CellData]:
    """Probe, device, scheduler as first seen; unloaded first; then loads and policies as seen."""
    def index(values: Iterable[str]) -> dict[str, int]:
        return {v: i for i, v in enumerate(dict.fromkeys(values))}

    probe = index(c.cell.probe for c in cells)
    device = index(c.cell.device for c in cells)
    sched = index(c.cell.scheduler for c in cells)
    prepare = index(c.cell.prepare for c in cells)
    load_ = index(c.cell.load for c in cells)
    policy = index(c.cell.policy for c in cells)
    return sorted(cells, key=lambda c: (probe[c.cell.probe], device[c.cell.device],
                                        sched[c.cell.scheduler], prepare[c.cell.prepare],
                                        not c.unloaded, load_[c.cell.load],
                                        policy[c.cell.policy]))
