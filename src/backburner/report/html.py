"""The HTML report: one self-contained file (no scripts, no external references, plots
inline). It draws only through `report.plot`, imported when a page is written, so importing
this module does not import matplotlib."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from typing import Any

from .. import __version__, stats
from ..base.quantities import fmt_bytes, fmt_duration, fmt_factor, fmt_range, fmt_s
from ..files import outfile
from ..store.cell import NO_PREPARE
from . import page as htmlpage
from .caveats import caveat_text, notes_text
from .data import ReportData
from .summary import RESAMPLES, SEED, Row, sequential, summary_rows
from .words import (
    OUTLIER_RULE,
    axis_name,
    background_text,
    bands_text,
    bulk_ratio_text,
    bulk_speed_text,
    is_network,
    lost_text,
    median_value_text,
    policy_text,
    row_verdict_text,
    same_axis,
    timeouts_text,
)


def write_html(data: ReportData, path: str, *, tolerance: float | None = None,
               confidence: float = 0.95) -> None:
    """One self-contained HTML file: no scripts, no external references, plots inline."""
    from . import plot  # matplotlib only when a page is written

    rows = summary_rows(data, tolerance=tolerance, confidence=confidence)
    images = plot.inline_pngs(data, tolerance=tolerance)
    page = _html_page(data, rows, images, tolerance, confidence)
    with outfile.replaced(path) as f:
        f.write(page)


_e = htmlpage.escape


def _html_page(data: ReportData, rows: list[Row], images: list[tuple[str, str, str, int]],
               tolerance: float | None, confidence: float) -> str:
    conf = f"{confidence * 100:g}%"
    title = f"backburner: {', '.join(data.probes)} on {', '.join(data.devices)}"
    parts = [*htmlpage.head(title),
             "<h1>Start-up latency under background IO</h1>",
             f'<p class="sub">{_e(title)} \u00b7 <code>{_e(data.path)}</code> \u00b7 '
             f"{len(data.cells)} cells, {data.trial_count} trials \u00b7 "
             f"{'finished' if data.finished else '<strong>unfinished run</strong>'}</p>"]

    parts.append("<h2>Conclusion</h2>")
    parts.append(_conclusion(data, rows, tolerance, confidence))
    cells = [r.cell for r in rows]

    parts.append("<h2>Summary</h2>")
    parts.append(_html_table(data, rows, conf))
    parts.append(f'<p class="legend">Times in seconds. Median with its exact {conf} '
                 "order-statistic interval (distribution-free; none below 6 trials at 95%). "
                 "Out. = outliers by Tukey's rule (kept in the data); T/O = timeouts (not in "
                 "the samples; \u2265 the limit they hit); Fail / abort = failed / aborted trials. "
                 "The verdict compares the cell's median with the unloaded median of the same "
                 f"{same_axis(cells)} (ratio and its {conf} CI) against a band: "
                 f"{_e(bands_text(rows, tolerance))}. BG = " + (
                     "median traffic of the client's link while the probe ran, received / "
                     "sent, in kbit/s, the probe's page not counted" if is_network(cells) else
                     "median background device throughput while the probe ran, read / "
                     "write, in MB/s (10<sup>6</sup> bytes), the probe's own reads and "
                     "writes not counted") + ". Bulk = the load's own work rate over the "
                 "whole time it ran, and that rate relative to the same load unprotected "
                 f"(policy default) on the same {same_axis(cells)}, with its CI.</p>")
    why = _why(data, rows)
    if why:
        parts.append("<h2>Why: what the probe waited on</h2>")
        parts.append(why)

    parts.append("<h2>Warnings</h2>")
    warn_items = [f"<li><strong>{_e(r.cell.label)}</strong>: {_e(caveat_text(w))}</li>"
                  for r in rows for w in r.warnings]
    warn_items += [f"<li>{_e(n)}</li>" for n in notes_text(data)]
    if warn_items:
        parts.append('<ul class="warn">' + "".join(warn_items) + "</ul>")
    else:
        parts.append('<p class="ok">No warnings: enough trials, no timeouts, no bimodal '
                     "cells, no outlier excess.</p>")

    parts.append("<h2>Plots</h2>")
    for name, caption, b64, width in images:
        parts.append(f'<figure id="{_e(name)}"><img alt="{_e(caption)}" width="{width}" '
                     f'src="data:image/png;base64,{b64}"><figcaption>{_e(caption)}'
                     "</figcaption></figure>")

    parts.append("<h2>Runs</h2>")
    for r in data.runs:
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.started_at))
        parts.append(f"<pre><code>{_e(r.command)}</code></pre>")
        parts.append(f'<p class="sub">run {r.id} on {_e(r.machine)}, started {started}, '
                     + ("finished " + time.strftime("%H:%M:%S", time.localtime(r.finished_at))
                        if r.finished_at else "not finished") + f", seed {_e(r.seed)}</p>")

    parts.append("<h2>Environment</h2>")
    parts.append(_html_environment(data))
    parts.append("<h2>Statistics used</h2>")
    parts.append(_html_notes(data, rows, tolerance, confidence))
    parts.append(f"<footer>Generated by backburner {_e(__version__)} on "
                 f"{_e(time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(data.read_at)))} "
                 f"from <code>{_e(data.path)}</code> (schema version "
                 f"{_e(data.schema_version)}).</footer>")
    parts.append("</main></body></html>")
    return "\n".join(parts) + "\n"


def _html_table(data: ReportData, rows: list[Row], conf: str) -> str:
    multi = data.multi
    cells = [r.cell for r in rows]
    prepared = any(r.cell.prepare != NO_PREPARE for r in rows)  # else no column for it
    head = ((["Probe", "Device"] if multi else []) + [axis_name(cells)]
            + (["Prepare"] if prepared else []) + ["Load", "Policy"])
    num = ["n", f"Median<br><small>{conf} CI</small>", "Q1\u2013Q3<br><small>min\u2013max</small>",
           "Mean \u00b1 sd<br><small>MAD</small>", "Out.", "T/O", "Fail /<br>abort"]
    out = ['<div class="scroll"><table class="summary"><thead><tr>',
           *[f"<th>{_e(h)}</th>" for h in head],
           *[f'<th class="num">{h}</th>' for h in num],
           "<th>Verdict: ratio to unloaded [CI]</th>",
           ('<th class="num">BG kbit/s<br><small>received / sent</small></th>'
            if is_network(cells) else
            '<th class="num">BG MB/s<br><small>read / write</small></th>'),
           '<th class="num">Bulk<br><small>vs unprotected</small></th>',
           "</tr></thead><tbody>"]
    prev = None

    def two(top: str, below: str) -> str:
        return f'<td class="num">{_e(top)}<br><small>{_e(below)}</small></td>'

    for r in rows:
        cls = []
        if r.cell.unloaded:
            cls.append("base")
        group = (r.cell.probe, r.cell.device, r.cell.scheduler, r.cell.prepare)
        if prev is not None and group != prev:
            cls.append("group")
        prev = group
        mean = ("\u2013" if r.mean is None else
                fmt_s(r.mean) + (f" \u00b1 {fmt_s(r.stdev)}" if r.stdev is not None else ""))
        tds = ([f"<td>{_e(r.cell.probe)}</td>", f"<td>{_e(r.cell.device)}</td>"] if multi else [])
        tds += [f"<td><code>{_e(r.cell.scheduler)}</code></td>",
                *([f"<td><code>{_e(r.cell.prepare)}</code></td>"] if prepared else []),
                f"<td><code>{_e(r.cell.load)}</code></td>",
                f"<td><code>{_e(r.cell.policy)}</code>"
                + _e(policy_text(r).removeprefix(r.cell.policy)) + "</td>"]
        tds += [f'<td class="num">{r.n}</td>',
                f'<td class="num"><b>{_e(median_value_text(r))}</b><br><small>'
                f'{_e(fmt_range(*r.median_ci) if r.median_ci else "")}</small></td>',
                two(fmt_range(r.q1, r.q3), fmt_range(r.min, r.max) if r.n else ""),
                two(mean, fmt_s(r.mad) if r.n else ""),
                f'<td class="num">{r.outliers}</td>',
                f'<td class="num{" bad" if r.timeouts else ""}">{_e(timeouts_text(r))}</td>',
                f'<td class="num{" bad" if r.failed or r.aborted else ""}">'
                f"{_e(lost_text(r))}</td>"]
        tds.append(f'<td class="v v-{_e(r.verdict_kind)}">{_e(row_verdict_text(r))}</td>')
        tds.append(f'<td class="num">{_e(background_text(r))}</td>')
        tds.append(f'<td class="num">{_e(bulk_speed_text(r))}<br><small>'
                   f"{_e(bulk_ratio_text(r))}</small></td>")
        out.append(f'<tr class="{" ".join(cls)}">' + "".join(tds) + "</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


def _kv_table(items: Iterable[tuple[str, Any]]) -> str:
    out = ['<table class="kv"><tbody>']
    for k, v in items:
        if isinstance(v, dict):
            cell = _kv_table(v.items())
        elif isinstance(v, list):
            cell = _e(", ".join(str(x) for x in v)) if all(
                not isinstance(x, dict | list) for x in v) else f"<code>{_e(json.dumps(v))}</code>"
        elif isinstance(k, str) and k.endswith("bytes"):
            cell = f"{_e(fmt_bytes(v))} <span class=\"sub\">({_e(v)})</span>"
        else:
            cell = _e(v)
        out.append(f"<tr><th>{_e(k)}</th><td>{cell}</td></tr>")
    out.append("</tbody></table>")
    return "".join(out)


_ENV_LABELS = {"hostname": "Host", "os": "Distribution", "kernel": "Kernel",
               "kernel_version": "Kernel build", "kernel_cmdline": "Kernel command line",
               "machine": "Architecture", "cpu_model": "CPU", "cpus": "CPUs",
               "cpu_governor": "CPU governor", "memory_bytes": "Memory",
               "vm_dirty": "vm.dirty_* (writeback)", "cgroup_version": "cgroup version",
               "fio": "fio", "python": "Python", "backburner": "backburner"}
_ENV_ORDER = tuple(_ENV_LABELS)


def _html_environment(data: ReportData) -> str:
    out = []
    for r in data.runs:
        env = dict(r.environment)
        device = env.pop("device", None)
        if len(data.runs) > 1:
            out.append(f"<h3>Run {r.id}</h3>")
        study = env.pop("study", None)
        env.setdefault("backburner", r.tool_version)
        items: list[tuple[str, Any]] = [(_ENV_LABELS[k], env.pop(k)) for k in _ENV_ORDER
                                        if k in env]
        if "Memory" in dict(items):
            items = [(k, f"{fmt_bytes(v)} ({v} bytes)" if k == "Memory" else v)
                     for k, v in items]
        items += [(k.replace("_", " ").capitalize(), v) for k, v in sorted(env.items())]
        items += [("Machine id", r.machine_id or "–"), ("Run id", r.uuid),
                  ("Seed", r.seed)]
        out.append(_kv_table(items))
        if isinstance(study, dict):
            out.append(f"<details><summary>Study file {_e(study.get('path', ''))}</summary>"
                       f"<pre><code>{_e(study.get('text', ''))}</code></pre></details>")
        out.append("<h3>Device under test</h3>")
        out.append(_kv_table(device.items()) if isinstance(device, dict) and device
                   else '<p class="sub">no device facts recorded (the run stopped before the '
                   "device was set up)</p>")
        out.append("<details><summary>Configuration (JSON, as stored with the run)</summary>"
                   f"<pre><code>{_e(json.dumps(r.config, indent=2, sort_keys=True))}"
                   "</code></pre></details>")
    return "".join(out)


def _html_notes(data: ReportData, rows: list[Row], tolerance: float | None,
                confidence: float) -> str:
    """What the statistics of this report are: the method its ratios were made by (the
    paired confidence sequence of a run that stopped each cell once decided, or the
    bootstrap of a fixed count), the band and the verdicts it was read against."""
    conf = f"{confidence * 100:g}%"
    paired = sequential(data)
    items = [
        "<b>Samples.</b> A cell's samples are the start-up times of its counted trials with "
        "status ok. Round 0 is a warm-up and is never counted; it runs without dropping "
        "caches (cold=0), so its time is the cell's warm reference for the not-cold check. "
        "A timed-out trial took at least its limit: it counts at that limit (red \u00d7 in "
        "the plots) in the median, its interval and the verdict, never dropped; where the "
        "timeouts reach the median it is a lower bound (\u2265), where they reach the upper "
        "end of an interval that end is unknown (\u221e), so a cell that often times out is "
        "never called indistinguishable or \u201cat most\u201d. Failed and aborted trials "
        "are counted and reported.",
        f"<b>Median and its interval.</b> Each cell is summarised by its median with the exact "
        f"{conf} order-statistic interval [x<sub>(k)</sub>, x<sub>(n\u2212k+1)</sub>]: "
        "distribution-free, its coverage is at least the confidence asked for (a percentile "
        "bootstrap of a median covers less at the small n of a cell, which a simulation test "
        "shows); below 6 trials at 95% there is none. Quartiles use numpy's linear method; "
        "MAD is the median absolute deviation.",
        _ratio_note(data, conf) if paired else
        f"<b>Ratio to unloaded.</b> Median of the loaded cell / median of the unloaded cell "
        f"on the same {_e(same_axis(r.cell for r in rows))}, with a {conf} percentile-"
        f"bootstrap CI from resampling both independently ({RESAMPLES:,} resamples, seed "
        f"{SEED}, so the report is reproducible; its coverage is checked by simulation in "
        "the tests). Valid for a fixed number of trials chosen in advance, as this run's "
        "were.",
        f"<b>Band.</b> Each verdict is read against a band 1 \u00b1 b around the unloaded "
        f"time, b = {_e(bands_text(rows, tolerance))}. "
        + ("The rule's constants come from studies of how people perceive durations and "
           "response times (Weber's law for time; the perceptual cycle of about 100 ms and "
           "the 0.1 s limit of an instantaneous response); their sources are in "
           "docs/design/statistics.md, \u201cThe band a person notices\u201d." if tolerance is None
           else "The band was given by hand (--tolerance), instead of the rule."),
        "<b>Verdicts</b> (each names its band): <i>slower</i> / <i>faster</i> when the "
        "whole interval lies above 1 + b / below 1 \u2212 b; <i>at most X\u00d7 "
        "unloaded</i> when the interval's upper end X lies within 1 + b, whatever its "
        "lower end \u2014 not noticeably slower, the answer for a protected start; "
        "<i>indistinguishable</i>, the stronger claim, when both ends lie within the band; "
        "<i>undecided</i> only while the upper end still lies above 1 + b and the lower end "
        "does not" + (", with about how many trials would decide it at the spread seen"
                      if paired else ": run more trials") + ". A wrong call needs the "
        "interval to miss the truth, so every call is wrong at most "
        f"{(1 - confidence) * 100:g}% of the time.",
        "<b>Mann\u2013Whitney U</b> (two-sided; exact for small samples without ties, else the "
        "normal approximation with tie and continuity corrections) and <b>Cliff's delta</b> "
        "(P(B &gt; A) \u2212 P(B &lt; A), magnitudes after Romano et al. 2006) are used by "
        "<code>compare</code>; neither assumes a distribution.",
        f"<b>Outliers.</b> {_e(OUTLIER_RULE)}.",
        "<b>Warnings.</b> too few trials for a distribution-free interval of the median; "
        "timeouts; bimodal samples (Sarle's bimodality coefficient &gt; 5/9); not cold: the "
        "probe's cold trials read no more blocks from disk (wait4's in_blocks) than its warm "
        "trials (its warm-up round runs without dropping caches (cold=0) for this), or, "
        f"with 3 or more warm trials in the database, a cold median within "
        f"{stats.NOT_COLD_FRACTION:.0%} of the warm median; more than 10% outliers.",
    ]
    return '<ul class="notes">' + "".join(f"<li>{i}</li>" for i in items) + "</ul>"


def _ratio_note(data: ReportData, conf: str) -> str:
    """The paired confidence sequence, and the budget the run stopped its cells within."""
    budgets = []
    for run in data.runs:
        c = run.config
        if any(c.get(k) is not None for k in ("min_runs", "max_runs", "max_time_s")):
            budget = f"run {run.id}: " + ", ".join(
                part for part in (
                    f"at least {c['min_runs']} trials" if c.get("min_runs") else "",
                    f"at most {c['max_runs']}" if c.get("max_runs") else "",
                    f"at most {fmt_duration(float(c['max_time_s']))} of trials"
                    if c.get("max_time_s") else "") if part)
            budgets.append(budget)
    return (
        "<b>Ratio to unloaded: paired sequential intervals.</b> This run stopped each cell "
        "once its verdict was decided (" + _e("; ".join(budgets)) + "), so its ratios are "
        "read from trials paired by round: every round runs every cell once, and a loaded "
        "cell's trial and its unloaded baseline's trial of the same round form a pair. The "
        "ratio is the median per-round ratio, exp(median of log loaded \u2212 log "
        f"unloaded), with its {conf} <i>paired sequential CI</i>: a confidence sequence for "
        "that median (the beta-binomial one for a quantile, Howard &amp; Ramdas, Bernoulli "
        "28(3), 2022), distribution-free and valid at every number of trials at once, so "
        "stopping a cell as soon as it is decided leaves its interval and verdict valid. "
        "A fixed-count interval (the bootstrap) looked at after every round would not be. "
        "A cell no budget could decide is stopped early (\u201cout of reach\u201d) and "
        "reported undecided.")


def _conclusion(data: ReportData, rows: list[Row], tolerance: float | None,
                confidence: float) -> str:
    """One paragraph a reader acts on, then the recommended action per load."""
    from .recommend import recommend

    loaded = [r for r in rows if not r.cell.unloaded and r.ratio is not None]
    if not loaded:
        return ('<p class="conclusion">Only unloaded cells (or none with a ratio to '
                "unloaded): this run is a baseline. Add a --load to see what background "
                "work costs.</p>")
    worst = max(loaded, key=lambda r: r.ratio.ratio if r.ratio else 0.0)
    best = min(loaded, key=lambda r: r.ratio.ratio if r.ratio else float("inf"))
    assert worst.ratio and best.ratio
    text = (f"Under background load the probe started up to {fmt_factor(worst.ratio.ratio)}"
            f"\u00d7 slower than unloaded ({worst.cell.label}); the least slowed cell reached "
            f"{fmt_factor(best.ratio.ratio)}\u00d7 its unloaded time ({best.cell.label}).")
    out = [f'<p class="conclusion">{_e(text)}</p>', '<ul class="recommend">']
    for rec in recommend(data, tolerance=tolerance, confidence=confidence):
        cmds = "\n".join(rec.commands)
        limits = "".join(f'<li class="limit">{_e(n)}</li>' for n in rec.limits)
        out.append(f"<li><b>Recommended {_e(rec.title)}:</b> {_e(rec.evidence)}"
                   f"<pre><code>{_e(cmds)}</code></pre>"
                   + (f"<details><summary>as a govern rule</summary><pre><code>"
                      f"{_e(rec.govern_rule)}</code></pre></details>" if rec.govern_rule
                      else "")
                   + (f"<ul>{limits}</ul>" if limits else "") + "</li>")
    out.append("</ul>")
    return "".join(out)


def _why(data: ReportData, rows: list[Row]) -> str:
    """From --trace trials: how long the probe's window stalled on IO, and whose requests
    the device served meanwhile (probe, load, writeback, journal, others)."""
    lines = []
    for cell, row in zip(data.cells, rows, strict=True):
        traced = [t for t in cell.counted if "io_by" in t["extra"]]
        if not traced:
            continue
        stall = _median([t["extra"].get("counters", {}).get("psi_io_some_s") for t in traced])
        by_requests, by_bytes = _issuer_shares(traced, "requests"), _issuer_shares(traced,
                                                                                 "bytes")
        blocks = _median([t["in_blocks"] for t in traced])
        preempted = _median([t["extra"].get("nivcsw") for t in traced])
        lines.append(f"<tr><td>{_e(row.cell.label)}</td>"
                     f'<td class="num">{_e(fmt_s(row.median))}</td>'
                     f'<td class="num">{_e(fmt_s(stall))}</td>'
                     f'<td class="num">{_e(f"{blocks:.0f}" if blocks is not None else "-")}</td>'
                     f'<td class="num">{_e(f"{preempted:.0f}" if preempted is not None else "-")}'
                     f"</td><td>{_e(by_requests or '-')}</td><td>{_e(by_bytes or '-')}</td>"
                     "</tr>")
    if not lines:
        return ""
    method = next((t["extra"]["io_by"].get("method") for c in data.cells for t in c.counted
                   if "io_by" in t["extra"]), "?")
    return ('<table class="summary"><thead><tr><th>Cell</th><th class="num">Median s</th>'
            '<th class="num">IO stall s<br><small>PSI some</small></th>'
            '<th class="num">Blocks read</th><th class="num">Preempted</th>'
            "<th>Device requests by issuer<br><small>median share</small></th>"
            "<th>Device bytes by issuer<br><small>median share</small></th>"
            "</tr></thead><tbody>" + "".join(lines) + "</tbody></table>"
            f'<p class="legend">From <code>bench --trace</code>: the kernel\'s IO pressure '
            f"stall over the probe's window, the blocks the probe read, how often it was "
            "switched out involuntarily, and who issued the requests and bytes the device "
            "served meanwhile. On a rotating disk every request may cost a seek, so a thread "
            "with few bytes but many requests (a filesystem journal committing after each "
            f"fsync) can be what the probe waits behind (method: {_e(method)}).</p>")


def _issuer_shares(traced: list[dict[str, Any]], unit: str) -> str:
    """"journal 43%, probe 40%, ...": each issuer's median share of the device's requests
    or bytes over the probe's windows, largest first."""
    shares: dict[str, list[float]] = {}
    for t in traced:
        groups = t["extra"]["io_by"].get("groups", {})
        total = sum(g.get(unit, 0) for g in groups.values()) or 1
        for name, g in groups.items():
            shares.setdefault(name, []).append(g.get(unit, 0) / total)
    return ", ".join(f"{name} {100 * (_median(v) or 0):.0f}%" for name, v in
                     sorted(shares.items(), key=lambda kv: -(_median(kv[1]) or 0)))


def _median(values: list[Any]) -> float | None:
    nums = sorted(float(v) for v in values if isinstance(v, int | float))
    if not nums:
        return None
    mid = len(nums) // 2
    return nums[mid] if len(nums) % 2 else (nums[mid - 1] + nums[mid]) / 2
