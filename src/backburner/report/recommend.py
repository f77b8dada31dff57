"""From numbers to a decision (`report --recommend`, and the HTML report's conclusion).

For every load (per probe, device and preparation; an IO scheduler's tunables measured as
setup variants are levers of the same comparison, not preparations): the cells that are
Pareto-best for start-up time (the loaded median itself, lower is better) against the bulk
work's own speed (relative to the same load unprotected, higher is better); the recommended
scheduler and policy with its evidence and uncertainty; the exact commands that apply it
(`run`, `apply`, a `govern` rule); and what this machine limits, with the reason. Pure:
summary rows and the run's recorded environment in, recommendations out.

A tunable is recommended only where it beats the scheduler's own values by more than the
band a person notices: among cells that close, the one without tunables is taken.

Cells are ranked by the time a user waits, not by each one's ratio to its own scheduler's
unloaded time: the schedulers' unloaded times differ, so bfq at 1.05x its unloaded 2.0 s
(2.1 s) must not beat mq-deadline at 1.10x its unloaded 1.0 s (1.1 s). A median that
timeouts reach (only a lower bound) ranks last.
"""

from __future__ import annotations

import json
import math
import shlex
from dataclasses import dataclass, field

from .. import stats
from ..base.errors import DataError, UsageError
from ..base.quantities import fmt_factor, fmt_ratio_ci, fmt_s, one_line
from ..kernel.priorities import IOPrio
from ..policy import flush_behind, grammar
from ..policy import throttle as throttlepolicy
from ..store.cell import GOVERNED, GOVERNED_RULE_POLICY
from .data import ReportData
from .summary import Row, summary_rows
from .words import median_text, median_value_text

#: Where a rule for the govern daemon goes (docs/guide/govern.md).
RULES_FILE = "/etc/backburner/rules.d/bulk-work.toml"

BUFFERED_WRITERS = ("install-loop", "copy", "writers:", "cmd:")
NO_PRIORITIES = {"none": "none", "kyber": "kyber"}


#: A setup variant's name -> (scheduler, "KEY=VALUE,..."): the ones that set tunables.
Tunes = dict[str, tuple[str, str]]


@dataclass(frozen=True)
class Recommendation:
    probe: str
    device: str
    prepare: str
    load: str
    best: Row
    pareto: tuple[Row, ...]
    evidence: str
    commands: tuple[str, ...]
    govern_rule: str
    limits: tuple[str, ...] = field(default=())
    #: the comparison the user came for, in one sentence (`headline`)
    headline: str = ""
    #: the setup variants among the cells that set a scheduler's tunables (`tunes`)
    tuned: Tunes = field(default_factory=dict)

    @property
    def title(self) -> str:
        where = f"{self.probe} on {self.device}"
        prep = "" if self.prepare == "none" else f", prepared with {self.prepare}"
        return f"under load {self.load} ({where}{prep})"


def _start(r: Row) -> float:
    """The loaded median: what the user waits for (a lower bound only: last)."""
    if r.median is None or r.median_lower_bound:
        return math.inf
    return r.median


def _bulk(r: Row) -> float | None:
    if r.bulk is None:
        return None
    if r.cell.policy == "default":
        return 1.0
    return r.bulk.ratio.ratio if r.bulk.ratio else None


def pareto(rows: list[Row]) -> list[Row]:
    """Rows no other row beats on both start-up time (lower) and bulk speed (higher);
    without bulk figures, on start-up alone."""
    def dominated(r: Row) -> bool:
        for o in rows:
            if o is r:
                continue
            ob, rb = _bulk(o), _bulk(r)
            if ob is None or rb is None:
                if _start(o) < _start(r):
                    return True
                continue
            if _start(o) <= _start(r) and ob >= rb and (_start(o) < _start(r) or ob > rb):
                return True
        return False

    return sorted((r for r in rows if not dominated(r)), key=_start)


def tunes(data: ReportData) -> Tunes:
    """The setup variants that are an IO scheduler's tunables, as the runs recorded them
    (bench's `--setup-variant-tune NAME=SCHEDULER:KEY=VALUE,...`, "tune:" before it)."""
    out: Tunes = {}
    for run in data.runs:
        for text in run.config.get("prepares") or []:
            mode, _, rest = str(text).partition(":")
            name, _, spec = rest.partition("=")
            scheduler, _, items = spec.partition(":")
            if mode == "tune" and name and items:
                out[name] = (scheduler, items)
    return out


def lever(r: Row, tuned: Tunes | None = None) -> str:
    """'bfq + io=idle', or with tunables 'bfq (slice_idle=16) + io=idle'."""
    tune = (tuned or {}).get(r.cell.prepare)
    return f"{r.cell.scheduler}{f' ({tune[1]})' if tune else ''} + {r.cell.policy}"


def choose(rows: list[Row], tolerance: float | None = None,
           tuned: Tunes | None = None) -> Row:
    """The lowest start-up time; among cells within the band of it (``tolerance`` when
    given, else the band the fastest cell's verdict was judged against: what a person would
    not notice), the one whose bulk work keeps the most of its speed; a cell with tunables
    only where none without is that close (a tunable within the band of the scheduler's own
    values buys nothing a person would notice)."""
    fastest = min(rows, key=_start)
    best = _start(fastest)
    if tolerance is None:
        tolerance = float(fastest.verdict_params.get("tolerance", stats.NOTICEABLE_FRACTION))
    close = [r for r in rows if _start(r) <= best * (1 + tolerance)]
    close = [r for r in close if r.cell.prepare not in (tuned or {})] or close
    return max(close, key=lambda r: (_bulk(r) or 0.0, -_start(r)))


def evidence(r: Row, rows: list[Row], tuned: Tunes | None = None) -> str:
    """`rows` without tunables: what "BFQ alone" is compared on."""
    parts = [f"{lever(r, tuned)}: start-up {median_text(r)} s"
             + (f", {fmt_ratio_ci(r.ratio)} its unloaded time" if r.ratio else "")]
    if r.bulk is not None and r.cell.policy != "default" and r.bulk.ratio is not None:
        parts.append(f"bulk work at {fmt_ratio_ci(r.bulk.ratio)} of its unprotected speed")
    elif r.bulk is not None and r.cell.policy == "default":
        parts.append("bulk work unprotected (full speed)")
    defaults = {x.cell.scheduler: x for x in rows if x.cell.policy == "default"
                and x.median_ci and not math.isinf(x.median_ci[1])}
    if "bfq" in defaults and len(defaults) > 1:
        others = [x for s, x in defaults.items() if s != "bfq"]
        bfq, other = defaults["bfq"], min(others, key=_start)
        assert bfq.median_ci and other.median_ci
        both = (f"{fmt_s(bfq.median)} s with BFQ alone vs {fmt_s(other.median)} s on "
                f"{other.cell.scheduler}")
        if bfq.median_ci[1] < other.median_ci[0]:
            parts.append(f"BFQ alone helps: {both}")
        elif bfq.median_ci[0] > other.median_ci[1]:
            parts.append(f"BFQ alone is slower here: {both}")
        else:  # overlapping intervals: no difference shown, which is not "no difference"
            parts.append(f"BFQ alone not shown to differ: {both} (intervals overlap)")
    return "; ".join(parts)


def commands(r: Row, rotational: str | None = None,
             tuned: Tunes | None = None) -> tuple[str, ...]:
    """Shell lines (a comment after "   # "); a governed cell is applied by the daemon and
    its rule, not by a policy `run` or `apply` would refuse; a network study's background
    policy by `run --net` (its queue is the link's, not this machine's to set). The
    scheduler rule is for the class of disk measured (`rotational`: the device's flag as
    the run recorded it; apply's rule is for rotational disks unless told); a cell measured
    with tunables gets the writes that set them (which no rule of `apply` keeps)."""
    if r.cell.network:
        return (f"backburner run --net {shlex.quote(r.cell.policy)} -- "
                "YOUR-DOWNLOAD-COMMAND",) if r.cell.policy != "default" else ()
    devices = " --devices non-rotational" if rotational == "0" else ""
    out = [f"backburner apply --scheduler {shlex.quote(r.cell.scheduler)}{devices}   # the "
           "IO scheduler, for matching disks (a udev rule)"]
    if tune := (tuned or {}).get(r.cell.prepare):
        for item in tune[1].split(","):
            key, _, value = item.strip().partition("=")
            out.append(f"echo {shlex.quote(value)} > /sys/block/DEV/queue/iosched/{key}   # "
                       f"{tune[0]}'s tunable as measured, until the next boot")
    if r.cell.policy == GOVERNED or _throttle(r.cell.policy) is not None:
        out.append(f"backburner govern check   # with the govern rule below in {RULES_FILE}")
        out.append("backburner govern run   # the daemon; or its systemd unit "
                   "(docs/guide/govern.md)")
    elif r.cell.policy != "default":
        out.append(f"backburner run --policy {shlex.quote(r.cell.policy)} -- "
                   "YOUR-BULK-COMMAND")
        if not _flush_behind(r.cell.policy):  # a unit's drop-in has no one to write back
            out.append(f"backburner apply --unit YOUR-UPDATER.service --policy "
                       f"{shlex.quote(r.cell.policy)}   # for a systemd unit")
    return tuple(out)


def rule_policy(policy: str) -> str:
    """The policy a govern rule names for a cell's policy: the governed cells' is the one
    bench's rule gave them; a throttled one's without its throttle (a rule's `throttle`
    key and govern's `[throttle]` table carry that); unprotected cells get the usual
    background."""
    if policy == GOVERNED:
        return GOVERNED_RULE_POLICY
    if _flush_behind(policy):  # the rule's own key carries it
        policy = flush_behind.split(policy)[0]
    if _throttle(policy) is not None:
        return throttlepolicy.split(policy)[0]
    return policy if policy not in ("default", "-") else "background"


def _flush_behind(policy: str) -> bool:
    try:
        return flush_behind.split(policy)[1]
    except UsageError:
        return False


def _throttle(policy: str) -> throttlepolicy.Spec | None:
    """The throttle of a cell's policy text (only govern applies one)."""
    try:
        return throttlepolicy.split(policy)[1]
    except UsageError:
        return None


def _rule_io_idle(policy: str) -> bool:
    try:
        return grammar.parse_policy(policy).io == IOPrio("idle")
    except UsageError:
        return False


#: Where the printed govern rule goes (govern's rules directory, docs/guide/govern.md).
RULE_FILE = "/etc/backburner/rules.d/bulk-work.toml"


def govern_rule(r: Row) -> str:
    """The rule that applies the recommendation automatically; none when it is to leave
    the bulk work unprotected."""
    if r.cell.policy == "default" or r.cell.network:  # no rule applies a network policy
        return ""
    policy = json.dumps(rule_policy(r.cell.policy))  # a TOML basic string
    rule = ("[[rule]]\n"
            'name = "bulk-work"\n'
            'match = { comm = ["YOUR-BULK-PROGRAM"] }\n'
            f"policy = {policy}\n")
    if _flush_behind(r.cell.policy) and _rule_io_idle(rule_policy(r.cell.policy)):
        rule += "flush_behind = true\n"  # govern's thread writes at the idle class only
    spec = _throttle(r.cell.policy)
    if spec is not None:
        rule += "throttle = true\n"
        if table := throttlepolicy.govern_table(spec):
            rule += "\n" + table
    return rule


def limits(data: ReportData, r: Row) -> tuple[str, ...]:
    """What on this machine keeps some protection from working, with the reason."""
    out = []
    env = data.runs[-1].environment if data.runs else {}
    device = env.get("device", {}) if isinstance(env.get("device"), dict) else {}
    queue = device.get("queue", {}) if isinstance(device.get("queue"), dict) else {}
    if env.get("cgroup_version") == 1 and r.cell.load.startswith(BUFFERED_WRITERS):
        out.append("cgroup v1 does not attribute buffered writeback to the load's cgroup: the "
                   "kernel's flusher threads write its data, so IO weights cannot slow those "
                   "writes (only the idle IO class of its own reads and fsyncs helps)")
    # bench records each scheduler's queue settings under its name; BFQ's own under "bfq"
    settings = queue.get("bfq") if isinstance(queue.get("bfq"), dict) else {}
    bfq = settings.get("bfq") if isinstance(settings.get("bfq"), dict) else {}
    if bfq.get("low_latency") == "0":
        out.append("BFQ's low_latency is off on this device: a starting program gets no "
                   "weight raising (echo 1 > /sys/block/DEV/queue/iosched/low_latency)")
    if r.cell.scheduler in NO_PRIORITIES and r.cell.policy != "default":
        out.append(f"{r.cell.scheduler} ignores IO classes and weights: on it a policy can "
                   "only work through the CPU")
    return tuple(out)


def _rotational(data: ReportData) -> str | None:
    """The device's rotational flag as the last run recorded it ("1", "0"; None: unknown)."""
    env = data.runs[-1].environment if data.runs else {}
    device = env.get("device") if isinstance(env.get("device"), dict) else {}
    flag = device.get("rotational") if isinstance(device, dict) else None
    return flag if flag in ("0", "1") else None


def headline(best: Row, rows: list[Row], by_key: dict[str, Row],
             tuned: Tunes | None = None) -> str:
    """'under readers:10:seq a start of python takes 2.88 s unprotected on mq-deadline and
    0.193 s on bfq + background (1.07× unloaded)': the slowest unprotected start of this
    load against the recommended one, medians as the report gives them."""
    start = f"under {best.cell.load} a start of {best.cell.probe} takes"
    base = by_key.get(best.baseline_key or "")
    tail = (f" ({fmt_factor(best.ratio.ratio)}\u00d7 its unloaded {median_value_text(base)} s)"
            if best.ratio is not None and base is not None and base.median is not None
            else "")
    ours = f"{median_value_text(best)} s on {lever(best, tuned)}"
    unprotected = [r for r in rows if r.cell.policy == "default" and r is not best
                   and r.cell.prepare not in (tuned or {})]
    if not unprotected:
        return f"{start} {ours}{tail}"
    worst = max(unprotected, key=_start)
    return (f"{start} {median_value_text(worst)} s unprotected on {worst.cell.scheduler} "
            f"and {ours}{tail}")


def answer(recs: list[Recommendation]) -> str:
    """What a run ends with (`bench`, the demo): per load, the comparison and the commands
    that apply the recommendation (`report --recommend` has the evidence)."""
    lines = []
    for rec in recs:
        lines.append(f"answer: {rec.headline}")
        lines += [f"  $ {c}" for c in rec.commands]
        lines += _rule_lines(rec)  # the commands name it: a run's last lines must hold it
    return "\n".join(one_line(ln) for ln in lines) + ("\n" if lines else "")


def _rule_lines(rec: Recommendation, only_if_named: bool = True) -> list[str]:
    """The govern rule as the file it is: TOML a user can paste (indented, still TOML);
    with `only_if_named`, only when a command names govern."""
    named = any(c.startswith("backburner govern") for c in rec.commands)
    if not rec.govern_rule or (only_if_named and not named):
        return []
    return [f"  govern rule, as a file {RULE_FILE}:",
            *(f"    {ln}" for ln in rec.govern_rule.strip().splitlines())]


def recommend(data: ReportData, *, tolerance: float | None = None,
              confidence: float = 0.95) -> list[Recommendation]:
    every = summary_rows(data, tolerance=tolerance, confidence=confidence)
    by_key = {r.cell.key: r for r in every}
    rows = [r for r in every if not r.cell.unloaded and r.ratio is not None]
    if not rows:
        raise DataError(f"{data.path} has no loaded cell with a ratio to unloaded",
                        "a recommendation needs loaded cells and their unloaded baseline")
    tuned = tunes(data)
    groups: dict[tuple[str, str, str, str], list[Row]] = {}
    for r in rows:  # a tunables variant is a lever beside the others, not a preparation
        prepare = "none" if r.cell.prepare in tuned else r.cell.prepare
        groups.setdefault((r.cell.probe, r.cell.device, prepare, r.cell.load), []).append(r)
    out = []
    for (probe, device, prepare, load), members in groups.items():
        best = choose(members, tolerance, tuned)
        plain = [m for m in members if m.cell.prepare not in tuned]
        out.append(Recommendation(probe, device, prepare, load, best,
                                  tuple(pareto(members)), evidence(best, plain, tuned),
                                  commands(best, _rotational(data), tuned), govern_rule(best),
                                  limits(data, best), headline(best, members, by_key, tuned),
                                  tuned))
    return out


def render(recs: list[Recommendation]) -> str:
    """Plain text for a terminal: every line one line, no control character from a stored
    probe or load (`units.one_line`)."""
    lines = []
    for rec in recs:
        lines.append(f"Recommended {rec.title}: {rec.evidence}")
        if rec.headline:
            lines.append(f"  In short: {rec.headline}")
        front = ", ".join(lever(r, rec.tuned) for r in rec.pareto)
        lines.append(f"  Pareto-best (start-up vs bulk work): {front}")
        lines += [f"  $ {c}" for c in rec.commands]
        lines += _rule_lines(rec, only_if_named=False)
        lines += [f"  limit: {note}" for note in rec.limits]
        lines.append("")
    return "\n".join(one_line(ln) for ln in lines).rstrip() + "\n"
