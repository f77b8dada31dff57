"""The page shell shared by the report and trace diffs."""

from __future__ import annotations

from backburner.report import page as htmlpage


def test_the_head_allows_nothing_but_inline_styles_and_data_images() -> None:
    text = "\n".join(htmlpage.head('<script>alert("x")</script>'))
    assert "default-src 'none'; img-src data:; style-src 'unsafe-inline'" in text
    assert "<script>" not in text and "&lt;script&gt;" in text
    assert text.endswith("<body><main>") and htmlpage.CSS in text
