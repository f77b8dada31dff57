"""Traces and diffs for people: terminal tables, Markdown, JSON, and an HTML page.

Every view is first built as plain `Table`s (headers, aligned rows, notes), then drawn by
one of the writers, so the terminal, Markdown and HTML say the same thing. The HTML page is
one self-contained file in the style of the benchmark report (no scripts, no external
references, the bar chart inline as a PNG); matplotlib is imported only for it.
"""

from __future__ import annotations

import base64
import io
import json
import math
import time
from dataclasses import dataclass, field
from typing import IO, Any

from .. import __version__
from ..base.quantities import (
    DASH,
    fmt_count,
    fmt_factor,
    fmt_p,
    fmt_ratio,
    fmt_signed,
    fmt_spread,
    fmt_value,
    one_line,
)
from ..report import page as htmlpage
from .diff import Diff, Row
from .profile import (
    Profile,
    Run,
    median,
    merge_syscalls,
    metrics,
    processes,
)

TOP = 25


@dataclass
class Table:
    title: str
    headers: list[str]
    align: str  # one of "l"/"r" per column
    rows: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


# --- show ----------------------------------------------------------------------------------


def _status_text(runs: list[Run]) -> str:
    codes = [r.shell_status for r in runs]
    if all(c == 0 for c in codes):
        return "all exited 0" if len(codes) > 1 else "exited 0"
    return "statuses " + ", ".join(map(str, codes))


def header_lines(p: Profile) -> list[str]:
    eng = p.engine
    lines = [f"command: {p.label}",
             f"engine: {eng.get('name')} ({eng.get('version', '?')}); {eng.get('note', '')}",
             f"runs: {len(p.runs)}, {_status_text(p.runs)}; kernel {p.host.get('kernel', '?')},"
             f" {p.host.get('cpus', '?')} CPUs"]
    if p.lost_runs():
        lines.append(f"warning: the tracer lost events in run(s) "
                     f"{', '.join(map(str, p.lost_runs()))}: their syscall counts are short")
    overhead = p.overhead()
    if overhead is not None:
        lines.append(f"tracer overhead: traced / untraced wall time = {fmt_factor(overhead)}"
                     f"\u00d7 (median of {len(p.runs)} / {len(p.calibration)} runs)")
    elif eng.get("name") != "none":
        lines.append("tracer overhead: not measured (--overhead also runs the command "
                     "untraced)")
    return lines


def _of_runs(n: int) -> str:
    return f"median [min{DASH}max] of {n} runs" if n > 1 else "1 run"


def _errno_text(errnos: dict[str, float]) -> str:
    top = sorted(errnos.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
    return ", ".join(f"{name} {fmt_count(n)}" for name, n in top)


def syscall_table(p: Profile, top: int = TOP) -> Table:
    """Syscalls merged over every thread of every process: median over runs [min–max]."""
    per_run = [merge_syscalls(r.threads) for r in p.runs]
    names = sorted({n for m in per_run for n in m})

    def series(name: str, attr: str) -> list[float]:
        return [float(getattr(m[name], attr)) if name in m else 0.0 for m in per_run]

    order = sorted(names, key=lambda n: (-median(series(n, "calls")), n))
    t = Table(f"Syscalls, all threads merged ({_of_runs(len(p.runs))})",
              ["syscall", "calls", "errors", "time", "errors by errno"], "lrrrl")
    for name in order[:top]:
        errnos: dict[str, float] = {}
        for m in per_run:
            for e, n in (m[name].errnos.items() if name in m else ()):
                errnos[e] = errnos.get(e, 0) + n / len(per_run)
        t.rows.append([name, fmt_spread(series(name, "calls"), "count"),
                       fmt_spread(series(name, "errors"), "count"),
                       fmt_spread(series(name, "time_s"), "s"), _errno_text(errnos)])
    if len(order) > top:
        t.notes.append(f"{len(order) - top} more syscalls (--top N shows more)")
    if not names:
        t.notes.append("no syscalls recorded (engine none: counters only)")
    return t


def process_table(run: Run, top: int = TOP) -> Table:
    t = Table(f"Processes of run {run.index + 1}",
              ["pid", "command", "threads", "syscalls", "errors", "time", "run-queue wait",
               "top syscalls"], "lrrrrrrl")
    for pv in processes(run)[:top]:
        calls = sum(s.calls for s in pv.syscalls.values())
        t.rows.append([str(pv.pid), pv.comm, str(len(pv.threads)), fmt_count(calls),
                       fmt_count(sum(s.errors for s in pv.syscalls.values())),
                       fmt_value(sum(s.time_s for s in pv.syscalls.values()), "s"),
                       DASH if pv.wait_s is None else fmt_value(pv.wait_s, "s"),
                       _top_calls(pv.syscalls)])
    return t


def _top_calls(syscalls: dict[str, Any]) -> str:
    top = sorted(syscalls.items(), key=lambda kv: (-kv[1].calls, kv[0]))[:3]
    return ", ".join(f"{name} {fmt_count(s.calls)}" for name, s in top)


def thread_table(run: Run, top: int = TOP) -> Table:
    t = Table(f"Threads of run {run.index + 1}",
              ["tid", "pid", "command", "syscalls", "errors", "time", "run-queue wait",
               "slices", "top syscalls"], "rrlrrrrrl")
    threads = sorted(run.threads, key=lambda th: (-sum(s.calls for s in th.syscalls.values()),
                                                  th.tid))
    for th in threads[:top]:
        s = th.syscalls.values()
        t.rows.append([str(th.tid), str(th.pid), th.comm, fmt_count(sum(x.calls for x in s)),
                       fmt_count(sum(x.errors for x in s)),
                       fmt_value(sum(x.time_s for x in s), "s"),
                       DASH if th.sched is None else fmt_value(th.sched["wait_s"], "s"),
                       DASH if th.sched is None else fmt_count(th.sched["slices"]),
                       _top_calls(th.syscalls)])
    if len(threads) > top:
        t.notes.append(f"{len(threads) - top} more threads (--top N shows more)")
    t.notes.append("run-queue wait: the last /proc/PID/task/TID/schedstat sample "
                   "(sampled; a thread's last interval is not seen)")
    return t


def counter_table(p: Profile) -> Table:
    t = Table(f"Counters ({_of_runs(len(p.runs))})", ["counter", "value", "source"], "lrl")
    per_run = [metrics(r) for r in p.runs]
    keys: dict[str, Any] = {}
    for m in per_run:
        for k, (_, meta) in m.items():
            if not k.startswith(("syscall:", "syscalls:")):
                keys.setdefault(k, meta)
    for key, meta in sorted(keys.items(), key=lambda kv: (_GROUP_ORDER.get(kv[1].group, 9),
                                                          _key_order(kv[0]))):
        values = [m[key][0] for m in per_run if key in m]
        if not values or (meta.group == "system" and max(values) == 0 == min(values)):
            continue
        t.rows.append([meta.label, fmt_spread(values, meta.unit), _SOURCE[meta.group]])
    return t


_GROUP_ORDER = {"job": 0, "sched": 1, "system": 2}
_SOURCE = {"job": "wait4 rusage", "sched": "schedstat (sampled)", "system": "system-wide",
           "syscalls": "tracer"}
_FIRST = ("rusage:wall_s", "rusage:user_s", "rusage:sys_s", "rusage:nvcsw", "rusage:nivcsw")


def _key_order(key: str) -> tuple[int, str]:
    if key in _FIRST:
        return _FIRST.index(key), key
    if key.startswith("irq:") and key[4:] in ("CAL", "RES", "TLB"):
        return 10, key
    return 20, key


def interrupt_table(run: Run, top: int = 12) -> Table:
    irqs = run.counters.get("interrupts") or {}
    busy = sorted(((n, v) for n, v in irqs.items() if v.get("total")),
                  key=lambda kv: -kv[1]["total"])
    ncpu = max((len(v["per_cpu"]) for _, v in busy), default=0)
    t = Table(f"Interrupts per CPU during run {run.index + 1} (system-wide)",
              ["line", "what", *[f"CPU{i}" for i in range(ncpu)], "total"],
              "ll" + "r" * (ncpu + 1))
    for name, v in busy[:top]:
        cells = [fmt_count(x) for x in v["per_cpu"]] + [""] * (ncpu - len(v["per_cpu"]))
        t.rows.append([name, str(v.get("desc", "")), *cells, fmt_count(v["total"])])
    return t


def show_tables(p: Profile, by: str = "merged", run: int = 0, top: int = TOP) -> list[Table]:
    chosen = p.runs[run]
    tables = [syscall_table(p, top)] if by == "merged" else []
    if by == "process":
        tables.append(process_table(chosen, top))
    elif by == "thread":
        tables.append(thread_table(chosen, top))
    tables += [counter_table(p), interrupt_table(chosen)]
    return tables


def show_json(p: Profile, top: int = TOP) -> dict[str, Any]:
    """What `show` prints, as data: per-run metrics and the merged syscalls per run."""
    return {"label": p.label, "engine": p.engine, "overhead": p.overhead(),
            "runs": [{"index": r.index, "status": r.shell_status,
                      "metrics": {k: v for k, (v, _) in metrics(r).items()}}
                     for r in p.runs]}


# --- diff ----------------------------------------------------------------------------------


def _diff_rows(rows: list[Row], top: int | None) -> list[list[str]]:
    out = []
    for r in rows[:top]:
        out.append([r.label, fmt_spread(r.a, r.unit), fmt_spread(r.b, r.unit),
                    fmt_signed(r.delta, r.unit), fmt_ratio(r.ratio), fmt_p(r.p)])
    return out


DIFF_HEADERS = ["metric", "A", "B", "change", "B/A", "p"]


def diff_header(d: Diff) -> list[str]:
    lines = [f"A: {d.label_a} ({d.n_a} run{'s' if d.n_a != 1 else ''}, {d.engine_a})",
             f"B: {d.label_b} ({d.n_b} run{'s' if d.n_b != 1 else ''}, {d.engine_b})"]
    for side, overhead in (("A", d.overhead_a), ("B", d.overhead_b)):
        if overhead is not None:
            lines.append(f"tracer overhead {side}: {fmt_factor(overhead)}\u00d7 "
                         "(traced / untraced wall time)")
    return lines


def diff_tables(d: Diff, top: int = TOP) -> list[Table]:
    many = f"median [min{DASH}max] of the runs"
    tables = [Table(f"Changed ({len(d.changed)}): biggest first", DIFF_HEADERS, "lrrrrr",
                    _diff_rows(d.changed, None))]
    if not d.changed:
        tables[0].notes.append("nothing changed beyond the runs' own spread")
    if d.apart:
        t = Table(f"Apart, but too few runs to call ({len(d.apart)})", DIFF_HEADERS, "lrrrrr",
                  _diff_rows(d.apart, top))
        if len(d.apart) > top:
            t.notes.append(f"{len(d.apart) - top} more (--top N shows more)")
        tables.append(t)
    noise = Table(f"Noise: within the runs' spread ({len(d.noise)})", DIFF_HEADERS, "lrrrrr",
                  _diff_rows(d.noise, top))
    if len(d.noise) > top:
        noise.notes.append(f"{len(d.noise) - top} more (--top N shows more)")
    tables.append(noise)
    last = tables[-1]
    last.notes.append(f"values: {many}; p: exact two-sided Mann\u2013Whitney; {d.same} "
                      "metrics were identical in every run")
    last.notes.append("rule: " + d.rule)
    last.notes += [f"note: {n}" for n in d.notes()]
    return tables


# --- writers -------------------------------------------------------------------------------


def write_text(lines: list[str], tables: list[Table], stream: IO[str] | None = None) -> None:
    """Tables on the terminal (rich), fitted to its width; plain when not a terminal. Every
    line and cell through `one_line`: the names of a traced program's threads are its own
    choice (rich drops a BEL or a carriage return, but passes an escape sequence on)."""
    from rich import box
    from rich.table import Table as RichTable
    from rich.text import Text

    from ..report.terminal import console_for

    console = console_for(stream)
    for line in lines:
        console.print(Text(one_line(line)))
    for t in tables:
        console.print()
        rt = RichTable(title=Text(t.title, style="bold"), title_justify="left",
                       box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
        for h, a in zip(t.headers, t.align, strict=True):
            rt.add_column(h, justify="right" if a == "r" else "left",
                          overflow="fold", no_wrap=a == "r")
        for row in t.rows:
            rt.add_row(*(Text(one_line(c)) for c in row))
        console.print(rt)
        for n in t.notes:
            console.print(Text(one_line(n), style="dim"))


def to_markdown(lines: list[str], tables: list[Table]) -> str:
    from ..report.export.markdown import text

    out = [f"{text(line)}  " for line in lines]
    for t in tables:
        out += ["", f"**{text(t.title)}**", "",
                "| " + " | ".join(text(h) for h in t.headers) + " |",
                "| " + " | ".join("--:" if a == "r" else ":--" for a in t.align) + " |"]
        out += ["| " + " | ".join(text(c) for c in row) + " |" for row in t.rows]
        out += [""] + [f"_{text(n)}_" for n in t.notes] if t.notes else []
    return "\n".join(out) + "\n"


def to_json(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=1, allow_nan=False) + "\n"


# --- HTML ------------------------------------------------------------------------------------


def bar_chart(d: Diff, top: int = 15) -> tuple[str, int] | None:
    """The biggest called changes (or, when none, the biggest apart ones) as horizontal
    bars of the signed log ratio: base64 PNG and its CSS width, or None when empty."""
    from matplotlib.figure import Figure

    rows = (d.changed or d.apart)[:top]
    if not rows:
        return None
    called = bool(d.changed)
    rows = list(reversed(rows))
    fig = Figure(figsize=(9, 0.42 * len(rows) + 1.3), dpi=110)
    ax = fig.add_subplot()
    values = [math.copysign(r.score, r.delta) / math.log(2) for r in rows]
    colours = ["#B42318" if v > 0 else "#1A7F37" for v in values]
    bars = ax.barh(range(len(rows)), values, color=colours if called else "#9A6700")
    for bar, r in zip(bars, rows, strict=True):
        bar.set_gid(f"bar:{r.key}")
    ax.set_yticks(range(len(rows)), [r.label for r in rows], fontsize=9)
    ax.axvline(0, color="#5b6673", linewidth=0.8)
    ax.set_xlabel("log\u2082 of B / A (medians; floors: 1 count, 1 ms, 64 KiB)", fontsize=9)
    what = "changes" if called else "separated metrics (too few runs to call)"
    ax.set_title(f"Top {len(rows)} {what}: right = more in B", loc="left", fontsize=10)
    for i, (v, r) in enumerate(zip(values, rows, strict=True)):
        ax.annotate(fmt_ratio(r.ratio), (v, i), xytext=(4 if v >= 0 else -4, 0),
                    textcoords="offset points", va="center", ha="left" if v >= 0 else "right",
                    fontsize=8)
    span = max(abs(v) for v in values) or 1.0
    ax.set_xlim(-span * 1.3 if min(values) < 0 else -span * 0.05,
                span * 1.3 if max(values) > 0 else span * 0.05)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=165)
    return base64.b64encode(buf.getvalue()).decode("ascii"), 9 * 110


_e = htmlpage.escape


def to_html(d: Diff, top: int = TOP) -> str:
    title = f"backburner trace diff: {d.label_a} vs {d.label_b}"
    parts = [*htmlpage.head(title),
             "<h1>What changed between two runs</h1>",
             '<p class="sub">' + "<br>".join(_e(x) for x in diff_header(d)) + "</p>"]
    chart = bar_chart(d)
    if chart:
        b64, width = chart
        parts.append(f'<figure id="top-changes"><img alt="top changes" width="{width}" '
                     f'src="data:image/png;base64,{b64}"></figure>')
    notes = d.notes()
    if notes:
        parts.append('<ul class="warn">' + "".join(f"<li>{_e(n)}</li>" for n in notes)
                     + "</ul>")
    for t in diff_tables(d, top):
        parts.append(f"<h2>{_e(t.title)}</h2>")
        parts.append(_html_table(t))
    parts.append(f"<footer>Generated by backburner {_e(__version__)} on "
                 f"{_e(time.strftime('%Y-%m-%d %H:%M:%S'))}.</footer></main></body></html>")
    return "\n".join(parts) + "\n"


def _html_table(t: Table) -> str:
    head = "".join(f'<th class="{"num" if a == "r" else ""}">{_e(h)}</th>'
                   for h, a in zip(t.headers, t.align, strict=True))
    body = "".join("<tr>" + "".join(f'<td class="{"num" if a == "r" else ""}">{_e(c)}</td>'
                                    for c, a in zip(row, t.align, strict=True)) + "</tr>"
                   for row in t.rows)
    notes = "".join(f'<p class="legend">{_e(n)}</p>' for n in t.notes)
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{body}' \
           f"</tbody></table></div>{notes}"

