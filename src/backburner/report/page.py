"""The HTML page every self-contained page of backburner is built in (the report, a trace
diff): one look, one head with a Content-Security-Policy that allows nothing but inline
styles and data: images, one escaping rule."""

from __future__ import annotations

import html

CSS = """
:root { --fg:#1d232b; --muted:#5b6673; --line:#d8dde3; --bg:#ffffff; --soft:#f5f7f9;
  --red:#b42318; --green:#1a7f37; --amber:#9a6700; }
* { box-sizing: border-box; }
body { margin:0; background:var(--bg); color:var(--fg);
  font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Noto Sans","DejaVu Sans",sans-serif; }
main { max-width:1360px; margin:0 auto; padding:28px 28px 64px; }
.scroll { overflow-x:auto; }
.legend { color:var(--muted); font-size:13px; margin:8px 0 0; }
h1 { font-size:26px; margin:0 0 4px; }
h2 { font-size:19px; margin:36px 0 10px; padding-bottom:4px; border-bottom:1px solid var(--line); }
h3 { font-size:15px; margin:18px 0 6px; }
.sub { color:var(--muted); margin:0 0 16px; }
code, pre, .num { font-family:ui-monospace,"SFMono-Regular","DejaVu Sans Mono",Menlo,monospace; }
pre { background:var(--soft); border:1px solid var(--line); border-radius:6px; padding:10px 12px;
  overflow-x:auto; font-size:13px; white-space:pre-wrap; word-break:break-all; margin:6px 0; }
table { border-collapse:collapse; width:100%; font-size:13.5px; }
th, td { padding:6px 9px; border-bottom:1px solid var(--line); text-align:left;
  vertical-align:top; }
th { background:var(--soft); font-weight:600; white-space:nowrap; }
td.num, th.num { text-align:right; white-space:nowrap; font-size:12.5px; }
table.summary th, table.summary td.num { white-space:normal; }
table.summary td:nth-child(-n+3) { overflow-wrap:anywhere; }
table.summary td code { font-size:12.5px; }
table.summary th, table.summary td { padding:6px 7px; }
tr.base td { background:#fafbfc; color:var(--muted); }
tr.group td { border-top:2px solid var(--line); }
.v { font-weight:600; }
.v-slower, .v-timed-out { color:var(--red); }
.v-faster, .v-indistinguishable { color:var(--green); }
.v-inconclusive, .v-no-baseline, .v-no-data { color:var(--amber); }
.v-baseline { color:var(--muted); font-weight:400; }
table.summary small { color:var(--muted); font-size:11.5px; }
table.summary th small { font-weight:400; }
table.summary td.v { min-width:230px; font-size:13px; }
td.bad { color:var(--red); font-weight:600; }
.warn { background:#fff8e6; border:1px solid #f0d58c; border-radius:6px;
  padding:10px 14px 10px 30px; margin:8px 0; }
.warn li { margin:3px 0; }
.ok { color:var(--green); }
figure { margin:16px 0 28px; }
figure img { display:block; max-width:100%; height:auto; border:1px solid var(--line);
  border-radius:6px; }
figcaption { color:var(--muted); font-size:13px; margin-top:6px; }
.kv { width:auto; min-width:50%; }
.kv th { width:220px; background:none; font-weight:600; color:var(--muted); }
details summary { cursor:pointer; color:var(--muted); margin:6px 0; }
.notes li { margin:4px 0; }
footer { margin-top:40px; color:var(--muted); font-size:12px; }
"""


def escape(value: object) -> str:
    return html.escape(str(value), quote=True)


def head(title: str) -> list[str]:
    """The opening of a page, up to the start of its <main>."""
    return ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
            "img-src data:; style-src 'unsafe-inline'\">",
            f"<title>{escape(title)}</title><style>{CSS}</style></head><body><main>"]
