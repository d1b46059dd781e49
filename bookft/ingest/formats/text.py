"""Plain text / Markdown, HTML and JSON Lines: bytes -> documents.

Design choices:
- Byte-level functions (`text_document`, `html_to_text`, `jsonl_documents`) are shared by the file
  extractors here and by the archive extractor (members are never written to disk).
- Non-UTF-8 text is detected and decoded (cp1252, then latin-1) and the fact is recorded; binary
  content (NUL / control bytes) is skipped with a reason.
- JSON Lines: one document per line from the first text-like field; bad lines are counted and
  reported, never fatal. A line may name its own collection (`bookft_collection`, a string): one
  file then holds many collections (synthesized retrieval examples: one per packed sequence).
"""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

from bookft.ingest.documents import Document, Entry, ExtractResult, clean_text, decode_text, looks_binary

TEXT_FIELDS = ("text", "plain_text", "opinion", "body", "content", "html_with_citations", "html")
TITLE_FIELDS = ("title", "case_name", "name", "caption", "id")
COLLECTION_FIELD = "bookft_collection"  # a JSON line's own collection (else the file's)


def text_document(data: bytes, source: str, collection: str, kind: str = "text") -> tuple[Document | None, Entry]:
    if looks_binary(data):
        return None, Entry(source, "skipped", "binary content (NUL or control bytes), not text", kind)
    text, note = decode_text(data)
    text = clean_text(text)
    if not text:
        return None, Entry(source, "skipped", "empty text" + (f" ({note})" if note else ""), kind)
    title = next((ln.lstrip("# ").strip() for ln in text.splitlines() if ln.strip()), "")[:200]
    doc = Document(source=source, collection=collection, kind=kind, text=text, title=title,
                   meta={"encoding_note": note} if note else {})
    return doc, Entry(source, "ingested", note, kind)


class _HTMLText(HTMLParser):
    BLOCK = {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section", "article",
             "blockquote", "pre", "table", "ul", "ol", "header", "footer", "title"}
    SKIP = {"script", "style", "noscript", "template", "head"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skip = 0
        self.title = ""
        self._in_title = False

    def handle_starttag(self, tag, attrs):
        if tag in self.SKIP and tag != "head":
            self.skip += 1
        if tag == "title":
            self._in_title = True
        if tag in self.BLOCK:
            self.parts.append("\n\n" if tag != "br" else "\n")

    def handle_endtag(self, tag):
        if tag in self.SKIP and tag != "head" and self.skip:
            self.skip -= 1
        if tag == "title":
            self._in_title = False
        if tag in self.BLOCK:
            self.parts.append("\n\n")

    def handle_data(self, data):
        if self._in_title:
            self.title += data
            return
        if not self.skip:
            self.parts.append(data)


def html_to_text(data: bytes) -> tuple[str, str]:
    """HTML bytes -> (text, title); scripts/styles dropped, block elements become paragraphs."""
    text, _ = decode_text(data)
    parser = _HTMLText()
    parser.feed(text)
    parser.close()
    body = "".join(parser.parts)
    lines = [" ".join(ln.split()) for ln in body.split("\n")]
    return clean_text("\n".join(lines)), " ".join(parser.title.split())


def html_document(data: bytes, source: str, collection: str, kind: str = "html") -> tuple[Document | None, Entry]:
    text, title = html_to_text(data)
    if not text:
        return None, Entry(source, "skipped", "no text in HTML", kind)
    return Document(source, collection, kind, text, title), Entry(source, "ingested", "", kind)


def jsonl_documents(data: bytes, source: str, collection: str, kind: str = "jsonl") -> tuple[list[Document], Entry]:
    """One document per JSON line with a text field (in the line's `bookft_collection` when it names
    one, else in `collection`); bad lines reported by number."""
    text, note = decode_text(data)
    docs: list[Document] = []
    bad: list[int] = []
    notext: list[int] = []
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            bad.append(i)
            continue
        if not isinstance(obj, dict):
            bad.append(i)
            continue
        field = next((f for f in TEXT_FIELDS if isinstance(obj.get(f), str) and obj[f].strip()), None)
        if field is None:
            notext.append(i)
            continue
        body = obj[field]
        body = html_to_text(body.encode())[0] if field.startswith("html") else clean_text(body)
        title = next((str(obj[f]) for f in TITLE_FIELDS if obj.get(f) not in (None, "")), f"line {i}")
        meta = {k: v for k, v in obj.items()
                if k not in (field, COLLECTION_FIELD) and isinstance(v, (str, int, float, bool))}
        meta["line"] = i
        coll = obj.get(COLLECTION_FIELD)
        docs.append(Document(f"{source}#L{i}", coll if isinstance(coll, str) and coll else collection, kind,
                             body, title[:200], meta))
    reasons = [note] if note else []
    if bad:
        reasons.append(f"{len(bad)} line(s) not a JSON object (first: line {bad[0]})")
    if notext:
        reasons.append(f"{len(notext)} line(s) without a text field {TEXT_FIELDS[:4]} (first: line {notext[0]})")
    if not docs:
        return docs, Entry(source, "failed" if (bad or notext) else "skipped",
                           "; ".join(reasons) or "no JSON lines", kind)
    return docs, Entry(source, "ingested", "; ".join(reasons), kind)


def _read(path: Path, res: ExtractResult, kind: str) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError as e:
        res.entries.append(Entry(str(path), "failed", f"cannot read file: {e.strerror or e}", kind))
        return None


def extract_text_file(path: Path, collection: str, kind: str) -> ExtractResult:
    """A .txt/.md, .html or .jsonl file (kind says which) -> ExtractResult."""
    res = ExtractResult(source=str(path), kind=kind)
    data = _read(path, res, kind)
    if data is None:
        return res
    if kind == "jsonl":
        docs, entry = jsonl_documents(data, str(path), collection)
        res.documents.extend(docs)
    else:
        fn = html_document if kind == "html" else text_document
        doc, entry = fn(data, str(path), collection, kind)
        if doc:
            res.documents.append(doc)
    res.entries.append(entry)
    res.add("files")
    return res
