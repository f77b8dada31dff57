"""report.terminal: stored strings are shown as typed, never read as rich markup, and no
control character from a database reaches the terminal."""

from __future__ import annotations

import os
import re
from pathlib import Path

from helpers import PREPARED, bb, make_db

from backburner import report

#: a shell command with a closing tag rich would refuse, a tag it would swallow, and escapes
HOSTILE_LOAD = 'cmd:grep "[/x]" f [red]loud[/red]'
HOSTILE_PROBE = "gimp \x1b[2J\x1b]0;owned\x07--version"


def _hostile_db(path: Path) -> str:
    make_db(path, probe=HOSTILE_PROBE, trials=6,
            medians={("bfq", "none", "-"): 0.3, ("bfq", HOSTILE_LOAD, "default"): 0.9,
                     ("bfq", HOSTILE_LOAD, "[bold]background"): 0.4})
    return str(path)


def test_markup_and_escapes_in_stored_strings_stay_text(tmp_path: Path) -> None:
    data = report.load(_hostile_db(tmp_path / "h.db"))
    for width in (250, 100, 60):
        text = report.render_text(data, width=width)
        assert "\x1b" not in text and "\x07" not in text
        assert "\\x1b[2J" in text  # shown escaped
        if width == 250:
            assert HOSTILE_LOAD in text and "[bold]background" in text


def test_the_cli_report_and_compare_show_them_too(tmp_path: Path) -> None:
    path = _hostile_db(tmp_path / "h.db")
    for args in (("report", path), ("compare", path, path)):
        r = bb(*args, env={**os.environ, "COLUMNS": "250"})
        assert r.returncode == 0, r.err
        assert "Traceback" not in r.err
        assert HOSTILE_LOAD in r.out and "[bold]background" in r.out
        assert "\x1b" not in r.out and "\x07" not in r.out


def test_a_prepare_column_only_when_a_cell_has_a_prepare_step(tmp_path: Path) -> None:
    make_db(tmp_path / "p.db", medians=PREPARED, trials=6)
    make_db(tmp_path / "o.db", trials=6)
    prepared, ordinary = (report.load(str(tmp_path / n)) for n in ("p.db", "o.db"))
    for width in (250, 60):
        text = report.render_text(prepared, width=width)
        assert "replay" in text
        assert ("Prepare" in text) == (width == 250)  # stacked into the cell when narrow
    assert "Prepare" not in report.render_text(ordinary, width=250)


def test_recommend_shows_them_escaped_too(tmp_path: Path) -> None:
    r = bb("report", _hostile_db(tmp_path / "h.db"), "--recommend")
    assert r.returncode == 0, r.err
    assert "\x1b" not in r.out and "\\x1b[2J" in r.out and HOSTILE_LOAD in r.out


def test_a_wide_table_keeps_each_cell_on_one_line(tmp_path: Path) -> None:
    """Written to a file, the table's last column broke over two lines ("1624 MB/s" then
    "unprotected"): where the table fits, every cell is one line, so a row is one line."""
    slow, fast = ("bfq", "readers:1:seq", "default"), ("bfq", "readers:1:seq", "background")
    make_db(tmp_path / "b.db", medians={("bfq", "none", "-"): 0.3, slow: 0.9, fast: 0.4},
            bulk={slow: (1624e6, 1), fast: (900e6, 1)})
    lines = [x for x in report.render_text(report.load(str(tmp_path / "b.db")),
                                           width=250).splitlines() if x.startswith("bfq")]
    (unprotected,) = [x for x in lines if "unprotected" in x and "MB/s" in x]
    assert "readers:1:seq" in unprotected and "default" in unprotected
    (protected,) = [x for x in lines if "background" in x and "MB/s" in x]
    assert "(n=10)" in protected


#: a network study (`bench --net-link`): the device is the link, the scheduler its queue
LINK = "link:1mbit:0ms:300ms"
NET = {("fifo", "none", "-"): 0.075, ("fifo", "download:4", "default"): 2.1,
       ("fifo", "download:4", "background"): 0.085}


def test_a_network_study_reads_in_the_links_words(tmp_path: Path) -> None:
    make_db(tmp_path / "n.db", medians=NET, device=LINK, probe="net:page", cold=0, trials=8,
            bulk={("fifo", "download:4", "default"): (117_000, 1),
                  ("fifo", "download:4", "background"): (99_000, 1)})
    data = report.load(str(tmp_path / "n.db"))
    text = report.render_text(data, width=250)
    assert text.startswith(f"net:page on {LINK}")
    header = next(ln for ln in text.splitlines() if "Median" in ln)
    assert "Queue" in header and "BG kbit/s rx/tx" in header and "Scheduler" not in header
    rows = {tuple(ln.split()[1:3]): ln for ln in text.splitlines() if ln.startswith("fifo ")}
    # 117 and 99 kB/s, each run within a few % of it
    assert re.search(r" 9[0-6]\d kbit/s, unprotected", rows["download:4", "default"])
    assert re.search(r" [78]\d\d kbit/s, 0\.8\d", rows["download:4", "background"])
    assert "slower than unloaded" in rows["download:4", "default"]
    # a link has no cache: no "(warm)" marks and no warning about undropped caches
    assert "(warm)" not in text and "caches were not dropped" not in text
    flat = " ".join(text.split())  # the legend wraps
    assert "unloaded cell of the same link" in flat and "kbit/s received / sent" in flat
    page = tmp_path / "n.html"
    from backburner.report import html as html_report

    html_report.write_html(data, str(page))
    body = page.read_text()
    assert "<th>Queue</th>" in body and "BG kbit/s" in body and "(warm)" not in body
    assert "unloaded median of the same link" in body
    r = bb("compare", str(tmp_path / "n.db"), str(tmp_path / "n.db"),
           env={**os.environ, "COLUMNS": "250"})
    assert r.returncode == 0, r.err
    assert "Queue" in r.out and "Scheduler" not in r.out
    from backburner.report.export.markdown import render_markdown

    md = render_markdown(data)
    assert "| Queue | Load |" in md and "BG kbit/s rx/tx" in md and "Scheduler" not in md


def test_the_legend_says_each_scheduler_s_band_and_why(tmp_path: Path) -> None:
    """Every report shows the band its verdicts were judged against: the rule, and per
    unloaded cell its width and what set it (the cap for a 0.3 s start, 100 ms of a 0.6 s
    one), or the band given by hand."""
    make_db(tmp_path / "b.db", medians={("bfq", "none", "-"): 0.3, ("bfq", "copy", "default"): 0.9,
                                        ("kyber", "none", "-"): 0.6,
                                        ("kyber", "copy", "default"): 0.9})
    data = report.load(str(tmp_path / "b.db"))
    legend = " ".join(report.render_text(data, width=400).split())
    assert ("band = the difference a person notices (more than 10% and more than 100 ms of "
            "the unloaded start, at most \u00b125%): ") in legend
    assert re.search(r"bfq \u00b125% \(the widest band: 100 ms would be 3\d% of a 0\.\d+ s "
                     r"start\)", legend), legend
    assert re.search(r"kyber \u00b11[67](\.\d)?% \(100 ms of a 0\.\d+ s start\)", legend), legend
    given = " ".join(report.render_text(data, width=400, tolerance=0.05).split())
    assert "band = \u00b15%, given with --tolerance;" in given
