"""`bench --trace`: per trial, the kernel's counters over the probe's window (PSI stalls,
context switches, interrupts) and who issued the device's IO meanwhile (probe, load,
writeback flushers, journal, others) — so a report can say *why* a cell is slow."""

from __future__ import annotations

from typing import Any

from ..kernel import procfs
from ..trace import attribution, counters
from .devices import Device
from .loads import Load
from .probes import ProbeResult


class Tracing:
    def __init__(self, device: Device, load: Load) -> None:
        self.load = load
        self.counters = counters.Window()
        self.io = attribution.IOAttribution(device.name)

    def start(self) -> None:
        self.counters.start()
        self.io.start()

    def stop(self, result: ProbeResult) -> dict[str, Any]:
        load_pids = []
        if self.load.child is not None:
            load_pids = [self.load.child.pid, *procfs.descendants_of(self.load.child.pid)]
        probe = [result.outcome.pid] if result.outcome else []
        io = self.io.stop(probe_pids=probe, load_pids=load_pids)
        return {"counters": counters.summary(self.counters.stop()),
                "io_by": {"method": io["method"], "groups": io.get("groups", {}),
                          "unattributed": io.get("unattributed")}}
