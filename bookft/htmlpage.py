"""Self-contained HTML pages (the eval report, the corpus report): figures embedded as base64 PNG data
URIs, plain tables, one inline stylesheet; no scripts, no external files.

Its own bottom-layer module because two layers draw pages: eval (bookft/eval/report.py) and the corpus
report of `bookft inspect --html` (bookft/corpus/html_report.py), which eval must not be below.
"""

from __future__ import annotations

import base64
import html
from pathlib import Path

CSS = ("body{font-family:sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse;"
       "margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}"
       "figure{display:inline-block;margin:0 1em 1em 0}.big{font-size:1.3em}")


def img(path: Path) -> str:
    """A figure with the PNG at `path` embedded (and linked by its file name, which sits next to the page)."""
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    name = html.escape(path.name)
    return (f'<figure><img src="data:image/png;base64,{data}" alt="{name}">'
            f'<figcaption><a href="{name}">{name}</a></figcaption></figure>')


def table(header: list[str], rows: list[list[object]]) -> str:
    th = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def page(title: str, body: str) -> str:
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{CSS}</style></head><body><h1>{html.escape(title)}</h1>{body}</body></html>")
