"""A ``Page`` (``page.py``) as Markdown (images linked beside it) and as one self-contained HTML
file (images embedded as data URIs, no script or style from the network). The HTML page counts
its images that loaded into ``<body data-images-loaded="N">`` once the page has loaded, so a
headless browser's DOM dump tells whether every figure rendered (tests/report/test_browser.py).
"""
from __future__ import annotations

import base64
from html import escape
from pathlib import Path

from report.page import Page, Section, Table

STYLE = """
body { font-family: sans-serif; max-width: 70rem; margin: 2rem auto; padding: 0 1rem;
       color: #222; line-height: 1.45; }
table { border-collapse: collapse; margin: 0.5rem 0 1.5rem; font-size: 0.9rem; }
th, td { border: 1px solid #bbb; padding: 0.2rem 0.5rem; text-align: left; vertical-align: top; }
th { background: #eee; }
img { max-width: 100%; display: block; margin: 0.5rem 0; }
code { background: #f4f4f4; padding: 0 0.2rem; }
caption { text-align: left; font-weight: bold; padding: 0.3rem 0; }
"""
COUNT_IMAGES = """
window.addEventListener("load", function () {
  var ok = Array.prototype.filter.call(document.images,
    function (i) { return i.complete && i.naturalWidth > 0; });
  document.body.setAttribute("data-images-loaded", String(ok.length));
});
"""


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _md_table(table: Table) -> list[str]:
    lines = ["| " + " | ".join(map(_md_cell, table.columns)) + " |",
             "|" + "---|" * len(table.columns)]
    lines += ["| " + " | ".join(map(_md_cell, row)) + " |" for row in table.rows]
    return lines + [""]


def markdown(page: Page) -> str:
    lines = [f"# {page.title}", "", "## Published claims", ""]
    lines += _md_table(page.summary) if page.summary.rows else ["No published claims.", ""]
    for s in page.sections:
        lines += [f"## {s.title}", ""]
        for text in s.paragraphs:
            lines += [text, ""]
        if s.command:
            lines += [f"Command: `{s.command}`", ""]
        lines += [f"![{s.anchor}]({image})" for image in s.images] + ([""] if s.images else [])
        lines += [f"- [{link}]({link})" for link in s.links] + ([""] if s.links else [])
        for caption, table in s.tables:
            lines += ([f"**{caption}**", ""] if caption else []) + _md_table(table)
    return "\n".join(lines).rstrip() + "\n"


def _html_table(table: Table, caption: str | None = None) -> str:
    head = "".join(f"<th>{escape(c)}</th>" for c in table.columns)
    body = "".join("<tr>" + "".join(f"<td>{escape(v)}</td>" for v in row) + "</tr>"
                   for row in table.rows)
    cap = f"<caption>{escape(caption)}</caption>" if caption else ""
    return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _data_uri(path: Path) -> str:
    kind = {".png": "image/png", ".svg": "image/svg+xml"}.get(path.suffix.lower())
    if kind is None:
        raise ValueError(f"{path}: only PNG and SVG images are embedded")
    return f"data:{kind};base64,{base64.b64encode(path.read_bytes()).decode('ascii')}"


def _html_section(s: Section, folder: Path) -> str:
    parts = [f'<section id="{escape(s.anchor)}"><h2>{escape(s.title)}</h2>']
    parts += [f"<p>{escape(text)}</p>" for text in s.paragraphs]
    if s.command:
        parts.append(f"<p>Command: <code>{escape(s.command)}</code></p>")
    parts += [f'<img alt="{escape(image)}" src="{_data_uri(folder / image)}">' for image in s.images]
    parts += [_html_table(table, caption) for caption, table in s.tables]
    if s.links:
        parts.append("<ul>" + "".join(f'<li><a href="{escape(link)}">{escape(link)}</a></li>'
                                      for link in s.links) + "</ul>")
    return "\n".join(parts) + "</section>"


def html(page: Page, folder: Path) -> str:
    """``folder``: where the page's image paths are relative to."""
    toc = "".join(f'<li><a href="#{escape(s.anchor)}">{escape(s.title)}</a></li>'
                  for s in page.sections)
    summary = (_html_table(page.summary) if page.summary.rows else "<p>No published claims.</p>")
    body = "\n".join(_html_section(s, folder) for s in page.sections)
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>{escape(page.title)}</title><style>{STYLE}</style>"
            f"<script>{COUNT_IMAGES}</script></head>\n<body>"
            f"<h1>{escape(page.title)}</h1><nav><ul>{toc}</ul></nav>"
            f'<section id="claims"><h2>Published claims</h2>{summary}</section>\n{body}'
            "</body></html>\n")


def write(page: Page, folder: Path) -> tuple[Path, Path]:
    """``folder/report.md`` and ``folder/index.html``."""
    md, page_html = folder / "report.md", folder / "index.html"
    md.write_text(markdown(page))
    page_html.write_text(html(page, folder))
    return md, page_html
