"""What show and diff print: the same tables as text, Markdown, JSON and a self-contained
HTML page whose bar chart draws the called changes."""

from __future__ import annotations

import io
import json
import re

import pytest

from backburner.trace import diff, render


@pytest.fixture
def two(make_profile, make_run):
    good = make_profile("futex_wait", [make_run(i, {"futex": 4, "read": 50 + i}, nivcsw=5,
                                                cal=10 + i) for i in range(5)])
    bad = make_profile("spin | <wait> *x*", [make_run(i, {"sched_yield": 89000 + i, "read": 51 + i},
                                                    nivcsw=3000 + i, cal=12 - i)
                                           for i in range(5)])
    return good, bad


def _text(lines, tables) -> str:
    buf = io.StringIO()
    render.write_text(lines, tables, buf)
    return buf.getvalue()


def test_show_tables(two) -> None:
    _, bad = two
    tables = render.show_tables(bad)
    text = _text(render.header_lines(bad), tables)
    assert "sched_yield" in text and "89,002 [89,000\u201389,004]" in text
    assert "involuntary context switches" in text and "function call IPIs (CAL)" in text
    assert "tracer overhead: not measured" in text
    by_thread = _text([], render.show_tables(bad, by="thread"))
    assert "worker" in by_thread and "futex 3" in by_thread
    by_process = _text([], render.show_tables(bad, by="process", run=4))
    assert "Processes of run 5" in by_process
    data = render.show_json(bad)
    assert data["runs"][0]["metrics"]["syscall:sched_yield:calls"] == 89000


def test_diff_text_lists_changes_then_noise(two) -> None:
    d = diff.diff(*two)
    text = _text(render.diff_header(d), render.diff_tables(d))
    changed, noise = text.split("Noise:")
    first = changed.split("Changed")[1].splitlines()[3]
    assert first.startswith("sched_yield calls") and "from 0" in first
    assert "involuntary context switches" in changed and "read calls" in noise
    assert "Mann\u2013Whitney" in text


def test_diff_markdown_escapes(two) -> None:
    d = diff.diff(*two)
    md = render.to_markdown(render.diff_header(d), render.diff_tables(d))
    assert "spin \\| \\<wait\\> \\*x\\*" in md  # a pipe in a label cannot break the table
    table_rows = [ln for ln in md.splitlines() if ln.startswith("| sched\\_yield calls")]
    assert len(table_rows) == 1 and table_rows[0].count(" | ") == 5


def test_diff_json_is_strict(two) -> None:
    d = diff.diff(*two)
    data = json.loads(render.to_json(d.to_dict()))
    assert data["changed"][0]["key"] == "syscall:sched_yield:calls"
    assert data["b"]["label"] == "spin | <wait> *x*" and data["alpha"] == 0.05


def test_html_is_self_contained_with_a_bar_chart(two) -> None:
    d = diff.diff(*two)
    page = render.to_html(d)
    assert page.count('src="data:image/png;base64,') == 1
    assert not re.search(r"(src|href)=\"(?!data:)", page)
    assert "<script" not in page and "<wait>" not in page
    assert "spin | &lt;wait&gt; *x*" in page


def test_bar_chart_draws_each_called_change(two, monkeypatch) -> None:
    from matplotlib.figure import Figure

    drawn = []
    real = Figure.savefig

    def keep(self, *a, **kw):
        drawn.append({a.get_gid() for ax in self.axes for a in ax.patches})
        return real(self, *a, **kw)

    monkeypatch.setattr(Figure, "savefig", keep)
    d = diff.diff(*two)
    assert render.bar_chart(d) is not None
    assert drawn[0] == {f"bar:{r.key}" for r in d.changed[:15]}
    empty = diff.diff(two[0], two[0])
    assert render.bar_chart(empty) is None


def test_thread_names_are_shown_escaped(make_profile, make_run) -> None:
    """A traced program names its own threads (prctl PR_SET_NAME): an escape sequence in a
    name is shown escaped in the text tables and the Markdown (rich passes ESC on)."""
    run = make_run(0, {"read": 5})
    run.threads[1].comm = "\x1b]2;pwned\x07\x1b[2J"
    p = make_profile("job", [run])
    for text in (_text([], render.show_tables(p, by="thread")),
                 render.to_markdown([], render.show_tables(p, by="thread"))):
        assert "\x1b" not in text and "\x07" not in text
        assert "2;pwned" in text and "\\x1b" in text
