"""The HTML report: self-contained, complete, and rendered by a real browser without errors."""

from __future__ import annotations

import base64
import html
import io
import os
import re
import subprocess
from pathlib import Path

import pytest
from helpers import COMMAND, MEDIANS, PREPARED, SPECIAL, make_db
from PIL import Image

from backburner import report
from backburner.report import caveats, plot, words
from backburner.report import html as html_report

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"]
needs_chromium = pytest.mark.skipif(not os.path.exists(CHROMIUM),
                                    reason=f"{CHROMIUM} is not installed")


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, report.ReportData]:
    d = tmp_path_factory.mktemp("html")
    make_db(d / "r.db", special=SPECIAL, command=COMMAND + " --note '<b>&\"x\"</b>'")
    data = report.load(str(d / "r.db"))
    out = d / "report.html"
    html_report.write_html(data, str(out))
    return out, data


def test_self_contained(page: tuple[Path, report.ReportData]) -> None:
    path, _ = page
    text = path.read_text()
    assert not re.search(r"""(?:src|href|action)\s*=\s*["']?\s*(?:https?:)?//""", text, re.I)
    assert "http://" not in text and "https://" not in text
    assert not re.search(r"<(?:script|link|iframe|object|embed)\b", text, re.I)
    assert "url(" not in text and "@import" not in text
    srcs = re.findall(r"""<img[^>]*\ssrc="([^"]+)\"""", text)
    assert srcs and all(s.startswith("data:image/png;base64,") for s in srcs)


def test_contents(page: tuple[Path, report.ReportData]) -> None:
    path, data = page
    text = path.read_text()
    command = data.runs[0].command
    assert html.escape(command) in text  # the exact command, escaped, never raw markup
    assert "<b>&" not in text
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", text, re.S)
    body = [re.sub(r"<[^>]+>", " ", r) for r in rows]
    for sched, load, pol in MEDIANS:
        assert any(f" {sched} " in b and f" {load} " in b and f" {html.escape(pol)} " in b
                   for b in body), (sched, load, pol)
    for r in report.summary_rows(data):
        assert html.escape(words.row_verdict_text(r)) in text
        for w in r.warnings:
            assert html.escape(caveats.caveat_text(w)) in text
    for needle in ("Synthetic CPU", "performance", "6.1.0-test", "loop7", "Seed",
                   "backburner", "Mann\u2013Whitney", "Cliff", "Tukey", "bootstrap",
                   "\u00b125%", html.escape(words.band_rule_text()),
                   "Verdict: ratio to unloaded"):
        assert needle in text, needle
    n_plots = len(plot.figures(data))
    imgs = re.findall(r"<img\b[^>]*>", text)
    assert len(imgs) == n_plots == 4  # box, ECDF, run order, scatter
    for tag in imgs:  # every inline image is a valid PNG
        b64 = re.search(r'base64,([^"]+)"', tag).group(1)
        with Image.open(io.BytesIO(base64.b64decode(b64))) as im:
            im.verify()


def _statistics_used(text: str) -> str:
    """The page's "Statistics used" section, without its markup."""
    section = text.split("<h2>Statistics used</h2>", 1)[1].split("</ul>", 1)[0]
    return html.unescape(re.sub(r"<[^>]+>", "", section))


def test_statistics_used_names_the_method_the_run_used(
        page: tuple[Path, report.ReportData], tmp_path: Path) -> None:
    """A fixed-count run's ratios are bootstraps; a run that stopped once decided is judged
    on paired sequential intervals, and its page says so -- with the verdicts it can give,
    never a verdict it cannot ("inconclusive"), and the band it used."""
    fixed = _statistics_used(page[0].read_text())
    assert "percentile-bootstrap" in fixed and "paired sequential" not in fixed
    make_db(tmp_path / "s.db", trials=12, settings={"min_runs": 6, "max_runs": 12})
    out = tmp_path / "s.html"
    html_report.write_html(report.load(str(tmp_path / "s.db")), str(out))
    seq = _statistics_used(out.read_text())
    assert "paired sequential CI" in seq and "Howard & Ramdas" in seq
    assert "percentile-bootstrap" not in seq
    assert "at least 6 trials, at most 12" in seq
    for text in (fixed, seq):
        assert "inconclusive" not in text and "idle" not in text
        for verdict in ("slower", "faster", "at most", "indistinguishable", "undecided"):
            assert verdict in text
        assert words.band_rule_text() in text
        assert "docs/design/statistics.md" in text
    tight = tmp_path / "t.html"
    html_report.write_html(page[1], str(tight), tolerance=0.05)
    assert "\u00b15%, given with --tolerance" in _statistics_used(tight.read_text())


def _chromium(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Chromium with a home of its own under `tmp`: GLib's settings otherwise leave a dconf
    cache in root's home (~/.cache/dconf) on every run of the suite."""
    home = {"HOME": str(tmp / "home"), "XDG_CACHE_HOME": str(tmp / "home" / ".cache"),
            "XDG_CONFIG_HOME": str(tmp / "home" / ".config"),
            "XDG_RUNTIME_DIR": str(tmp / "home" / "run")}
    for path in home.values():
        os.makedirs(path, mode=0o700, exist_ok=True)
    return subprocess.run(
        [CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={tmp / 'profile'}", *args],
        capture_output=True, text=True, timeout=90, cwd=tmp, env={**os.environ, **home})


@needs_chromium
def test_renders_in_chromium(page: tuple[Path, report.ReportData], tmp_path: Path) -> None:
    path, data = page
    shot = tmp_path / "shot.png"
    res = _chromium(tmp_path, "--enable-logging=stderr", "--v=0", f"--screenshot={shot}",
                    "--window-size=1400,3000", f"file://{path}")
    assert res.returncode == 0, res.stderr[-2000:]
    console = [ln for ln in res.stderr.splitlines()
               if "Uncaught" in ln or "CONSOLE" in ln or "Refused to" in ln
               or "net::ERR" in ln]
    assert console == [], console
    assert shot.exists()
    with Image.open(shot) as im:
        rgb = im.convert("RGB")
        assert rgb.size == (1400, 3000)
        colours = rgb.getcolors(maxcolors=1 << 20)
        assert colours is not None and len(colours) > 500  # text, tables and plots
        top = rgb.crop((0, 0, 1400, 600))
        assert len(top.getcolors(maxcolors=1 << 20)) > 50  # the header and table, not blank

    dom = _chromium(tmp_path, "--dump-dom", f"file://{path}")
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert len(re.findall(r"<img\b", dom.stdout)) == len(plot.figures(data))
    assert "Start-up latency under background IO" in dom.stdout


#: What the overflow check runs in the page (the report itself carries no script, and its
#: Content-Security-Policy forbids one: a copy allows this one): every element whose box
#: ends right of the viewport, or that scrolls sideways, one per line into a <pre>.
OVERFLOW_JS = """<script>
window.addEventListener("load", () => {
  const width = document.documentElement.clientWidth, bad = [];
  if (document.documentElement.scrollWidth > width) bad.push("the page scrolls sideways");
  for (const el of document.querySelectorAll("main *")) {
    const name = el.tagName + (el.className ? "." + el.className : "");
    if (el.getBoundingClientRect().right > width + 0.5) bad.push(name + " ends off the page");
    if (el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).overflowX !== "visible")
      bad.push(name + " scrolls sideways");
  }
  const out = document.createElement("pre");
  out.id = "overflow";
  out.textContent = "checked " + width + "\\n" + bad.join("\\n");
  document.body.appendChild(out);
});
</script>"""

LONG = "cmd:/usr/lib/x86_64-linux-gnu/packagekit/packagekitd-offline-update-with-a-long-name"


def overflowing(tmp: Path, page: Path, width: int) -> list[str]:
    """The elements of `page` that do not fit a window `width` px wide, as Chromium lays
    it out (a few seconds)."""
    text = page.read_text().replace("default-src 'none';",
                                    "default-src 'none'; script-src 'unsafe-inline';")
    probe = tmp / "probe.html"
    probe.write_text(text.replace("</body>", OVERFLOW_JS + "</body>", 1))
    dom = _chromium(tmp, f"--window-size={width},900", "--virtual-time-budget=3000",
                    "--dump-dom", f"file://{probe}")
    assert dom.returncode == 0, dom.stderr[-2000:]
    found = re.search(r'<pre id="overflow">checked (\d+)\n?(.*?)</pre>', dom.stdout, re.S)
    assert found is not None, dom.stdout[-2000:]
    assert int(found.group(1)) > width - 40  # the width asked for (less a scrollbar)
    return [ln for ln in html.unescape(found.group(2)).splitlines() if ln]


@needs_chromium
def test_the_report_fits_1280_px_with_long_names_and_verdicts(tmp_path: Path) -> None:
    """A summary table wider than the page hid its last columns behind a scrollbar (the
    "Bulk" header off-screen, "0.93× [0" cut): long loads, policies, probes and the
    verdicts of a run until decided, with the load's own speed, must wrap to fit."""
    medians = {("mq-deadline", "none", "-"): 0.27, ("mq-deadline", LONG, "default"): 3.4,
               ("mq-deadline", LONG, "background-with-a-long-name"): 1.3,
               ("bfq", "none", "-"): 0.3, ("bfq", LONG, "default"): 0.9,
               ("bfq", LONG, "background-with-a-long-name"): 0.31}
    make_db(tmp_path / "r.db", medians=medians, trials=8, probe="/usr/bin/libreoffice "
            "--writer --norestore --nologo --with-a-very-long-argument-list",
            bulk={k: (5e7, 1) for k in medians if k[1] != "none"},
            settings={"min_runs": 6, "max_runs": 8, "tolerance": 0.1})
    out = tmp_path / "report.html"
    html_report.write_html(report.load(str(tmp_path / "r.db")), str(out))
    assert overflowing(tmp_path, out, 1280) == []


# --- strict HTML5, and hostile strings in every stored field ---------------------------------

HOSTILE = ['<script>alert(1)</script>', '"><img src=x onerror=alert(2)>', "</td></tr><td>",
           "&amp;&lt;", "' onmouseover='alert(3)", "<!--", "]]>", "\u202egnp.exe", "$$x$$ $HOME"]


def _strict_parse(text: str):  # noqa: ANN202 - an html5lib tree
    import html5lib

    parser = html5lib.HTMLParser(strict=True, namespaceHTMLElements=False)
    return parser.parse(text)


def test_the_page_is_valid_html5(page: tuple[Path, report.ReportData]) -> None:
    path, _ = page
    _strict_parse(path.read_text())  # raises on any parse error (unclosed, stray end tags)


def _hostile_db(path: Path) -> None:
    from backburner.store import Store
    from backburner.store.cell import Cell

    store = Store.create(str(path))
    env = {h: h for h in HOSTILE} | {"device": {h: [h, {"x": h}] for h in HOSTILE}}
    config = {"probes": HOSTILE, "note": HOSTILE[1]}
    run = store.add_run(" ".join(HOSTILE), config, 7, env, HOSTILE[0])
    t = 1_700_000_000.0
    for i, h in enumerate(HOSTILE):
        for load, policy in (("none", "-"), (h, h)):
            cid = store.add_cell(run, Cell(h, HOSTILE[-1 - i], h, load, policy))
            for rnd in range(7):
                store.add_trial(run, cid, round=rnd, warmup=int(rnd == 0), status="ok",
                                cold=1, wall_s=0.1 + 0.01 * rnd + (0.3 if load != "none" else 0),
                                in_blocks=100, started_at=t, ended_at=t + 1,
                                extra={"note": h})
                t += 2
    store.finish_run(run)
    store.close()


def test_hostile_strings_in_every_stored_field_stay_text(tmp_path: Path) -> None:
    _hostile_db(tmp_path / "h.db")
    data = report.load(str(tmp_path / "h.db"))
    out = tmp_path / "h.html"
    html_report.write_html(data, str(out))
    text = out.read_text()
    tree = _strict_parse(text)
    elements = list(tree.iter())
    assert not [e for e in elements if e.tag == "script"]
    assert not [e for e in elements if any(a.lower().startswith("on") for a in e.attrib)]
    imgs = [e for e in elements if e.tag == "img"]
    assert imgs and all(e.attrib["src"].startswith("data:image/png;base64,") for e in imgs)
    flat = "".join(tree.itertext())
    for h in HOSTILE:
        assert h in flat  # shown as text, exactly


def test_hostile_strings_in_the_markdown_export(tmp_path: Path) -> None:
    _hostile_db(tmp_path / "h.db")
    data = report.load(str(tmp_path / "h.db"))
    out = io.StringIO()
    report.export_to(data, "markdown", out)
    table = [ln for ln in out.getvalue().splitlines() if ln.startswith("|")]
    header_cells = table[0].count(" | ")
    for row in table[2:]:  # every row keeps the column count: no | or newline got through
        assert re.sub(r"\\\|", "", row).count(" | ") == header_cells, row
    outside_code = re.sub(r"(`+).*?\1", "", out.getvalue())  # code spans show text as is
    assert not re.search(r"(?<!\\)<", outside_code)  # every other < is escaped


def test_a_prepare_column_only_when_a_cell_has_a_prepare_step(tmp_path: Path) -> None:
    make_db(tmp_path / "p.db", medians=PREPARED, trials=6)
    make_db(tmp_path / "o.db", trials=6)
    for name, prepared in (("p.db", True), ("o.db", False)):
        data = report.load(str(tmp_path / name))
        table = html_report._html_table(data, report.summary_rows(data), "95%")
        assert ("<th>Prepare</th>" in table) == prepared
        assert table.count("<code>replay</code>") == (2 if prepared else 0)
        heads = len(re.findall(r"<th[ >]", table))
        assert all(row.count("<td") == heads for row in re.findall(r"<tr class.*?</tr>", table))


def test_why_names_whose_requests_the_probe_waited_behind(tmp_path: Path) -> None:
    """A journal with few bytes but many requests (a seek each on a rotating disk) leads the
    requests column while the probe's own reads lead the bytes column."""
    import json
    import sqlite3

    db = tmp_path / "w.db"
    make_db(db, trials=4)
    conn = sqlite3.connect(db)
    io_by = {"method": "perf", "unattributed": {"requests": 0, "bytes": 0}, "groups": {
        "probe": {"requests": 500, "bytes": 130 << 20}, "load": {"requests": 100,
                                                               "bytes": 3 << 20},
        "journal": {"requests": 600, "bytes": 5 << 20}, "writeback": {"requests": 0,
                                                                     "bytes": 0}}}
    extra = json.dumps({"limit_s": 12.0, "io_by": io_by,
                        "counters": {"psi_io_some_s": 7.5}, "nivcsw": 40})
    conn.execute("UPDATE trials SET extra=?", (extra,))
    conn.commit()
    conn.close()
    data = report.load(str(db))
    why = html_report._why(data, report.summary_rows(data))
    first = re.search(r"<tr><td>(.*?)</tr>", why).group(1)
    requests, size = re.findall(r"<td>([a-z]+ \d+%.*?)</td>", first)
    assert requests.startswith("journal 50%, probe 42%, load 8%")
    assert size.startswith("probe 94%")
    assert "7.50" in first or "7.5" in first
