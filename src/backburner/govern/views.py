"""What `govern check`, `govern explain` and `govern status` show: gathered and formatted
here, so the CLI only parses and prints. Every line goes out through `quantities.one_line`:
what is read from /proc (a process's name, its command line, its program's path, its
cgroup) is any user's choice, and must neither drive the terminal nor forge a line."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

from ..base import quantities
from ..base.errors import BackburnerError, NotFoundError
from ..kernel import procfs
from ..status import inforce, sources
from . import procinfo, rulesources, state
from .rules import Rule, RuleError, Ruleset, StaticFacts, Verdict, explain


@dataclass
class CheckResult:
    files: list[str]
    ruleset: Ruleset
    errors: list[RuleError]
    matches: dict[str, list[tuple[int, str]]] = field(default_factory=dict)  # rule -> procs


def running_matches(ruleset: Ruleset) -> dict[str, list[tuple[int, str]]]:
    """Which running processes each rule would govern now (the first match wins)."""
    out: dict[str, list[tuple[int, str]]] = {r.name: [] for r in ruleset.rules}
    skip = {0, 1, 2, os.getpid()}
    for pid in procfs.pids():
        if pid in skip or procinfo.is_kernel_thread(pid):
            continue
        info = procinfo.ProcInfo(pid)
        rule = ruleset.first_match(info)
        if rule is not None:
            out[rule.name].append((pid, info.comm))
    return out


def check(rules_dir: str | None, defaults: bool = True) -> CheckResult:
    found = rulesources.sources(rules_dir, defaults)
    ruleset, errors = rulesources.parse(found)
    result = CheckResult([s.shown for s in found], ruleset, errors)
    if not errors:
        result.matches = running_matches(ruleset)
    return result


def format_check(result: CheckResult) -> str:
    if result.errors:
        n = len(result.errors)
        return _lines([*(str(e) for e in result.errors),
                       f"{quantities.plural(n, 'error')} in "
                       f"{quantities.plural(len(result.files), 'rule file')}"])
    lines = []
    by_file: dict[str, list[Rule]] = {}
    for rule in result.ruleset.rules:
        by_file.setdefault(rule.file, []).append(rule)
    for file in result.files:
        lines.append(file)
        for rule in by_file.get(file, []):
            procs = result.matches.get(rule.name, [])
            now = ", ".join(f"{p} ({c})" for p, c in procs[:8]) + (
                f" and {len(procs) - 8} more" if len(procs) > 8 else "")
            lines.append(f"  {rule.name} (line {rule.line}): {rule.match.describe()}")
            lines.append(f"      sets {rule.sets()}" + (" [broad]" if rule.broad else ""))
            lines.append(f"      matches now: {now or 'nothing'}")
        if not by_file.get(file):
            lines.append("  (no rules)")
    n = len(result.ruleset.rules)
    lines.append(f"{quantities.plural(n, 'rule')} in "
                 f"{quantities.plural(len(result.files), 'file')}: OK")
    return _lines(lines)


@dataclass
class Explanation:
    facts: StaticFacts
    verdicts: list[Verdict]
    governing: Rule | None
    protected: str | None
    live: dict[str, Any] | None  # the running daemon's record of it, if any
    in_force: inforce.InForce | None = None  # what the kernel has for it now
    set_by: list[sources.Entry] = field(default_factory=list)  # who put it on the back burner


def explain_pid(pid: int, rules_dir: str | None, defaults: bool = True) -> Explanation:
    if procfs.start_time(pid) is None:
        raise NotFoundError(f"no process with PID {pid}", "check it with `ps -p PID`")
    ruleset = rulesources.load(rules_dir, defaults)
    facts = procinfo.ProcInfo(pid).freeze()
    verdicts = explain(ruleset, facts)
    governing = next((v.rule for v in verdicts if v.matched), None)
    protected = None
    if pid == 1:
        protected = "PID 1 is never governed (every process inherits from it)"
    elif procinfo.is_kernel_thread(pid):
        protected = "kernel threads are never governed"
    live = None
    try:
        status = state.read()
        if status.get("running"):
            live = next((g for g in status.get("governed", []) if g.get("pid") == pid
                         and g.get("start") == procfs.start_time(pid)), None) or {}
    except BackburnerError:
        pass
    return Explanation(facts, verdicts, governing, protected, live, inforce.read(pid),
                       sources.for_pid(pid))


def format_explain(ex: Explanation) -> str:
    f = ex.facts
    chain = " < ".join(f"{c}" for c, _e in f.ancestors) or "-"
    lines = [f"PID {f.pid} ({f.comm}): {f.exe or '(no exe)'}",
             f"  cmdline: {' '.join(f.cmdline)[:300] or '-'}",
             f"  user {f.user or '?'} (uid {f.uid}), unit {f.unit or '-'}, "
             f"cgroup {f.cgroup or '-'}",
             f"  ancestors: {chain}"]
    for v in ex.verdicts:
        mark = "MATCH" if v.matched else "no"
        lines.append(f"{mark:>5}  {v.rule.name} ({v.rule.where})")
        lines += [f"         {r}" for r in v.reasons]
    if ex.protected:
        lines.append(f"=> not governed: {ex.protected}")
    elif ex.governing is not None:
        verb = "governs" if ex.live else "would govern"  # a daemon's own record, or none
        lines.append(f"=> rule {ex.governing.name} {verb} it: {ex.governing.sets()}")
    else:
        lines.append("=> no rule matches: govern leaves it alone")
    if ex.live is not None:
        lines.append(f"   the running daemon governs it now by rule {ex.live['rule']} since "
                     f"{_clock(ex.live['since'])}" if ex.live else
                     "   the running daemon does not govern it now")
    else:
        lines.append("   no govern daemon runs: no rule is in force")
    return _lines([*lines, *_in_force_lines(ex)])


def _in_force_lines(ex: Explanation) -> list[str]:
    """What the kernel has for the process now, and who set it (`backburner status`)."""
    if ex.in_force is None:
        return []
    out = [f"in force now: {ex.in_force.describe()}"]
    for e in ex.set_by:
        out.append(f"   set by {e.by} since {_clock(e.since or 0)}: {e.sets}")
        out += [f"   DIFFERS: {d}" for d in e.differs]
    if not ex.set_by:
        out.append("   set by no backburner command (as it started, or by hand)")
    return out


def _clock(epoch: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch))


def format_status(st: dict[str, Any]) -> str:
    c = st.get("counters", {})
    head = ("running" if st.get("running") else "NOT running (last state below)")
    lines = [f"govern: {head}, PID {st.get('pid')}, since {_clock(st.get('started_at', 0))}"
             + (" [dry run: nothing is changed]" if st.get("dry_run") else ""),
             f"rules: {len(st.get('rules', []))} from {', '.join(st.get('rule_files', []))}",
             f"events: {c.get('events', 0)} ({c.get('execs', 0)} execs), "
             f"{c.get('matched', 0)} matched, {c.get('inherited', 0)} inherited, "
             f"{c.get('gone', 0)} skipped (exited first), {c.get('overflows', 0)} overflows, "
             f"{c.get('lost_events', 0)} lost, {c.get('rescans', 0)} scans"
             + (f", {c['slow_matches']} command lines too slow to search (not matched)"
                if c.get("slow_matches") else ""),
             "execs seen: " + ("only those of named programs (the kernel filters them)"
                               if st.get("exec_events") == "kernel-filtered" else
                               "every one (process connector)"),
             f"updated {_clock(st.get('updated_at', 0))}"]
    governed = st.get("governed", [])
    children: dict[int, int] = {}
    for g in governed:
        if g.get("inherited_from") is not None:
            children[g["inherited_from"]] = children.get(g["inherited_from"], 0) + 1
    roots = [g for g in governed if g.get("inherited_from") is None]
    if roots:
        lines.append(f"{'PID':>7}  {'RULE':<22} {'SINCE':<19}  SET / PROCESS")
        for g in roots:
            kids = children.get(g["pid"], 0)
            lines.append(f"{g['pid']:>7}  {g['rule']:<22} {_clock(g['since'])}  {g['comm']}"
                         + (f" (+{quantities.plural(kids, 'child', 'children')})" if kids else ""))
            lines.append(f"{'':>7}  {g['set']}" + (f"; cgroups {', '.join(g['cgroups'])}"
                                                   if g.get("cgroups") else ""))
    else:
        lines.append("no process is governed now")
    total = st.get("governed_total", len(governed))
    if total > len(governed):
        lines.append(f"... {total} governed in all (the first {len(governed)} are listed)")
    t = st.get("throttle", {})
    if t.get("groups") or t.get("watch"):
        lines.append(f"throttle: watching {', '.join(t.get('watch', [])) or 'nothing'} "
                     f"({'; '.join(t.get('triggers', []))}); pauses of at most "
                     f"{quantities.fmt_s(t.get('pause_s'))} s, bulk keeps >= "
                     f"{quantities.fmt_pct(t.get('min_duty') or 0)} of the time; "
                     f"{t.get('pauses', 0)} pauses, {quantities.fmt_s(t.get('paused_s', 0))} s "
                     f"paused, longest {quantities.fmt_s(t.get('longest_s', 0))} s"
                     + ("; FROZEN now" if t.get("frozen") else ""))
    flushed = st.get("flush_behind")
    if flushed:
        lines.append(f"flush-behind: {quantities.plural(flushed['flushed_files'], 'file')} "
                     f"({quantities.fmt_bytes(flushed['flushed_bytes'])}) written back at the "
                     f"idle class as governed processes closed them"
                     + "".join(f"; {p}" for p in flushed.get("flush_problems", [])))
    for p in st.get("problems", []):
        lines.append(f"could not: {p}")
    return _lines(lines)


def _lines(lines: list[str]) -> str:
    return "\n".join(quantities.one_line(line) for line in lines)
