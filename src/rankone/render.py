"""One renderer for the report page (report.html) and the published pages (rankone.publish):
one stylesheet, one way to turn a report section's blocks into HTML, one page frame.

A block is a paragraph (str; `**x**` is bold), a table (DataFrame), a figure (("figure",
file name), captioned from the registry, rankone.outputs) or HTML written by the caller (Raw).
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable

import pandas as pd

from rankone.outputs import FIGURES

STYLE = """
*{box-sizing:border-box}body{font:15px/1.5 system-ui,sans-serif;margin:0;color:#1d1d1f}
header{background:#f4f4f6;border-bottom:1px solid #ddd;padding:.5em 1.5em}
header a{margin-right:1em}main{max-width:1240px;margin:0 auto;padding:0 1.5em 3em}
h1{font-size:1.4em;margin:.3em 0}p.method{font-size:13px;color:#444}
h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #eee}
.answer figure{margin:.5em 0}.answer figure img{width:100%;max-height:55vh;object-fit:contain}
.answer ul{margin:0;padding-left:1.1em;font-size:13px;line-height:1.4}.answer li{margin-bottom:.35em}
table.verdicts tr.rank1 td{font-weight:600;background:#e8f1fb}table.verdicts td:first-child{text-align:left}
figure{margin:1em 0}figure img{max-width:100%;height:auto;max-height:640px}figcaption{color:#555;font-size:13px}
table{border-collapse:collapse;font-size:13px;margin:.5em 0}td,th{padding:3px 8px;border-bottom:1px solid #ddd;
text-align:right}th{background:#fafafa}.scroll{overflow-x:auto}.note{background:#fff6e0;padding:.6em 1em;
border-left:4px solid #e0a800}code,pre{background:#f4f4f6;padding:2px 4px}pre{padding:.6em;overflow-x:auto}
nav.toc{font-size:13px;margin:.5em 0}nav.toc a{margin-right:.8em}tr.differs td{background:#fff6e0}
"""


class Raw(str):
    """HTML written by the caller, inserted as it is."""


def text(block: str) -> str:
    """A paragraph's text as HTML: escaped, `**x**` in bold."""
    return re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", html.escape(block))


def block(b, src: Callable[[str], str] = lambda name: name) -> str:
    """One block as HTML; `src` gives a figure's image source from its file name (a relative path
    for the site, a data: URI for the self-contained report)."""
    if isinstance(b, Raw):
        return b
    if isinstance(b, pd.DataFrame):
        return f'<div class="scroll">{b.to_html(index=False, border=0, na_rep="")}</div>'
    if isinstance(b, tuple):
        caption = html.escape(FIGURES[b[1]].caption)
        return (
            f'<figure><img src="{html.escape(src(b[1]))}" alt="{caption}"><figcaption>{caption}</figcaption></figure>'
        )
    return f"<p>{text(b)}</p>"


def page(title: str, body: str, home: str | None = None) -> str:
    """A whole page; `home`: the site index the header links to (none for a stand-alone report)."""
    header = f"<header><a href='{home}'>rankone: all studies</a></header>" if home else ""
    return (
        f"<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        f"<meta name='viewport' content='width=device-width,initial-scale=1'><link rel='icon' href='data:,'>"
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>{header}"
        f"<main>{body}</main></body></html>\n"
    )
