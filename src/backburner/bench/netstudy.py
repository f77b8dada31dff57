"""The network study's `executor.Executor`: a bench run over the namespace testbed's slow
link (`net.testbed`), with real packets.

`open()` builds the testbed for the link (three namespaces, the token bucket and its queue),
starts its HTTP server and makes the cgroup v2 group a protected load's downloads run in,
all in one `system.Transaction` undone when it ends (or by `restore` after a SIGKILL). Per
trial, as the runner says:

* a load is N downloads of the server's endless bulk file, each a client process in the
  client namespace that reports its own bytes and time when stopped: their sum over the
  whole run is the bulk work's speed, as a disk load's bytes are;
* under the ``background`` policy the downloads run in the group, and the policy is put on
  the client's link for as long as they run (`net.policy.background`, in a transaction
  of its own, so every load run starts from the same state, as `run --net background`
  would for a job), its pacer stopped before the policy is taken away;
* a probe is one run of the client's probe in the client namespace, timed by the client
  itself (the page fetch, or the handshake's round trip) so the interpreter's start is
  not in the figure; a figure over the trial's limit is a timeout at that limit;
* the "background traffic" around the probe is the client link's own counters: bytes
  received and sent in the probe's window, the probe's page taken out.

There is no cache to drop and one queue discipline (the link's), so those calls do nothing.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from .. import spawn, system, systemd
from ..base import interrupts
from ..base.errors import SystemStateError
from ..kernel import cgroups, procfs
from ..net import background, netcls, policy, tcpopts, testbed
from ..store.cell import Cell
from .executor import Measurement
from .netplan import QUEUE, NetPlan
from .prepare import StepResult
from .probes import ProbeResult

log = logging.getLogger(__name__)

#: How long the client's interpreter may take to start, beyond a probe's limit.
START_SLACK_S = 5.0
#: A download runs until stopped; this only bounds one that is never stopped.
DOWNLOAD_S = 86_400
#: How long a stopped download may take to print its figures.
STOP_GRACE_S = 10.0
#: How long the link may take to empty its queues after a load stops, and how often it
#: is looked at (a full frame takes 12 ms at 1 Mbit/s).
DRAIN_MAX_S, DRAIN_POLL_S = 30.0, 0.05
TAIL_LINES, TAIL_CHARS = 5, 600  # as much of a failed client's stderr as of a probe's


def preflight(plan: NetPlan) -> None:
    """What the study needs of this machine, before anything changes: root, the qdiscs of
    the link (netem for a delay: one line and 69 where the kernel lacks it), and for the
    background policy what it needs (cgroup v2 or, where only v1 is mounted, net_cls;
    htb; the programs)."""
    system.require_root("bench --net-link (network namespaces, qdiscs)")
    testbed.check(plan.link)
    if "background" not in plan.policies:
        return
    if background.attribution() == "net_cls":
        background.require_net_cls("the background policy")
        return
    background.require_kernel("the background policy", tcpopts.low_priority_cc())


def _by_attribution(attribution: str) -> dict[str, Any]:
    """The policy as `run --net` puts it: by cgroup v2, with TCP-LP for the load's sockets
    where the kernel has it; by net_cls class id, the ACKs alone (`netcls`)."""
    if attribution == "net_cls":
        return {"attribution": attribution}
    return {"cc": tcpopts.low_priority_cc()}


def _client(bed: testbed.Testbed, args: list[str], procs: tuple[str, ...] = ()) -> spawn.Child:
    """`net.client` in the client namespace, its stdout and stderr piped (both short)."""
    return spawn.launch(spawn.python_module("backburner.net.client", *args),
                        netns=bed.client_netns_path, stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, cgroup_procs=procs, new_group=True,
                        die_with_parent=True)


def _figures(child: spawn.Child) -> tuple[dict[str, Any] | None, list[str]]:
    """An ended client's JSON line, or None and its last lines of stderr."""
    assert child.popen.stdout is not None and child.popen.stderr is not None
    out = child.popen.stdout.read().decode(errors="replace")
    err = child.popen.stderr.read().decode(errors="replace")
    try:
        return json.loads(out.strip().splitlines()[-1]), []
    except (IndexError, ValueError):
        lines = [ln[:TAIL_CHARS] for ln in err.strip().splitlines()[-TAIL_LINES:]]
        ended = child.outcome.describe() if child.outcome else "it did not end"
        return None, lines or [f"it printed no figures: {ended}"]


class NetExecutor:
    """The testbed, its server, downloads and probes, as `executor.Executor` says."""

    def __init__(self, plan: NetPlan, warn: Callable[[str], None]) -> None:
        self.plan = plan
        self.warn = warn
        self._bed: testbed.Testbed | None = None
        self._server: spawn.Child | None = None
        self._group = ""
        self._running: dict[str, list[spawn.Child]] = {}
        self._started: dict[str, float] = {}
        self._policy: ExitStack | None = None
        self._applied: policy.Applied | None = None

    @property
    def bed(self) -> testbed.Testbed:
        assert self._bed is not None, "use the executor inside open()"
        return self._bed

    # --- set-up -------------------------------------------------------------------------

    @contextmanager
    def open(self) -> Iterator[dict[str, Any]]:
        with system.Transaction("bench-net") as tx:
            try:
                log.debug("phase: testbed")
                self._bed = bed = testbed.build(tx, self.plan.link)
                self._server = testbed.start_server(bed)
                if "background" in self.plan.policies:
                    self._group = self._load_group(tx)
                yield self._facts()
            finally:
                with interrupts.held():  # a second ^C must not skip the policy's undo
                    for load in list(self._running):
                        for child in self._running.pop(load):
                            child.stop_tree(2.0)
                    self._end_policy()  # before the testbed and the group go
                    self._bed = None

    def _facts(self) -> dict[str, Any]:
        link = self.plan.link
        return {"name": self.plan.device, "kind": "net-link", "rate_bit": link.rate_bit,
                "delay_ms": link.delay_ms, "buffer_ms": link.buffer_ms,
                "buffer_bytes": link.buffer_bytes, "queue": QUEUE, "qdisc": "tbf",
                "server_cc": testbed.SERVER_CC, "page_bytes": testbed.PAGE_BYTES,
                "namespaces": [self.bed.server_ns, self.bed.router_ns, self.bed.client_ns]}

    # --- per trial ----------------------------------------------------------------------

    def check_alive(self) -> None:
        if self._server is None or self._server.poll() is not None:
            raise SystemStateError("the testbed's HTTP server has ended")

    def prepare_trial(self, cell: Cell) -> StepResult | None:
        return None  # a network study has no --prepare (netplan refuses it)

    def use_scheduler(self, scheduler: str) -> None:
        pass  # the link's one queue discipline, built with the testbed

    def drop_caches(self) -> None:
        pass  # a network study runs warm: nothing of it is cached

    @staticmethod
    def _load_group(tx: system.Transaction) -> str:
        """The downloads' group, which the policy's programs go on: below the cgroup v2
        root (where only v1 is mounted, a net_cls group, `netcls`); or where systemd owns
        the tree, in a scope it delegates to bench, bench itself
        moved into a sibling (`probe`: a group with children holds no processes), so
        nothing is made or attached behind systemd's back."""
        root = cgroups.unified_root()
        owner = procfs.owner_tag(os.getpid())
        if root is None:  # only cgroup v1 (checked before): the net_cls group
            return netcls.group(tx, f"bench-{owner}")
        if not systemd.manages_cgroups(systemd.read_facts()):
            group = os.path.join(root, f"backburner-bench-net-{owner}")
            tx.apply(system.CgroupDir(group))
            return group
        top = tx.apply(system.DelegatedScope(f"backburner-bench-net-{owner}.scope",
                                             os.getpid()))
        probe, group = os.path.join(top, "probe"), os.path.join(top, "downloads")
        tx.apply(system.CgroupDir(probe))
        tx.apply(system.CgroupMove(os.getpid(), probe))
        tx.apply(system.CgroupDir(group))
        return group

    def weight_raising_s(self, scheduler: str) -> float:
        return 0.0

    def start_load(self, cell: Cell) -> None:
        load = self.plan.loads[cell.load]
        for child in self._running.pop(cell.load, []):  # a block's load that died: restarted
            child.stop_tree(1.0)
        self._end_policy()
        procs: tuple[str, ...] = ()
        if cell.policy == "background":
            self._start_policy(upload=load.kind == "upload")
            procs = (cgroups.procs_file(self._group),)
        self._started[cell.load] = time.monotonic()
        self._running[cell.load] = [
            _client(self.bed, [load.kind, testbed.SERVER_ADDR, str(testbed.PORT),
                               str(DOWNLOAD_S)], procs)
            for _ in range(load.count)]

    def _start_policy(self, upload: bool = False) -> None:
        """The policy as `run --net` puts it: for uploads with the uplink's rate known (the
        link's), and TCP-LP for the load's sockets where the kernel has it."""
        stack = ExitStack()
        try:
            tx = stack.enter_context(system.Transaction("bench-net-policy"))
            self._applied = applied = policy.background(
                tx, self.bed.client_ns, self.bed.client_dev, self.plan.link, self._group,
                uplink_bit=self.plan.link.rate_bit if upload else None,
                **_by_attribution(background.attribution()))
            stack.callback(policy.stop, applied)  # the pacer ends before its class goes
        except BaseException:
            stack.close()
            raise
        self._policy = stack

    def _end_policy(self) -> dict[str, int]:
        """Take the policy off the link; what its paced class sent, as proof it acted."""
        if self._policy is None:
            return {}
        stack, self._policy = self._policy, None
        applied, self._applied = self._applied, None
        try:
            sent = policy.bulk_counters(applied) if applied is not None else (0, 0)
            up = (policy.bulk_counters(applied, policy.UPLOAD_CLASS)
                  if applied is not None and applied.uplink else None)
        finally:
            stack.close()
        out = {"paced_bytes": sent[0], "paced_packets": sent[1]}
        if up is not None:  # the upload's data, behind everything else
            out |= {"upload_bytes": up[0], "upload_packets": up[1]}
        return out

    def settle(self, load: str, seconds: float) -> None:
        time.sleep(seconds)
        for child in self._running.get(load, []):
            if child.poll() is not None:
                _, tail = _figures(child)
                raise SystemStateError(f"load {load!r} ended during settling: {tail[-1]}")

    def load_alive(self, load: str) -> bool:
        children = self._running.get(load, [])
        return bool(children) and all(c.poll() is None for c in children)

    def stop_load(self, load: str) -> dict[str, Any]:
        """Stop the downloads (each prints its bytes and time) and take the policy off;
        the bytes of all of them over the time they ran is the bulk work's speed."""
        children = self._running.pop(load, [])
        kind = self.plan.loads[load].kind
        ended = [c.poll() for c in children]  # ended by itself: a failure
        for c in children:
            c.signal(signal.SIGTERM)
        failure: list[str] = []
        total, seconds = 0.0, 0.0
        try:
            for child, before in zip(children, ended, strict=True):
                if child.wait(STOP_GRACE_S) is None:
                    child.stop_tree(1.0)
                got, tail = _figures(child)
                if got is None or before is not None:
                    failure = failure or tail or [f"a {kind} ended by itself"]
                    continue
                total += float(got["bytes"])
                seconds = max(seconds, float(got["seconds"]))
        finally:
            paced = self._end_policy()
        ran = time.monotonic() - self._started.pop(load, time.monotonic())
        out: dict[str, Any] = {"unit": "bytes", "units": total,
                               "seconds": seconds or max(ran, 1e-9),
                               f"{kind}s": len(children), **paced,
                               "drain_s": self._drain()}
        if failure:
            out["failure"] = failure
        return out

    def _drain(self) -> float:
        """Wait until the link's queues are empty (the stopped downloads' last packets
        gone), so the next trial starts on an idle link, as a cold trial starts from an
        empty cache; how long it took."""
        t0 = time.monotonic()
        ports = [f"{self.bed.router_ns}{i}" for i in (0, 1)]
        quiet = 0
        while quiet < 2 and time.monotonic() - t0 < DRAIN_MAX_S:
            busy = sum(system.qdisc_backlog(self.bed.router_ns, p) for p in ports)
            quiet = quiet + 1 if busy == 0 else 0
            if quiet < 2:
                time.sleep(DRAIN_POLL_S)
        if quiet < 2:
            self.warn(f"the link's queue did not empty within {DRAIN_MAX_S:g} s after a "
                      "load stopped: the next trial starts on a busy link")
        return time.monotonic() - t0

    def measure(self, cell: Cell, limit_s: float) -> Measurement:
        """One probe: the client's own figure, a timeout past `limit_s`, and the client
        link's traffic in its window (the probe's page taken out)."""
        probe = self.plan.probes[cell.probe]
        before = system.link_counters(self.bed.client_ns, self.bed.client_dev)
        t0 = time.monotonic()
        child = _client(self.bed, ["probe", testbed.SERVER_ADDR, str(testbed.PORT), "1", "0"])
        outcome = child.wait(limit_s + START_SLACK_S)
        if outcome is None:
            child.stop_tree(1.0)
        window = max(time.monotonic() - t0, 1e-9)
        after = system.link_counters(self.bed.client_ns, self.bed.client_dev)
        moved = (max(0, after[0] - before[0] - testbed.PAGE_BYTES), after[1] - before[1])
        got, tail = _figures(child)
        if outcome is None:
            return Measurement(ProbeResult("timeout", None, limit_s), window, moved, {}, tail)
        if got is None or not outcome.ok:
            return Measurement(ProbeResult("failed", None, window), window, moved, {}, tail)
        figures = {"fetch_s": got["fetch_s"][0], "connect_s": got["connect_s"][0]}
        wall = float(figures[probe.figure])
        if wall > limit_s:
            return Measurement(ProbeResult("timeout", None, limit_s, {"net": figures}),
                               window, moved)
        return Measurement(ProbeResult("ok", None, wall, {"net": figures}), window, moved)
